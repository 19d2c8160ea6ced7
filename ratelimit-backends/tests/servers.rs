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
    redis_sentinel_with(&[])
}

/// A sentinel watching one master started with `extra` settings.
pub fn redis_sentinel_with(extra: &[&str]) -> (Proc, Proc) {
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
    memcached_on(free_port())
}

pub fn memcached_on(port: u16) -> Proc {
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

/// memcached with `-Z` (TLS on its port) and `-o` options such as `ssl_chain_cert=...`.
pub fn memcached_tls(opts: &[String]) -> Proc {
    let port = free_port();
    let child = Command::new("memcached")
        .args(["-p", &port.to_string(), "-l", "127.0.0.1", "-U", "0"])
        .args(["-u", "root", "-m", "32", "-Z", "-o", &opts.join(",")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("memcached (apt-get install memcached)");
    // Speaking TLS from here would need a client; an open port is enough, memcached loads
    // its certificates before it listens.
    wait_for("memcached with TLS", || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    Proc { child, port }
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

/// A CA with a server certificate and a client certificate, written as PEM files.
pub struct Pki {
    pub ca: String,
    pub server_cert: String,
    pub server_key: String,
    pub client_cert: String,
    pub client_key: String,
}

/// A fresh CA; the server certificate carries `server_names` (DNS names or IPs).
pub fn pki(server_names: &[&str]) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let dir = temp_dir("pki");
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "ratelimit test CA");
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let leaf = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (sc, sk) = leaf(server_names.iter().map(|s| s.to_string()).collect());
    let (cc, ck) = leaf(vec!["ratelimit-client".into()]);
    Pki {
        ca: write("ca.pem", &ca.pem()),
        server_cert: write("server.pem", &sc),
        server_key: write("server.key", &sk),
        client_cert: write("client.pem", &cc),
        client_key: write("client.key", &ck),
    }
}

/// A DNS server on a loopback UDP port that answers every SRV question with the current
/// records (`(target, port)`, priority 10, weight 5) and every other question with none.
pub struct SrvDns {
    pub addr: std::net::SocketAddr,
    records: std::sync::Arc<std::sync::Mutex<Vec<(String, u16)>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SrvDns {
    pub fn start(records: Vec<(String, u16)>) -> SrvDns {
        use std::sync::atomic::AtomicBool;
        use std::sync::{Arc, Mutex};
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let records = Arc::new(Mutex::new(records));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (records.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 1500];
            while !s.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                let current = r.lock().unwrap().clone();
                if let Some(reply) = dns_answer(&buf[..n], &current) {
                    let _ = sock.send_to(&reply, from);
                }
            }
        });
        SrvDns {
            addr,
            records,
            stop,
            thread: Some(thread),
        }
    }

    pub fn set(&self, records: Vec<(String, u16)>) {
        *self.records.lock().unwrap() = records;
    }
}

impl Drop for SrvDns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The response to the DNS query `q` (RFC 1035 wire format), or `None` for garbage.
fn dns_answer(q: &[u8], records: &[(String, u16)]) -> Option<Vec<u8>> {
    const SRV: u16 = 33;
    if q.len() < 12 {
        return None;
    }
    let mut i = 12;
    while *q.get(i)? != 0 {
        i += 1 + q[i] as usize;
    }
    let question_end = i + 5;
    let qtype = u16::from_be_bytes([*q.get(i + 1)?, *q.get(i + 2)?]);
    if question_end > q.len() {
        return None;
    }
    let answers: &[(String, u16)] = if qtype == SRV { records } else { &[] };
    let mut r = Vec::with_capacity(512);
    r.extend_from_slice(&q[..2]);
    // QR, AA and the query's RD; RA; NOERROR.
    r.push(0x84 | (q[2] & 0x01));
    r.push(0x80);
    r.extend_from_slice(&1u16.to_be_bytes());
    r.extend_from_slice(&(answers.len() as u16).to_be_bytes());
    r.extend_from_slice(&[0, 0, 0, 0]);
    r.extend_from_slice(&q[12..question_end]);
    for (target, port) in answers {
        let mut rdata = Vec::new();
        rdata.extend_from_slice(&10u16.to_be_bytes());
        rdata.extend_from_slice(&5u16.to_be_bytes());
        rdata.extend_from_slice(&port.to_be_bytes());
        for label in target.trim_end_matches('.').split('.') {
            rdata.push(label.len() as u8);
            rdata.extend_from_slice(label.as_bytes());
        }
        rdata.push(0);
        // The owner name points back at the question's name (offset 12).
        r.extend_from_slice(&[0xc0, 0x0c]);
        r.extend_from_slice(&SRV.to_be_bytes());
        r.extend_from_slice(&1u16.to_be_bytes());
        r.extend_from_slice(&1u32.to_be_bytes());
        r.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        r.extend_from_slice(&rdata);
    }
    Some(r)
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
