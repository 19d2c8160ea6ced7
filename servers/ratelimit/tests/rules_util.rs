//! Helpers for the rule delivery tests: a server start that does not wait for the listeners,
//! polling with deadlines, and readers for `/rlconfig`, `/stats` and health.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use test_support::process::{Capture, Proc};

use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::common::{Server, command, listening, request};

/// A started process whose listeners may not be open yet.
pub struct Pending {
    pub proc: Option<Proc>,
    pub dir: PathBuf,
    /// Every stderr line read so far.
    pub log: Vec<String>,
}

pub fn spawn(dir: &Path, env: &[(&str, &str)]) -> Pending {
    Pending {
        proc: Some(Proc::spawn(command(dir, env), Capture::Stderr)),
        dir: dir.to_owned(),
        log: Vec::new(),
    }
}

impl Pending {
    /// Reads stderr for up to `timeout`; the server once it reports its listeners.
    pub fn wait_listening(&mut self, timeout: Duration) -> Option<Server> {
        let log = &mut self.log;
        let (http, debug, grpc) = self.proc.as_ref()?.find_line(timeout, |line| {
            log.push(line.to_owned());
            listening(line)
        })?;
        Some(Server {
            proc: self.proc.take().unwrap(),
            http,
            debug,
            grpc,
            dir: self.dir.clone(),
        })
    }

    /// Reads stderr lines that arrived until now.
    pub fn drain(&mut self) -> &[String] {
        if let Some(p) = &self.proc {
            self.log.extend(p.lines.try_iter());
        }
        &self.log
    }
}

/// Polls `f` every 25 ms until it is true; returns how long it took, or None after `limit`.
pub fn within(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if f() {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// How long a change may take to show; the goal is "a second or two", with headroom for a
/// loaded test machine.
pub const VISIBLE: Duration = Duration::from_secs(4);

pub fn rlconfig(srv: &Server) -> String {
    request(srv.debug, "GET", "/rlconfig", b"").text()
}

pub fn stat(srv: &Server, name: &str) -> u64 {
    let text = request(srv.debug, "GET", "/stats", b"").text();
    text.lines()
        .find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(": ")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

pub fn healthcheck(srv: &Server) -> u16 {
    request(srv.http, "GET", "/healthcheck", b"").status
}

/// gRPC health of service `ratelimit`, on a fresh connection.
pub fn grpc_health(srv: &Server) -> ServingStatus {
    let addr = srv.grpc.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let ch = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .expect("connect");
        let resp = HealthClient::new(ch)
            .check(HealthCheckRequest {
                service: "ratelimit".into(),
            })
            .await
            .expect("health check");
        ServingStatus::try_from(resp.into_inner().status).unwrap()
    })
}

/// Both health faces agree and say `healthy`.
pub fn health_is(srv: &Server, healthy: bool) -> bool {
    let http = healthcheck(srv) == if healthy { 200 } else { 500 };
    let grpc = grpc_health(srv)
        == if healthy {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
    http && grpc
}

/// A one-rule document.
pub fn rule(domain: &str, key: &str, per_minute: u32) -> String {
    format!(
        "domain: {domain}\ndescriptors:\n  - key: {key}\n    rate_limit:\n      unit: minute\n      requests_per_unit: {per_minute}\n"
    )
}

/// The `/rlconfig` line of that rule.
pub fn line(domain: &str, key: &str, per_minute: u32) -> String {
    format!(
        "{domain}.{key}: unit=MINUTE requests_per_unit={per_minute}, shadow_mode: false, quota_mode: false"
    )
}

/// Replaces `link` by a symlink to `target` atomically (rename over it), as Kubernetes
/// does with `..data` and deploy tools with `current`.
pub fn swap_symlink(link: &Path, target: &Path) {
    let tmp = link.with_file_name(format!(
        "{}.tmp",
        link.file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}
