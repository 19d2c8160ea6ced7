//! Starts the real binary on ephemeral loopback ports and talks raw HTTP/1.1 to it, so
//! tests can send anything, malformed bytes included.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

pub struct Server {
    pub child: Child,
    pub http: SocketAddr,
    pub debug: SocketAddr,
    /// `host:port`, or `unix:/path`.
    pub grpc: String,
    pub dir: PathBuf,
    pub stderr: mpsc::Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "rl-test-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
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

fn start_command(dir: PathBuf, rules: &[(&str, &str)], mut cmd: Command) -> Server {
    for (name, text) in rules {
        std::fs::write(dir.join("config").join(name), text).unwrap();
    }
    let mut child = cmd.spawn().expect("spawn ratelimit");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = match rx.recv_timeout(left) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                panic!("server did not report its ports; exit: {:?}", child.wait());
            }
        };
        if let Some(rest) = line.strip_prefix("ratelimit: listening ") {
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
            return Server {
                child,
                http: http.unwrap(),
                debug: debug.unwrap(),
                grpc,
                dir,
                stderr: rx,
            };
        }
    }
}

pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
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
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    // The server may answer (413) before it read everything; that is fine.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    parse(&raw)
}

pub fn parse(raw: &[u8]) -> HttpResponse {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    HttpResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(nl) = b.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&b[..nl]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.extend_from_slice(&b[nl + 2..nl + 2 + size]);
        b = &b[nl + 2 + size + 2..];
    }
    out
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
