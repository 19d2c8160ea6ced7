//! How a Redis store is configured: upstream's settings, and the fred and `redis_mux`
//! configurations built from them.

use crate::redis_mux::Target as MuxTarget;
use fred::prelude::*;
use fred::types::config::{Server, TlsConfig, TlsHostMapping};
use std::time::Duration;

/// How the server address is given (`REDIS_SOCKET_TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketType {
    /// `host:port`.
    Tcp,
    /// A unix socket path.
    Unix,
}

/// The deployment (`REDIS_TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisKind {
    /// One server.
    Single,
    /// `master-name,host:port,...` of the sentinels.
    Sentinel,
    /// `host:port,...` of cluster nodes.
    Cluster,
}

/// What happens when every pooled slot is busy (`REDIS_POOL_ON_EMPTY_BEHAVIOR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnEmpty {
    /// Wait for a slot up to the wait duration, then proceed anyway.
    Create,
    /// Wait for a slot up to the wait duration, then fail.
    Error,
    /// Wait for a slot, bounded only by the timeout.
    Wait,
}

/// TLS towards Redis (`REDIS_TLS*`).
pub use crate::client_tls::ClientTls as RedisTls;

/// One Redis instance's settings, named after upstream's `REDIS_*` variables.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// `REDIS_SOCKET_TYPE`
    pub socket_type: SocketType,
    /// `REDIS_URL`
    pub url: String,
    /// `REDIS_TYPE`
    pub kind: RedisKind,
    /// `REDIS_AUTH`: `password` or `user:password`.
    pub auth: String,
    /// `REDIS_SENTINEL_AUTH`: same forms, for the sentinels.
    pub sentinel_auth: String,
    /// `REDIS_TLS` and its files.
    pub tls: Option<RedisTls>,
    /// `REDIS_POOL_SIZE`: connections.
    pub pool_size: usize,
    /// `REDIS_POOL_ON_EMPTY_BEHAVIOR`
    pub on_empty: OnEmpty,
    /// `REDIS_POOL_ON_EMPTY_WAIT_DURATION`
    pub on_empty_wait: Duration,
    /// `REDIS_TIMEOUT`: connect and per-request bound.
    pub timeout: Duration,
    /// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`: health needs a live connection.
    pub health_check_active_connection: bool,
    /// Our addition: fail at once, without waiting for the timeout, while no connection is
    /// up (`REDIS_FAIL_FAST_WHEN_DISCONNECTED`).
    pub fail_fast_when_disconnected: bool,
}

impl Default for RedisSettings {
    fn default() -> Self {
        RedisSettings {
            socket_type: SocketType::Tcp,
            url: "localhost:6379".into(),
            kind: RedisKind::Single,
            auth: String::new(),
            sentinel_auth: String::new(),
            tls: None,
            pool_size: 10,
            on_empty: OnEmpty::Wait,
            on_empty_wait: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
            health_check_active_connection: false,
            fail_fast_when_disconnected: false,
        }
    }
}

/// The startup check (`REDIS_STARTUP_*`): PING until PONG with exponential backoff.
#[derive(Debug, Clone, Copy)]
pub struct StartupBackoff {
    /// `REDIS_STARTUP_INITIAL_INTERVAL` (1s).
    pub initial: Duration,
    /// `REDIS_STARTUP_MAX_INTERVAL` (30s).
    pub max: Duration,
    /// `REDIS_STARTUP_MAX_ELAPSED_TIME` (0 = forever).
    pub max_elapsed: Duration,
}

impl Default for StartupBackoff {
    fn default() -> Self {
        StartupBackoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
            max_elapsed: Duration::ZERO,
        }
    }
}

pub(super) fn split_auth(auth: &str) -> (Option<String>, Option<String>) {
    match auth.split_once(':') {
        _ if auth.is_empty() => (None, None),
        Some((u, p)) => (Some(u.to_owned()), Some(p.to_owned())),
        None => (None, Some(auth.to_owned())),
    }
}

pub(super) fn parse_host_port(s: &str) -> Result<Server, String> {
    let s = s.trim();
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("{s:?} is not host:port"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{s:?} has no valid port"))?;
    Ok(Server::new(
        host.trim_start_matches('[').trim_end_matches(']'),
        port,
    ))
}

/// Builds fred's configuration from upstream-style settings. Errors name the setting.
pub fn fred_config(s: &RedisSettings) -> Result<Config, String> {
    let server = match (s.kind, s.socket_type) {
        (RedisKind::Single, SocketType::Unix) => ServerConfig::Unix {
            path: s.url.clone().into(),
        },
        (RedisKind::Single, SocketType::Tcp) => ServerConfig::Centralized {
            server: parse_host_port(&s.url).map_err(|e| format!("REDIS_URL: {e}"))?,
        },
        (RedisKind::Cluster, _) => ServerConfig::Clustered {
            hosts: s
                .url
                .split(',')
                .map(parse_host_port)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("REDIS_URL: {e}"))?,
            policy: Default::default(),
        },
        (RedisKind::Sentinel, _) => {
            let mut parts = s.url.split(',');
            let name = parts.next().unwrap_or_default().trim().to_owned();
            let hosts: Vec<Server> = parts
                .map(parse_host_port)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("REDIS_URL: {e}"))?;
            if name.is_empty() || hosts.is_empty() {
                return Err(
                    "Expected master name and a list of urls for the sentinels, in the format: \
                     <redis master name>,<sentinel1>,...,<sentineln>"
                        .into(),
                );
            }
            let (username, password) = split_auth(&s.sentinel_auth);
            ServerConfig::Sentinel {
                hosts,
                service_name: name,
                username,
                password,
            }
        }
    };
    let (username, password) = split_auth(&s.auth);
    let tls = match &s.tls {
        None => None,
        Some(t) => Some(TlsConfig {
            connector: crate::client_tls::client_config(t, "REDIS_TLS")?.into(),
            hostnames: TlsHostMapping::None,
        }),
    };
    Ok(Config {
        server,
        username,
        password,
        tls,
        fail_fast: true,
        ..Config::default()
    })
}

/// Where the counting connection of a single Redis goes, TLS included: the same address,
/// credentials and certificates as the fred client's.
pub(super) fn mux_target(s: &RedisSettings) -> Result<MuxTarget, String> {
    let (user, password) = split_auth(&s.auth);
    let tls = match &s.tls {
        Some(t) => {
            let config = crate::client_tls::client_config(t, "REDIS_TLS")?;
            Some((
                tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)),
                crate::client_tls::server_name(&s.url)?,
            ))
        }
        None => None,
    };
    Ok(MuxTarget {
        addr: s.url.clone(),
        unix: s.socket_type == SocketType::Unix,
        auth: user.into_iter().chain(password).collect(),
        timeout: s.timeout,
        tls,
    })
}
