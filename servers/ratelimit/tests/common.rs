//! Starts the real binary on ephemeral loopback ports and talks raw HTTP/1.1 to it, so
//! tests can send anything, malformed bytes included. The process guard and the HTTP
//! client come from the `test-support` crate; what is particular to this server (its
//! settings, the line announcing its ports, rules under `config/`, gRPC) is here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

pub use test_support::http::Response as HttpResponse;
use test_support::process::{Capture, Proc};

pub struct Server {
    /// The process, its stderr lines in `proc.lines`.
    pub proc: Proc,
    pub http: SocketAddr,
    pub debug: SocketAddr,
    /// `host:port`, or `unix:/path`.
    pub grpc: String,
    pub dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.proc.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh directory with an empty `config/` in it.
pub fn temp_dir(tag: &str) -> PathBuf {
    let dir = test_support::net::temp_dir("rl-test", tag);
    std::fs::create_dir_all(dir.join("config")).unwrap();
    dir
}

pub fn command(dir: &std::path::Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratelimit"));
    cmd.env_clear()
        .env("HOST", "127.0.0.1")
        .env("PORT", "0")
        .env("DEBUG_HOST", "127.0.0.1")
        .env("DEBUG_PORT", "0")
        .env("GRPC_HOST", "127.0.0.1")
        .env("GRPC_PORT", "0")
        .env("BACKEND_TYPE", "memory")
        .env("RUNTIME_ROOT", dir)
        .env("LOG_LEVEL", "info");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Starts the server with `rules` written as files under `config/`.
pub fn start(rules: &[(&str, &str)], env: &[(&str, &str)]) -> Server {
    start_in(temp_dir("srv"), rules, env)
}

/// Like [`start`], in a directory the caller prepared (e.g. with TLS files).
pub fn start_in(dir: PathBuf, rules: &[(&str, &str)], env: &[(&str, &str)]) -> Server {
    let cmd = command(&dir, env);
    start_command(dir, rules, cmd)
}

/// Like [`start`], with the process's open file limit (soft and hard) set to `files`, as
/// a host's default limit would be.
pub fn start_with_file_limit(files: u64, rules: &[(&str, &str)], env: &[(&str, &str)]) -> Server {
    let dir = temp_dir("srv");
    let inner = command(&dir, env);
    // prlimit (util-linux) sets the limit, then execs the server in the same process.
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--nofile={files}:{files}"))
        .arg(inner.get_program())
        .env_clear()
        .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    start_command(dir, rules, cmd)
}

fn start_command(dir: PathBuf, rules: &[(&str, &str)], cmd: Command) -> Server {
    for (name, text) in rules {
        std::fs::write(dir.join("config").join(name), text).unwrap();
    }
    let mut proc = Proc::spawn(cmd, Capture::Stderr);
    let Some((http, debug, grpc)) = proc.find_line(Duration::from_secs(20), listening) else {
        proc.kill();
        panic!(
            "server did not report its ports; exit: {:?}",
            proc.child.wait()
        );
    };
    Server {
        proc,
        http,
        debug,
        grpc,
        dir,
    }
}

/// The Prometheus endpoint's address, from the line a server started with
/// `USE_PROMETHEUS=true` prints after its listening line.
pub fn prometheus_addr(srv: &Server) -> SocketAddr {
    let line = srv
        .proc
        .lines
        .recv_timeout(Duration::from_secs(10))
        .unwrap();
    line.strip_prefix("ratelimit: listening prometheus=")
        .unwrap_or_else(|| panic!("{line}"))
        .parse()
        .unwrap()
}

/// The addresses in the server's `ratelimit: listening http=… debug=… grpc=…` line.
pub fn listening(line: &str) -> Option<(SocketAddr, SocketAddr, String)> {
    let rest = line.strip_prefix("ratelimit: listening ")?;
    let mut http = None;
    let mut debug = None;
    let mut grpc = String::new();
    for part in rest.split_whitespace() {
        if let Some(a) = part.strip_prefix("grpc=") {
            grpc = a.to_owned();
        }
        if let Some(a) = part.strip_prefix("http=") {
            http = a.parse().ok();
        }
        if let Some(a) = part.strip_prefix("debug=") {
            debug = a.parse().ok();
        }
    }
    Some((http.unwrap(), debug.unwrap(), grpc))
}

/// One request on a fresh connection (`Connection: close`), body as raw bytes.
pub fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> HttpResponse {
    request_with(addr, method, path, &[], body)
}

/// [`request`] with extra headers.
pub fn request_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    test_support::http::request(addr, method, path, headers, body)
}

/// A gRPC channel (one HTTP/2 connection) to `addr` (`host:port`).
pub async fn channel(addr: &str) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("connect")
}

pub fn post_json(addr: SocketAddr, body: &str) -> HttpResponse {
    request(addr, "POST", "/json", body.as_bytes())
}

pub fn mkfifo(path: &std::path::Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

/// The resident set of a process, in KiB, as the kernel reports it (`VmRSS`).
pub fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {status}"))
}
