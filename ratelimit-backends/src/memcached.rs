//! A memcached counter store. Fixed windows use upstream's protocol: read all keys with one
//! `get` per node, decide from those values, and apply the increments asynchronously
//! (`incr`, or `add` with the TTL when the key is new). Concurrent requests may therefore
//! overshoot a fixed window slightly, as upstream documents. Sliding windows and token
//! buckets never admit more than their limit: see [`algorithms`] and
//! docs/algorithms-memcached.md.
//!
//! Keys map to nodes as gomemcache does (CRC-32 of the key modulo the node count), so this
//! server and upstream's can share a memcached fleet. The node list is fixed
//! (`MEMCACHE_HOST_PORT`) or comes from a DNS SRV record (`MEMCACHE_SRV`), optionally
//! re-resolved in the background; connections are plain TCP or TLS (`MEMCACHE_TLS*`).

pub mod algorithms;
mod pool;
mod proto;
mod srv;

/// What a node may send back to a pipeline, for the fuzz target (`memcached_pipeline`).
#[doc(hidden)]
pub use proto::check_pipeline_replies;
/// What a node may send back, for the fuzz target (`memcached_reply`).
#[doc(hidden)]
pub use proto::check_replies;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use ratelimit_core::{CounterStore, Increment, MAX_HITS, StoreError};
use tokio_rustls::TlsConnector;

pub use crate::client_tls::ClientTls as MemcachedTls;
use pool::{Inner, Node, by_node, join_all, refresh_loop};
use srv::SrvResolver;
pub use srv::valid_srv_name;

const ERR: &str = "memcache_error";
/// memcached reads expirations above 30 days as absolute Unix times.
const RELATIVE_TTL_MAX: u64 = 2_592_000;
/// memcached's key length limit.
pub const MAX_KEY_LEN: usize = 250;
/// Counters stop growing here. memcached's `incr` wraps at 2^64 (back to a fresh quota), and
/// increments are sized from a read taken before others land: with each at most
/// [`MAX_HITS`], those that all read a counter below half the range cannot carry it round.
const CEILING: u64 = 1 << 63;

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError::new(ERR, e.to_string())
}

/// Settings named after upstream's `MEMCACHE_*` variables.
#[derive(Debug, Clone)]
pub struct MemcachedSettings {
    /// `MEMCACHE_HOST_PORT`: every node, in the same order on every instance.
    pub nodes: Vec<String>,
    /// `MEMCACHE_SRV`: an SRV record (`_memcache._tcp.example.com`) listing the nodes;
    /// used instead of `nodes`.
    pub srv: Option<String>,
    /// `MEMCACHE_SRV_REFRESH`: how often the SRV record is resolved again (zero: only at
    /// start).
    pub srv_refresh: Duration,
    /// Ours (`MEMCACHE_SRV_NAMESERVER`): the DNS server to ask for the SRV record instead
    /// of those in /etc/resolv.conf.
    pub srv_nameserver: Option<SocketAddr>,
    /// `MEMCACHE_TLS` and its files; `None` for plain TCP.
    pub tls: Option<MemcachedTls>,
    /// `MEMCACHE_MAX_IDLE_CONNS`: idle connections kept per node.
    pub max_idle_conns: usize,
    /// Bound on connecting (TLS handshake included) and, separately, on each operation
    /// (ours: `MEMCACHE_TIMEOUT`).
    pub timeout: Duration,
}

impl Default for MemcachedSettings {
    fn default() -> Self {
        MemcachedSettings {
            nodes: Vec::new(),
            srv: None,
            srv_refresh: Duration::ZERO,
            srv_nameserver: None,
            tls: None,
            max_idle_conns: 2,
            timeout: Duration::from_secs(1),
        }
    }
}

/// How much a background event of the store matters, for the caller's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Worth knowing (the SRV record now lists other nodes).
    Info,
    /// Something failed and the store carries on as before.
    Error,
}

/// The memcached [`CounterStore`].
pub struct MemcachedStore {
    inner: Arc<Inner>,
    /// Background increment batches not yet applied.
    pending: Arc<AtomicUsize>,
}

