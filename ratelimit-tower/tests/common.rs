//! The examples and the `ratelimit` server as real processes on loopback ports, stopped
//! by PID (test-support's guard), and the clients that talk to them.
//!
//! The binaries are built by cargo itself, once per test run, so a test never runs a
//! stale example: `cargo test -p ratelimit-tower` builds examples but not another
//! package's binaries, and `cargo test --test integration` builds neither.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use test_support::process::{Capture, Proc};

/// `target/<profile>`, where this test binary lives (in `deps/`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// Builds the two examples and the `ratelimit` binary, once.
fn built() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let cargo = |args: &[&str]| {
            let mut cmd = Command::new(env!("CARGO"));
            // What cargo told this test about its package is not the build's business,
            // and build scripts that watch it (ring's: CARGO_MANIFEST_DIR) would rebuild
            // their crate, and everything above it, on every run.
            for (name, _) in std::env::vars_os() {
                let name = name.to_string_lossy();
                let ours = [
                    "CARGO_PKG_",
                    "CARGO_BIN_",
                    "CARGO_MANIFEST_",
                    "CARGO_CRATE_",
                ]
                .iter()
                .any(|p| name.starts_with(p))
                    || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "OUT_DIR"]
                        .contains(&name.as_ref());
                if ours {
                    cmd.env_remove(name.as_ref());
                }
            }
            let ok = cmd
                .current_dir(&root)
                .env("CARGO_INCREMENTAL", "0")
                .args(args)
                .status()
                .expect("cargo")
                .success();
            assert!(ok, "cargo {args:?} failed");
        };
        // The whole workspace's binaries and examples, as `cargo test --workspace
        // --all-targets` (the README's test command) builds them: there this is a no-op,
        // where building only these two packages would resolve features differently and
        // rebuild half the dependency tree.
        cargo(&["build", "--locked", "--workspace", "--bins", "--examples"]);
        target_dir()
    })
}

/// A running example.
pub struct Example {
    /// Held only: the process is killed when this is dropped.
    _proc: Proc,
    pub addr: SocketAddr,
}

/// Starts example `name` with `env` on a free port and waits for its `listening on`.
pub fn example(name: &str, env: &[(&str, &str)]) -> Example {
    let mut cmd = Command::new(built().join("examples").join(name));
    cmd.env_clear()
        .env("LISTEN", "127.0.0.1:0")
        .envs(env.iter().copied());
    let mut proc = Proc::spawn(cmd, Capture::Stdout);
    let addr = proc.find_line(Duration::from_secs(30), |l| {
        l.strip_prefix("listening on ")?.parse().ok()
    });
    let Some(addr) = addr else {
        proc.kill();
        panic!("example {name} did not start: {:?}", proc.child.wait());
    };
    Example { _proc: proc, addr }
}

/// A `ratelimit` server on Redis at `redis_port`, with `rules` as its one rule file.
pub struct Server {
    pub proc: Proc,
    pub grpc: String,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.proc.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn ratelimit_server(redis_port: u16, rules: &str) -> Server {
    let dir = test_support::net::temp_dir("rl-tower", "srv");
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(dir.join("config/api.yaml"), rules).unwrap();
    let mut cmd = Command::new(built().join("ratelimit"));
    cmd.env_clear()
        .env("HOST", "127.0.0.1")
        .env("PORT", "0")
        .env("DEBUG_HOST", "127.0.0.1")
        .env("DEBUG_PORT", "0")
        .env("GRPC_HOST", "127.0.0.1")
        .env("GRPC_PORT", "0")
        .env("RUNTIME_ROOT", &dir)
        .env("BACKEND_TYPE", "redis")
        .env("REDIS_SOCKET_TYPE", "tcp")
        .env("REDIS_URL", format!("127.0.0.1:{redis_port}"))
        .env("LOG_LEVEL", "warn");
    let proc = Proc::spawn(cmd, Capture::Stderr);
    let grpc = proc.find_line(Duration::from_secs(30), |l| {
        let rest = l.strip_prefix("ratelimit: listening ")?;
        rest.split_whitespace()
            .find_map(|p| p.strip_prefix("grpc="))
            .map(str::to_owned)
    });
    let grpc = grpc.expect("the server announces its ports");
    Server { proc, grpc, dir }
}

/// `GET path` on a fresh connection.
pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> test_support::http::Response {
    test_support::http::request(addr, "GET", path, headers, b"")
}

/// Waits until the window of `seconds` holding now has at least 3 s left, so that a
/// test's requests all fall in one fixed window.
pub fn away_from_window_edge(seconds: u64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let left = seconds - now.as_secs() % seconds;
    if left < 3 {
        std::thread::sleep(Duration::from_secs(left) + Duration::from_millis(100));
    }
}

/// The start of the window of `seconds` holding now.
pub fn window_start(seconds: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    now - now % seconds
}
