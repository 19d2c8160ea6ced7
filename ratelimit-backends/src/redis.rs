//! A Redis (or Valkey) counter store on the `fred` client: single node, Sentinel or
//! Cluster, with upstream's commands and keys so both servers can share one Redis.
//!
//! Each descriptor is counted with `INCRBY key hits` + `EXPIRE key ttl`: over our own
//! multiplexed connection on a single Redis (`redis_mux`), as one script call through fred
//! with Sentinel or Cluster (per node in cluster mode, which fred routes). SECOND limits
//! may go to a second instance.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::redis_mux::{self, Mux, Reply, Target as MuxTarget};
use async_trait::async_trait;
use fred::interfaces::LuaInterface;
use fred::prelude::*;
use fred::types::config::{Server, TlsConfig, TlsHostMapping};
use ratelimit_core::{CounterStore, Increment, MAX_HITS, StoreError, Unit};
use tokio::sync::Semaphore;

const ERR: &str = "redis_error";

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

/// Each pooled connection pipelines this many requests before the pool counts as empty:
/// fred multiplexes a connection, so a slot is a share of one, not all of it.
const REQUESTS_PER_CONNECTION: usize = 64;

struct Instance {
    pool: Pool,
    slots: Semaphore,
    settings: RedisSettings,
    /// Counting on a single plain-text Redis goes through our own multiplexed connection,
    /// whose writes carry every call queued meanwhile (`redis_mux`); everything else, and
    /// counting on TLS, Sentinel and Cluster, goes through fred.
    mux: Option<Mux>,
    /// This Redis refused the counting script (scripting disabled by `rename-command` or an
    /// ACL, or a proxy without it): count with upstream's two commands from now on.
    scripts_refused: AtomicBool,
    /// Told, once, when this instance switches to the command pair.
    warn: Warn,
}

type Warn = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// The Redis [`CounterStore`].
pub struct RedisStore {
    main: Instance,
    per_second: Option<Instance>,
}

fn split_auth(auth: &str) -> (Option<String>, Option<String>) {
    match auth.split_once(':') {
        _ if auth.is_empty() => (None, None),
        Some((u, p)) => (Some(u.to_owned()), Some(p.to_owned())),
        None => (None, Some(auth.to_owned())),
    }
}