/// Rejects keys memcached cannot store: longer than 250 bytes, or holding whitespace or
/// control characters (which would split the command on the wire).
pub fn check_key(key: &str) -> Result<(), StoreError> {
    if key.len() > MAX_KEY_LEN {
        return Err(err(format!(
            "cache key is {} bytes, memcached allows at most {MAX_KEY_LEN}: {}...",
            key.len(),
            &key[..key.char_indices().nth(40).map_or(key.len(), |(i, _)| i)]
        )));
    }
    if key.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(err(format!(
            "cache key {key:?} contains whitespace or control characters"
        )));
    }
    Ok(())
}

/// The node index for `key` (gomemcache's ServerList: CRC-32 IEEE modulo the node count).
pub fn node_for(key: &str, nodes: usize) -> usize {
    (crc32fast::hash(key.as_bytes()) as usize) % nodes.max(1)
}

/// The expiry to send for a relative TTL at `now`.
fn expiry(ttl: u64, now: u64) -> i64 {
    let t = if ttl > RELATIVE_TTL_MAX {
        now + ttl
    } else {
        ttl
    };
    i64::try_from(t).unwrap_or(i64::MAX)
}

impl MemcachedStore {
    /// A store over the fixed list `settings.nodes`; connections are opened on demand.
    /// Fails on a bad node address or TLS file, and when `settings.srv` is set (that needs
    /// the asynchronous [`MemcachedStore::connect`]).
    pub fn new(settings: MemcachedSettings) -> Result<MemcachedStore, StoreError> {
        if settings.srv.is_some() {
            return Err(err("MEMCACHE_SRV needs MemcachedStore::connect"));
        }
        if settings.nodes.is_empty() {
            return Err(err("MEMCACHE_HOST_PORT lists no node"));
        }
        MemcachedStore::with_nodes(&settings, &settings.nodes, "MEMCACHE_HOST_PORT")
    }

