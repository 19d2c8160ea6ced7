//! Starts and stops real store servers for the tests; each is killed when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "rl-store-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub struct Proc {
    pub child: Child,
    pub port: u16,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends one RESP command and returns the raw reply (enough for PING, INFO and the like).
pub fn resp(port: u16, args: &[&str]) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut cmd = format!("*{}\r\n", args.len());
    for a in args {
        cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(cmd.as_bytes()).ok()?;
    let mut buf = vec![0u8; 64 * 1024];
    let n = s.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready() {
        assert!(Instant::now() < deadline, "{what} did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn redis_on(port: u16, extra: &[&str]) -> Proc {
    let dir = temp_dir("redis");
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--dir", dir.to_str().unwrap()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server (apt-get install redis-server)");
    let p = Proc { child, port };
    wait_for("redis-server", || {
        resp(port, &["PING"]).is_some_and(|r| r.starts_with("+PONG"))
    });
    p
}

pub fn redis() -> Proc {
    redis_on(free_port(), &[])
}

/// Three masters, slots spread by redis-cli.
pub fn redis_cluster() -> Vec<Proc> {
    let nodes: Vec<Proc> = (0..3)
        .map(|_| {
            let port = free_port();
            let dir = temp_dir("cluster");
            let conf = dir.join("nodes.conf");
            redis_on(
                port,
                &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    conf.to_str().unwrap(),
                ],
            )
        })
        .collect();
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let out = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("redis-cli");
    assert!(
        out.status.success(),
        "cluster create: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    for n in &nodes {
        wait_for("cluster state ok", || {
            resp(n.port, &["CLUSTER", "INFO"]).is_some_and(|r| r.contains("cluster_state:ok"))
        });
    }
    nodes
}

/// A master and one sentinel watching it as `mymaster`; returns (master, sentinel).
pub fn redis_sentinel() -> (Proc, Proc) {
    let master = redis();
    let port = free_port();
    let dir = temp_dir("sentinel");
    let conf = dir.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {} 1\nsentinel down-after-milliseconds mymaster 5000\n",
            dir.display(),
            master.port
        ),
    )
    .unwrap();
    let child = Command::new("redis-sentinel")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-sentinel (apt-get install redis-sentinel)");
    let sentinel = Proc { child, port };
    wait_for("sentinel", || {
        resp(port, &["SENTINEL", "get-master-addr-by-name", "mymaster"])
            .is_some_and(|r| r.contains(&master.port.to_string()))
    });
    (master, sentinel)
}

pub fn memcached() -> Proc {
    let port = free_port();
    let child = Command::new("memcached")
        .args([
            "-p",
            &port.to_string(),
            "-l",
            "127.0.0.1",
            "-U",
            "0",
            "-u",
            "root",
            "-m",
            "32",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("memcached (apt-get install memcached)");
    wait_for("memcached", || {
        TcpStream::connect(("127.0.0.1", port))
            .and_then(|mut s| {
                s.write_all(b"version\r\n")?;
                let mut b = [0u8; 64];
                let n = s.read(&mut b)?;
                Ok(b[..n].starts_with(b"VERSION"))
            })
            .unwrap_or(false)
    });
    Proc { child, port }
}

/// Reads a key with redis-cli (`-c` follows cluster redirections).
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-c", "-p", &port.to_string()])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
