//! Redis and memcached started from the installed binaries on free loopback ports (each
//! killed by PID when dropped), and tiny RESP and memcached text clients to look inside.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::net::free_port;
use crate::process::{Capture, Proc};

fn temp_dir(tag: &str) -> std::path::PathBuf {
    crate::net::temp_dir("store", tag)
}

/// A store server on 127.0.0.1:`port`, killed (SIGKILL) when dropped.
pub struct Store {
    pub proc: Proc,
    pub port: u16,
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

fn wait_for(what: &str, ready: impl FnMut() -> bool) {
    crate::net::wait_for(what, Duration::from_secs(20), ready);
}

fn spawn(cmd: &mut Command, port: u16, hint: &str) -> Store {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect(hint);
    Store {
        proc: Proc::adopt(child, Capture::Nothing),
        port,
    }
}

pub fn redis_on(port: u16, extra: &[&str]) -> Store {
    let dir = temp_dir("redis");
    let child = spawn(
        Command::new("redis-server")
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
            .args(extra),
        port,
        "redis-server (apt-get install redis-server)",
    );
    let p = child;
    wait_for("redis-server", || {
        resp(port, &["PING"]).is_some_and(|r| r.starts_with("+PONG"))
    });
    p
}

pub fn redis() -> Store {
    redis_on(free_port(), &[])
}

/// Three masters, slots spread by redis-cli.
pub fn redis_cluster() -> Vec<Store> {
    let nodes: Vec<Store> = (0..3)
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
pub fn redis_sentinel() -> (Store, Store) {
    redis_sentinel_with(&[])
}

/// A sentinel watching one master started with `extra` settings.
pub fn redis_sentinel_with(extra: &[&str]) -> (Store, Store) {
    let master = redis_on(free_port(), extra);
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
    let child = spawn(
        Command::new("redis-sentinel").arg(&conf),
        port,
        "redis-sentinel (apt-get install redis-sentinel)",
    );
    let sentinel = child;
    wait_for("sentinel", || {
        resp(port, &["SENTINEL", "get-master-addr-by-name", "mymaster"])
            .is_some_and(|r| r.contains(&master.port.to_string()))
    });
    (master, sentinel)
}

pub fn memcached() -> Store {
    memcached_on(free_port())
}

pub fn memcached_on(port: u16) -> Store {
    let child = spawn(
        Command::new("memcached").args([
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
        ]),
        port,
        "memcached (apt-get install memcached)",
    );
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
    child
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

/// memcached with `-Z` (TLS on its port) and `-o` options such as `ssl_chain_cert=...`.
pub fn memcached_tls(opts: &[String]) -> Store {
    let port = free_port();
    let child = spawn(
        Command::new("memcached")
            .args(["-p", &port.to_string(), "-l", "127.0.0.1", "-U", "0"])
            .args(["-u", "root", "-m", "32", "-Z", "-o", &opts.join(",")]),
        port,
        "memcached (apt-get install memcached)",
    );
    // Speaking TLS from here would need a client; an open port is enough, memcached loads
    // its certificates before it listens.
    wait_for("memcached with TLS", || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    child
}

/// Reads `key` from a plain memcached with the text protocol: `Some(value)` or `None`.
pub fn mc_get(port: u16, key: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(format!("get {key}\r\n").as_bytes()).ok()?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.ends_with(b"END\r\n") {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        reply.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&reply).into_owned();
    text.lines()
        .nth(1)
        .filter(|_| text.starts_with("VALUE"))
        .map(str::to_owned)
}

/// Stores `value` under `key` in a plain memcached (no expiry).
pub fn mc_set(port: u16, key: &str, value: &str) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.write_all(format!("set {key} 0 0 {}\r\n{value}\r\n", value.len()).as_bytes())
        .unwrap();
    let mut b = [0u8; 64];
    let n = s.read(&mut b).unwrap();
    assert_eq!(&b[..n], b"STORED\r\n");
}