    fn with_nodes(
        settings: &MemcachedSettings,
        servers: &[String],
        source: &str,
    ) -> Result<MemcachedStore, StoreError> {
        let tls = match &settings.tls {
            None => None,
            Some(t) => {
                let mut config =
                    crate::client_tls::client_config(t, "MEMCACHE_TLS").map_err(err)?;
                // memcached (1.6, OpenSSL) answers a resumed session with an internal-error
                // alert when it verifies client certificates, unless started with
                // ssl_session_cache; connections are pooled, so full handshakes cost little.
                // Upstream's Go client does not resume either.
                config.resumption = rustls::client::Resumption::disabled();
                Some(TlsConnector::from(Arc::new(config)))
            }
        };
        let nodes = servers
            .iter()
            .map(|a| Node::new(a, tls.is_some()).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err(format!("{source}: {e}")))?;
        Ok(MemcachedStore {
            inner: Arc::new(Inner {
                nodes: RwLock::new(nodes.into()),
                tls,
                max_idle_conns: settings.max_idle_conns,
                timeout: settings.timeout,
            }),
            pending: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// A store as `settings` say: over `settings.nodes`, or over the targets of the SRV
    /// record `settings.srv`, resolved now (a failure is an error naming the record) and then
    /// every `settings.srv_refresh` if that is not zero. `log` hears about refreshes that
    /// changed the list or failed; a failed refresh keeps the current list.
    pub async fn connect(
        settings: MemcachedSettings,
        log: impl Fn(Severity, &str) + Send + Sync + 'static,
    ) -> Result<MemcachedStore, StoreError> {
        let Some(name) = settings.srv.clone() else {
            return MemcachedStore::new(settings);
        };
        let resolver = SrvResolver::new(&name, settings.srv_nameserver)
            .map_err(|e| err(format!("MEMCACHE_SRV {name}: {e}")))?;
        let servers = resolver
            .servers()
            .await
            .map_err(|e| err(format!("MEMCACHE_SRV: {e}")))?;
        let store =
            MemcachedStore::with_nodes(&settings, &servers, &format!("MEMCACHE_SRV {name}"))?;
        if !settings.srv_refresh.is_zero() {
            tokio::spawn(refresh_loop(
                Arc::downgrade(&store.inner),
                resolver,
                settings.srv_refresh,
                Arc::new(log),
            ));
        }
        Ok(store)
    }

    /// The nodes in use, in key-mapping order.
    pub fn servers(&self) -> Vec<String> {
        self.inner.nodes().iter().map(|n| n.addr.clone()).collect()
    }

    /// Waits (at most a few seconds) until the increments started so far are applied.
    /// Tests use it to observe counters deterministically; the server never waits.
    pub async fn settled(&self) {
        for _ in 0..5_000 {
            if self.pending.load(Ordering::Acquire) == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

#[async_trait]
impl CounterStore for MemcachedStore {
    async fn increment(
        &self,
        now: u64,
        batch: &[Increment],
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        for inc in batch {
            check_key(&inc.key)?;
        }
        let nodes = self.inner.nodes();
        let mut before = vec![0u64; batch.len()];
        if algorithms::needs_algorithms(batch) {
            algorithms::run(&self.inner, &nodes, now, batch, counts, &mut before).await?;
        } else {
            let keys: Vec<&str> = batch.iter().map(|i| i.key.as_str()).collect();
            self.inner.read_all(&nodes, &keys, &mut before).await?;
            for ((c, b), inc) in counts.iter_mut().zip(&before).zip(batch) {
                *c = b.saturating_add(inc.hits);
            }
        }
        // Fixed windows count in the background, after the answer (upstream's way).
        let pending: Vec<Increment> = batch
            .iter()
            .zip(&before)
            .filter(|(inc, _)| inc.always_counts())
            .filter_map(|(inc, b)| {
                let hits = inc.hits.min(MAX_HITS).min(CEILING.saturating_sub(*b));
                (hits > 0).then(|| Increment {
                    hits,
                    ..inc.clone()
                })
            })
            .collect();
        if !pending.is_empty() {
            let counter = self.pending.clone();
            counter.fetch_add(1, Ordering::AcqRel);
            let inner = self.inner.clone();
            tokio::spawn(async move {
                inner.apply(&nodes, now, &pending).await;
                counter.fetch_sub(1, Ordering::AcqRel);
            });
        }
        Ok(())
    }

    async fn get(&self, _now: u64, batch: &[Increment], out: &mut [u64]) -> Result<(), StoreError> {
        let keys: Vec<&str> = batch.iter().map(Increment::read_key).collect();
        for k in &keys {
            check_key(k)?;
        }
        // Sliding windows and token buckets read as "" (nothing to read): memcached would
        // refuse a `get` of nothing.
        if keys.iter().any(|k| k.is_empty()) {
            let live: Vec<&str> = keys.iter().copied().filter(|k| !k.is_empty()).collect();
            let mut values = vec![0u64; live.len()];
            self.inner
                .read_all(&self.inner.nodes(), &live, &mut values)
                .await?;
            let mut values = values.into_iter();
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = if k.is_empty() {
                    0
                } else {
                    values.next().unwrap_or(0)
                };
            }
            return Ok(());
        }
        self.inner.read_all(&self.inner.nodes(), &keys, out).await
    }

    async fn refund(&self, _now: u64, batch: &[Increment]) -> Result<(), StoreError> {
        for inc in batch {
            check_key(&inc.key)?;
        }
        // Only fixed windows count hits a denied request must give back; the other
        // algorithms already gave theirs.
        let batch: Vec<Increment> = batch
            .iter()
            .filter(|i| i.always_counts())
            .cloned()
            .collect();
        let batch = batch.as_slice();
        let nodes = self.inner.nodes();
        let groups = by_node(batch.iter().map(|i| i.key.as_str()), nodes.len());
        let mut work = Vec::with_capacity(groups.len());
        for (n, idx) in &groups {
            work.push(self.inner.refund_node(&nodes[*n], batch, idx));
        }
        join_all(work).await.into_iter().collect()
    }
}

#[cfg(test)]
mod tests;
