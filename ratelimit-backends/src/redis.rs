//! A Redis (or Valkey) counter store on the `fred` client: single node, Sentinel or
//! Cluster, with upstream's commands and keys so both servers can share one Redis.
//!
//! Each descriptor is counted with `INCRBY key hits` + `EXPIRE key ttl`: over our own
//! multiplexed connection on a single Redis (`redis_mux`), as one script call through fred
//! with Sentinel or Cluster (per node in cluster mode, which fred routes). SECOND limits
//! may go to a second instance.
//!
//! Sliding windows, token buckets and the joint limits of a `rate_limits` list go as one
//! script call per group, queued beside the request's other calls so that the request
//! still costs one round trip: a lone sliding window or bucket through a script of its own
//! (`redis/lone.rs`), anything else through the group script (`redis/scripts.rs`).
//!
//! Besides counting, replicas of the server serving RLQS share their demand per bucket
//! through it (`redis/claims.rs`).

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use crate::redis_mux::Mux;
use async_trait::async_trait;
use fred::prelude::*;
use ratelimit_core::{CounterStore, Increment, StoreError, Unit};
use tokio::sync::Semaphore;

mod claims;
mod commands;
mod eval;
mod lone;
mod scripts;
mod settings;

pub use claims::{CLAIM, CLAIM_SHA, ClaimCall, claim_key};
pub use commands::{INCR_EXPIRE, INCR_EXPIRE_SHA};
use commands::{
    incr_expire, incr_then_expire, incr_then_expire_mux, overflowed, refuses_scripts, script_args,
    split_increment,
};
pub use lone::{LONE_BUCKET, LONE_BUCKET_SHA, LONE_SLIDE, LONE_SLIDE_SHA};
pub use scripts::{GROUP, GROUP_SHA};
use settings::mux_target;
pub use settings::{
    OnEmpty, RedisKind, RedisSettings, RedisTls, SocketType, StartupBackoff, fred_config,
};

const ERR: &str = "redis_error";

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
        let timed = self.mux.is_none();
        if let [inc] = items {
            if matches!(inc.op, ratelimit_core::Op::Window { .. }) {
                out[0] = self.run(timed, self.count(inc)).await?.max(0) as u64;
            } else {
                // A lone sliding window or bucket, the common case: straight to its script.
                self.run(timed, self.count_group(items, out)).await?;
            }
            return Ok(());
        }
        if items
            .iter()
            .any(|i| i.joint || !matches!(i.op, ratelimit_core::Op::Window { .. }))
        {
            return Box::pin(self.increment_groups(items, out)).await;
        }
        // Queued side by side, they share the connection's writes.
        let values = self
            .run(
                timed,
                futures_util::future::try_join_all(items.iter().map(|inc| self.count(inc))),
            )
            .await?;
        for (o, v) in out.iter_mut().zip(values) {
            *o = v.max(0) as u64;
        }
        Ok(())
    }

    /// [`Instance::increment`] for a batch with sliding windows, buckets or joint groups:
    /// one call per group (fixed windows alone as always, the rest through a script,
    /// `Instance::count_group` in `redis/eval.rs`), all queued side by side as one round
    /// trip. Each call writes its group's own part of `out`.
    async fn increment_groups(
        &self,
        items: &[&Increment],
        out: &mut [u64],
    ) -> Result<(), StoreError> {
        let mut rest = out;
        let mut calls = Vec::new();
        for g in ref_groups(items) {
            let (answers, tail) = std::mem::take(&mut rest).split_at_mut(g.len());
            rest = tail;
            let group = &items[g];
            calls.push(async move {
                if scripts::is_plain(group) {
                    answers[0] = self.count(group[0]).await?.max(0) as u64;
                    Ok(())
                } else {
                    self.count_group(group, answers).await
                }
            });
        }
        self.run(
            self.mux.is_none(),
            futures_util::future::try_join_all(calls),
        )
        .await?;
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

/// [`ratelimit_core::store::groups`] over a batch of references.
fn ref_groups(items: &[&Increment]) -> Vec<std::ops::Range<usize>> {
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, inc) in items.iter().enumerate() {
        match groups.last_mut() {
            Some(g) if inc.joint => g.end = i + 1,
            _ => groups.push(i..i + 1),
        }
    }
    groups
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

    async fn get(&self, _now: u64, batch: &[Increment], out: &mut [u64]) -> Result<(), StoreError> {
        // Reads go to the main instance; the per-second mode does not combine with
        // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT upstream either.
        let keys: Vec<&str> = batch.iter().map(Increment::read_key).collect();
        let vals = self.main.get(&keys).await?;
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