fn parse_host_port(s: &str) -> Result<Server, String> {
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
fn mux_target(s: &RedisSettings) -> Result<MuxTarget, String> {
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

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError::new(ERR, e.to_string())
}

impl Instance {
    /// Connects and waits for PONG, retrying with backoff. `on_retry` hears every failure.
    async fn connect(
        settings: RedisSettings,
        backoff: StartupBackoff,
        on_retry: &(dyn Fn(&str) + Sync),
    ) -> Result<Instance, StoreError> {
        let config = fred_config(&settings).map_err(err)?;
        let started = Instant::now();
        let mut delay = backoff.initial;
        loop {
            match Instance::try_connect(&config, &settings).await {
                Ok(pool) => {
                    // TLS on a Unix socket stays with fred, as it always did.
                    let unix_tls =
                        settings.socket_type == SocketType::Unix && settings.tls.is_some();
                    let mux = (settings.kind == RedisKind::Single && !unix_tls)
                        .then(|| mux_target(&settings))
                        .transpose()
                        .map_err(err)?
                        .map(Mux::start);
                    return Ok(Instance {
                        slots: Semaphore::new(settings.pool_size.max(1) * REQUESTS_PER_CONNECTION),
                        pool,
                        settings,
                        mux,
                        scripts_refused: AtomicBool::new(false),
                        warn: std::sync::Arc::new(|_: &str| {}),
                    });
                }
                Err(e) => {
                    if !backoff.max_elapsed.is_zero()
                        && started.elapsed() + delay > backoff.max_elapsed
                    {
                        return Err(err(format!("redis did not answer PING in time: {e}")));
                    }
                    on_retry(&format!("redis not ready ({e}); retrying in {delay:?}"));
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(backoff.max);
                }
            }
        }
    }

    async fn try_connect(config: &Config, s: &RedisSettings) -> Result<Pool, String> {
        let pool = Builder::from_config(config.clone())
            .with_connection_config(|c| {
                c.connection_timeout = s.timeout;
                c.internal_command_timeout = s.timeout;
                // One attempt: a request must fail within the timeout, not be retried past it.
                c.max_command_attempts = 1;
                c.tcp.nodelay = Some(true);
            })
            .with_performance_config(|p| {
                p.default_command_timeout = s.timeout;
            })
            // Reconnect quickly and forever once running; the timeout bounds each request.
            .set_policy(ReconnectPolicy::new_exponential(0, 10, 1_000, 2))
            .build_pool(s.pool_size.max(1))
            .map_err(|e| e.to_string())?;
        match tokio::time::timeout(s.timeout, pool.init()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                let _ = pool.quit().await;
                return Err(e.to_string());
            }
            Err(_) => {
                let _ = pool.quit().await;
                return Err(format!("no connection within {:?}", s.timeout));
            }
        }
        let pong: Result<String, _> = tokio::time::timeout(s.timeout, pool.next().ping(None))
            .await
            .map_err(|_| "PING timed out".to_owned())?;
        match pong {
            Ok(p) if p == "PONG" => Ok(pool),
            Ok(p) => Err(format!("PING answered {p:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    fn connected(&self) -> bool {
        self.pool.clients().iter().any(|c| c.is_connected())
    }

    /// Takes a pipeline slot according to `REDIS_POOL_ON_EMPTY_BEHAVIOR`.
    async fn slot(&self) -> Result<Option<tokio::sync::SemaphorePermit<'_>>, StoreError> {
        if let Ok(p) = self.slots.try_acquire() {
            return Ok(Some(p));
        }
        let s = &self.settings;
        let wait = match s.on_empty {
            OnEmpty::Wait => s.timeout,
            OnEmpty::Create | OnEmpty::Error => s.on_empty_wait,
        };
        match tokio::time::timeout(wait, self.slots.acquire()).await {
            Ok(Ok(p)) => Ok(Some(p)),
            _ => match s.on_empty {
                OnEmpty::Create => Ok(None),
                OnEmpty::Error | OnEmpty::Wait => Err(err("redis pool is empty")),
            },
        }
    }

    /// Runs `f` within a pipeline slot and, when `timed`, the timeout. Calls over the
    /// counting connection are not `timed` here: that connection keeps each call's timeout
    /// itself (`redis_mux`).
    async fn run<T>(
        &self,
        timed: bool,
        f: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, StoreError> {
        if self.settings.fail_fast_when_disconnected && !self.connected() {
            return Err(err("redis is not connected"));
        }
        let _slot = self.slot().await?;
        if !timed {
            return f.await.map_err(err);
        }
        match tokio::time::timeout(self.settings.timeout, f).await {
            Ok(r) => r.map_err(err),
            Err(_) => Err(err(format!(
                "redis request timed out after {:?}",
                self.settings.timeout
            ))),
        }
    }

    /// Counts every item ([`Instance::count`]) within the timeout and a pipeline slot;
    /// `out[i]` gets the count of `items[i]`.
    async fn increment(&self, items: &[&Increment], out: &mut [u64]) -> Result<(), StoreError> {
        if let ([inc], [n]) = (items, &mut *out) {
            *n = self.run(self.mux.is_none(), self.count(inc)).await?.max(0) as u64;
            return Ok(());
        }
        // Queued side by side, they share the connection's writes.
        let values = self
            .run(
                self.mux.is_none(),
                futures_util::future::try_join_all(items.iter().map(|inc| self.count(inc))),
            )
            .await?;
        for (o, v) in out.iter_mut().zip(values) {
            *o = v.max(0) as u64;
        }
        Ok(())
    }

    /// One descriptor's count: upstream's `INCRBY` + `EXPIRE` over our own connection, where
    /// both leave in one write; elsewhere (fred) the script, or the pair where scripts are
    /// refused.
    async fn count(&self, inc: &Increment) -> Result<i64, Error> {
        let counted = match &self.mux {
            Some(mux) => incr_then_expire_mux(mux, inc).await,
            // fred's futures are kilobytes each; boxed, this future (moved and boxed once per
            // request) stays a few hundred bytes. At 29 KB it cost a 29 KB malloc and memcpy
            // per decision (perf: a fifth of the server's time on Redis).
            None => Box::pin(self.count_fred(inc)).await,
        };
        match counted {
            // Redis refuses an INCRBY past the top of its integers and leaves the counter
            // as it was: the counter is saturated, not broken (EXPIRE still ran).
            Err(e) if overflowed(e.details()) => Ok(i64::MAX),
            r => r,
        }
    }

    async fn count_fred(&self, inc: &Increment) -> Result<i64, Error> {
        let client = self.pool.next();
        if !self.scripts_refused.load(Relaxed) {
            match incr_expire(client, inc).await {
                // A refused command ran nothing, so counting again cannot count twice.
                Err(e) if refuses_scripts(e.details()) => {
                    if !self.scripts_refused.swap(true, Relaxed) {
                        (self.warn)(&format!(
                            "redis {} refused the counting script ({}); counting with \
                             INCRBY + EXPIRE from now on",
                            self.settings.url,
                            e.details()
                        ));
                    }
                }
                r => return r,
            }
        }
        incr_then_expire(client, inc).await
    }

    async fn get(&self, keys: &[&str]) -> Result<Vec<u64>, StoreError> {
        let pipe = self.pool.next().pipeline();
        let values: Vec<Value> = self
            .run(true, async {
                for k in keys {
                    let _: () = pipe.get(*k).await?;
                }
                pipe.all().await
            })
            .await?;
        Ok(values
            .iter()
            .map(|v| v.as_i64().map_or(0, |n| n.max(0) as u64))
            .collect())
    }

    async fn refund(&self, items: &[&Increment]) -> Result<(), StoreError> {
        let pipe = self.pool.next().pipeline();
        self.run(true, async {
            for inc in items {
                let [hits, _] = script_args(inc);
                let _: () = pipe.decr_by(inc.key.as_str(), hits).await?;
            }
            let _: Vec<Value> = pipe.all().await?;
            Ok(())
        })
        .await
    }
}

/// How the store counts one descriptor: upstream's `INCRBY` + `EXPIRE` as one script, which
/// returns the count after the increment. Like the pipelined pair, `EXPIRE` runs even when
/// `INCRBY` is refused, and the refusal is the reply. Lua holds the count in a double, which
/// past 2^53 may round up to 2^63 and come back as a negative integer: the reply stops at
/// 2^53, exact and over any limit.
pub const INCR_EXPIRE: &str = "local n = redis.pcall('INCRBY', KEYS[1], ARGV[1]) \
                           redis.call('EXPIRE', KEYS[1], ARGV[2]) \
                           if type(n) == 'number' and n > 9007199254740992 then \
                           n = 9007199254740992 end return n";

/// The script's SHA-1, by which it is called once Redis knows it (a test has Redis check
/// it: `SCRIPT LOAD` answers the same digest).
pub const INCR_EXPIRE_SHA: &str = "704ebbc201c7cebb07609dab16768ed59a66a6be";

/// `ARGV` of the script: the hits and the TTL (Redis integers are signed). Hits stop at
/// [`MAX_HITS`], so that even a caller other than the limiter leaves a counter that can be
/// counted on (one addend of `i64::MAX` would leave it at the top).
fn script_args(inc: &Increment) -> [i64; 2] {
    let ttl = i64::try_from(inc.ttl_seconds).unwrap_or(i64::MAX);
    [inc.hits.min(MAX_HITS) as i64, ttl]
}

/// Whether an error answer is Redis refusing an increment past `i64::MAX`.
fn overflowed(message: &str) -> bool {
    message.contains("increment or decrement would overflow")
}

/// Whether an error answer says the script was not run because scripting is unavailable:
/// an unknown command (renamed away, or a proxy that lacks it) or an ACL refusal.
fn refuses_scripts(message: &str) -> bool {
    message.starts_with("ERR unknown command") || message.starts_with("NOPERM")
}

/// A counting reply: the count, or why there is none.
fn int_reply(reply: Reply) -> Result<i64, Error> {
    match reply {
        Reply::Int(n) => Ok(n),
        Reply::Error(e) => Err(Error::new(fred::error::ErrorKind::Unknown, e)),
        Reply::Other => Err(Error::new(
            fred::error::ErrorKind::Protocol,
            "a counting command answered something other than an integer",
        )),
    }
}

fn io_error(e: String) -> Error {
    Error::new(fred::error::ErrorKind::IO, e)
}

/// Upstream's own `INCRBY` + `EXPIRE`, for a Redis that refuses scripts.
async fn incr_then_expire(client: &Client, inc: &Increment) -> Result<i64, Error> {
    let [hits, ttl] = script_args(inc);
    let key = inc.key.as_str();
    let pipe = client.pipeline();
    let _: () = pipe.incr_by(key, hits).await?;
    let _: () = pipe.expire(key, ttl, None).await?;
    let (n, _): (i64, i64) = pipe.all().await?;
    Ok(n)
}

/// [`incr_then_expire`] over our own connection, as one call of two commands: they leave
/// in one write and their two replies wake the caller once. Redis runs two cheap commands
/// instead of a script (about 0.6x the Redis CPU per decision, docs/stores.md), and its
/// command stream is upstream's own.
async fn incr_then_expire_mux(mux: &Mux, inc: &Increment) -> Result<i64, Error> {
    let [hits, ttl] = script_args(inc);
    let (mut hits_buf, mut ttl_buf) = (itoa::Buffer::new(), itoa::Buffer::new());
    let key = inc.key.as_bytes();
    let mut frame = Vec::with_capacity(96 + 2 * key.len());
    redis_mux::encode(
        &mut frame,
        &[b"INCRBY", key, hits_buf.format(hits).as_bytes()],
    );
    redis_mux::encode(
        &mut frame,
        &[b"EXPIRE", key, ttl_buf.format(ttl).as_bytes()],
    );
    int_reply(mux.call_many(frame, 2).await.map_err(io_error)?)
}

/// One increment: `EVALSHA`, or `EVAL` when this Redis does not know the script yet (a
/// fresh or restarted server, a failover, `SCRIPT FLUSH`), which also teaches it.
async fn incr_expire(client: &Client, inc: &Increment) -> Result<i64, Error> {
    let args = script_args(inc);
    let key = inc.key.as_str();
    match client
        .evalsha::<i64, _, _, _>(
            fred::bytes_utils::Str::from_static(INCR_EXPIRE_SHA),
            key,
            args.to_vec(),
        )
        .await
    {
        // NOSCRIPT means nothing ran, so sending the script itself cannot count twice.
        Err(e) if e.details().starts_with("NOSCRIPT") => {
            client.eval(INCR_EXPIRE, key, args.to_vec()).await
        }
        r => r,
    }
}

/// `REDIS_PERSECOND`: SECOND limits counted on the per-second instance, the rest on the
/// main one, both at once.
async fn split_increment(
    main: &Instance,
    per_second: &Instance,
    batch: &[Increment],
    counts: &mut [u64],
) -> Result<(), StoreError> {
    let (sec, rest): (Vec<usize>, Vec<usize>) =
        (0..batch.len()).partition(|&i| batch[i].unit == Unit::Second);
    let rest_items: Vec<&Increment> = rest.iter().map(|&i| &batch[i]).collect();
    let sec_items: Vec<&Increment> = sec.iter().map(|&i| &batch[i]).collect();
    let mut rest_counts = vec![0; rest_items.len()];
    let mut sec_counts = vec![0; sec_items.len()];
    let (a, b) = tokio::join!(
        async {
            if rest_items.is_empty() {
                Ok(())
            } else {
                main.increment(&rest_items, &mut rest_counts).await
            }
        },
        async {
            if sec_items.is_empty() {
                Ok(())
            } else {
                per_second.increment(&sec_items, &mut sec_counts).await
            }
        }
    );
    a?;
    b?;
    for (&idx, v) in rest.iter().zip(rest_counts) {
        counts[idx] = v;
    }
    for (&idx, v) in sec.iter().zip(sec_counts) {
        counts[idx] = v;
    }
    Ok(())
}

impl RedisStore {
    /// Connects to the main instance and, when given, the per-second instance, waiting for
    /// each to answer PING (with backoff). `on_retry` is told about each failed attempt.
    pub async fn connect(
        main: RedisSettings,
        per_second: Option<RedisSettings>,
        backoff: StartupBackoff,
        on_retry: &(dyn Fn(&str) + Sync),
    ) -> Result<RedisStore, StoreError> {
        let main = Instance::connect(main, backoff, on_retry).await?;
        let per_second = match per_second {
            Some(s) => Some(Instance::connect(s, backoff, on_retry).await?),
            None => None,
        };
        Ok(RedisStore { main, per_second })
    }

    /// Where warnings go that arise while serving (not at connect time): today, a Redis
    /// reached through fred (Sentinel, Cluster) refusing the counting script, after which
    /// that instance counts with upstream's two commands. Told once per instance.
    pub fn with_warnings(mut self, warn: impl Fn(&str) + Send + Sync + 'static) -> Self {
        let warn: Warn = std::sync::Arc::new(warn);
        self.main.warn = warn.clone();
        if let Some(ps) = &mut self.per_second {
            ps.warn = warn;
        }
        self
    }

    fn route(&self, unit: Unit) -> bool {
        self.per_second.is_some() && unit == Unit::Second
    }

    /// Connections currently up, main instance first.
    pub fn active_connections(&self) -> (usize, usize) {
        let count = |i: &Instance| i.pool.clients().iter().filter(|c| c.is_connected()).count();
        (count(&self.main), self.per_second.as_ref().map_or(0, count))
    }

    /// Closes every connection.
    pub async fn close(&self) {
        let _ = self.main.pool.quit().await;
        if let Some(p) = &self.per_second {
            let _ = p.pool.quit().await;
        }
    }
}

#[async_trait]
impl CounterStore for RedisStore {
    async fn increment(
        &self,
        _now: u64,
        batch: &[Increment],
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        let counts = &mut counts[..batch.len()];
        match &self.per_second {
            None => match batch {
                [inc] => self.main.increment(&[inc], counts).await,
                _ => {
                    let items: Vec<&Increment> = batch.iter().collect();
                    self.main.increment(&items, counts).await
                }
            },
            // Boxed: two instances' futures side by side would double the size of every
            // request's future, the single-instance ones included.
            Some(per_second) => {
                Box::pin(split_increment(&self.main, per_second, batch, counts)).await
            }
        }
    }

    async fn get(&self, _now: u64, keys: &[&str], out: &mut [u64]) -> Result<(), StoreError> {
        // Reads go to the main instance; the per-second mode does not combine with
        // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT upstream either.
        let vals = self.main.get(keys).await?;
        out.copy_from_slice(&vals[..out.len().min(vals.len())]);
        Ok(())
    }

    async fn refund(&self, _now: u64, batch: &[Increment]) -> Result<(), StoreError> {
        let (sec, main): (Vec<&Increment>, Vec<&Increment>) =
            batch.iter().partition(|i| self.route(i.unit));
        if !main.is_empty() {
            self.main.refund(&main).await?;
        }
        if let (Some(ps), false) = (&self.per_second, sec.is_empty()) {
            ps.refund(&sec).await?;
        }
        Ok(())
    }

    fn healthy(&self) -> bool {
        let check = |i: &Instance| !i.settings.health_check_active_connection || i.connected();
        check(&self.main) && self.per_second.as_ref().is_none_or(check)
    }
}
