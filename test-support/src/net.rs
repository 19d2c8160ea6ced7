//! Loopback ports, temporary directories (and FIFOs in them) and polling.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A port nothing listens on right now (bound to 127.0.0.1:0 and released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A FIFO named `name` in `dir` that nobody writes to: opening it to read waits for
/// ever, which is what a test of "only regular files are read" needs.
pub fn fifo(dir: &std::path::Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    let made = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
    path
}

/// A fresh, empty directory under the system's temporary directory, unique per process
/// and call: `<tmp>/<prefix>-<pid>-<tag>-<n>`.
pub fn temp_dir(prefix: &str, tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Polls `ready` every 50 ms; panics with "`what` did not come up" after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < deadline, "{what} did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether something accepts connections on 127.0.0.1:`port`.
pub fn port_open(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}
