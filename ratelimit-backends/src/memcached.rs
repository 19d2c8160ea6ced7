//! A memcached counter store with upstream's protocol use: read all keys with one `get` per
//! node, decide from those values, and apply the increments asynchronously (`incr`, or
//! `add` with the TTL when the key is new). Concurrent requests may therefore overshoot a
//! limit slightly, as upstream documents.
//!
//! Keys map to nodes as gomemcache does (CRC-32 of the key modulo the node count), so this
//! server and upstream's can share a memcached fleet. The node list is fixed
//! (`MEMCACHE_HOST_PORT`) or comes from a DNS SRV record (`MEMCACHE_SRV`), optionally
//! re-resolved in the background; connections are plain TCP or TLS (`MEMCACHE_TLS*`).

mod proto;

/// What a node may send back, for the fuzz target (`memcached_reply`).
#[doc(hidden)]
pub use proto::check_replies;
mod srv;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::task::Poll;
use std::time::Duration;

use async_trait::async_trait;
use ratelimit_core::{CounterStore, Increment, MAX_HITS, StoreError};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_rustls::TlsConnector;

use crate::Io;
pub use crate::client_tls::ClientTls as MemcachedTls;
use proto::{Conn, Reply};
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

type Logger = Arc<dyn Fn(Severity, &str) + Send + Sync>;
type Pooled = Conn<Box<dyn Io>>;

struct Node {
    addr: String,
    /// The name the node's certificate must carry, when TLS is on.
    server_name: Option<ServerName<'static>>,
    idle: Mutex<Vec<Pooled>>,
}

type NodeList = Arc<[Arc<Node>]>;

struct Inner {
    /// Swapped as a whole when the SRV record changes; a call keeps the list it started with.
    nodes: RwLock<NodeList>,
    tls: Option<TlsConnector>,
    max_idle_conns: usize,
    timeout: Duration,
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

impl Node {
    fn new(addr: &str, tls: bool) -> Result<Node, String> {
        let addr = addr.trim();
        let server_name = if tls {
            Some(crate::client_tls::server_name(addr)?)
        } else {
            crate::client_tls::host_of(addr).ok_or_else(|| format!("{addr:?} is not host:port"))?;
            None
        };
        Ok(Node {
            addr: addr.to_owned(),
            server_name,
            idle: Mutex::new(Vec::new()),
        })
    }
}

/// Runs `futs` concurrently on the current task: a call touches a few nodes at once, and the
/// futures borrow the request, so spawning tasks would mean copying it.
async fn join_all<F: Future>(mut futs: Vec<F>) -> Vec<F::Output> {
    // Most requests touch one node: no boxing then.
    if futs.len() == 1 {
        if let Some(f) = futs.pop() {
            return vec![f.await];
        }
    }
    let mut futs: Vec<Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (f, o) in futs.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *o = Some(v),
                    Poll::Pending => done = false,
                }
            }
        }
        if done { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// The indexes of `keys` grouped by node; nodes without keys are left out.
fn by_node<'a>(keys: impl Iterator<Item = &'a str>, nodes: usize) -> Vec<(usize, Vec<usize>)> {
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, k) in keys.enumerate() {
        let n = node_for(k, nodes);
        match groups.iter_mut().find(|(g, _)| *g == n) {
            Some((_, idx)) => idx.push(i),
            None => groups.push((n, vec![i])),
        }
    }
    groups
}

/// The first per-command error among `replies`, if any.
fn first_error(replies: &[Reply]) -> Option<io::Error> {
    replies.iter().find_map(|r| match r {
        Reply::Error(e) => Some(io::Error::other(e.clone())),
        _ => None,
    })
}

/// `incr` each key by its hits; `add` those that are missing, with their TTL. A key memcached
/// refuses (say, a non-numeric value) does not stop the others; the error is returned at the
/// end so that the connection is not pooled again.
async fn apply_on(c: &mut Pooled, now: u64, incs: &[&Increment]) -> io::Result<()> {
    let ops: Vec<(&str, u64)> = incs.iter().map(|i| (i.key.as_str(), i.hits)).collect();
    let replies = c.arith("incr", &ops).await?;
    let mut failed = first_error(&replies);
    let missing: Vec<(&str, u64, i64)> = incs
        .iter()
        .zip(&replies)
        .filter(|(_, r)| **r == Reply::NotFound)
        .map(|(i, _)| (i.key.as_str(), i.hits, expiry(i.ttl_seconds, now)))
        .collect();
    if !missing.is_empty() {
        let added = c.add(&missing).await?;
        failed = failed.or_else(|| first_error(&added));
        // Another instance (or an earlier command of this batch) created the key first:
        // count on top of it.
        let again: Vec<(&str, u64)> = missing
            .iter()
            .zip(&added)
            .filter(|(_, r)| **r == Reply::NotStored)
            .map(|((k, hits, _), _)| (*k, *hits))
            .collect();
        if !again.is_empty() {
            let replies = c.arith("incr", &again).await?;
            failed = failed.or_else(|| first_error(&replies));
        }
    }
    failed.map_or(Ok(()), Err)
}

impl Inner {
    fn nodes(&self) -> NodeList {
        self.nodes.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    async fn open(&self, node: &Node) -> io::Result<Pooled> {
        let tcp = TcpStream::connect(node.addr.as_str()).await?;
        // Requests are small and latency-bound.
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn Io> = match (&self.tls, &node.server_name) {
            (Some(tls), Some(name)) => Box::new(tls.connect(name.clone(), tcp).await?),
            _ => Box::new(tcp),
        };
        Ok(Conn::new(io))
    }

    async fn conn(&self, node: &Node) -> Result<Pooled, StoreError> {
        if let Some(c) = node.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(c);
        }
        self.fresh_conn(node).await
    }

    async fn fresh_conn(&self, node: &Node) -> Result<Pooled, StoreError> {
        match timeout(self.timeout, self.open(node)).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(err(format!("memcached {}: {e}", node.addr))),
            Err(_) => Err(err(format!("memcached {}: connect timed out", node.addr))),
        }
    }

    /// Pools `c` again after a clean exchange only: after an error or a timeout, replies
    /// may still be in flight.
    fn finish<T>(
        &self,
        node: &Node,
        c: Pooled,
        what: &str,
        result: Result<io::Result<T>, tokio::time::error::Elapsed>,
    ) -> Result<T, StoreError> {
        match result {
            Ok(Ok(v)) => {
                let mut idle = node.idle.lock().unwrap_or_else(|e| e.into_inner());
                if idle.len() < self.max_idle_conns {
                    idle.push(c);
                }
                Ok(v)
            }
            Ok(Err(e)) => Err(err(format!("memcached {}: {what}: {e}", node.addr))),
            Err(_) => Err(err(format!("memcached {}: {what} timed out", node.addr))),
        }
    }

    /// Reads the keys of `keys` at `idx` (all on `node`), 0 for missing ones.
    async fn read(
        &self,
        node: &Node,
        keys: &[&str],
        idx: &[usize],
    ) -> Result<Vec<u64>, StoreError> {
        let ks: Vec<&str> = idx.iter().map(|i| keys[*i]).collect();
        let pooled = node.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some(mut c) = pooled {
            match timeout(self.timeout, c.get(&ks)).await {
                // An idle connection the node closed meanwhile (a restart, an idle timeout)
                // fails at once; a get is safe to repeat, so try a new connection before
                // failing the request.
                Ok(Err(_)) => {}
                r => return self.finish(node, c, "get", r),
            }
        }
        let mut c = self.fresh_conn(node).await?;
        let r = timeout(self.timeout, c.get(&ks)).await;
        self.finish(node, c, "get", r)
    }

    /// Reads `keys` from their nodes, concurrently, into `out`.
    async fn read_all(
        &self,
        nodes: &[Arc<Node>],
        keys: &[&str],
        out: &mut [u64],
    ) -> Result<(), StoreError> {
        let groups = by_node(keys.iter().copied(), nodes.len());
        let mut reads = Vec::with_capacity(groups.len());
        for (n, idx) in &groups {
            reads.push(self.read(&nodes[*n], keys, idx));
        }
        for ((_, idx), vals) in groups.iter().zip(join_all(reads).await) {
            for (i, v) in idx.iter().zip(vals?) {
                out[*i] = v;
            }
        }
        Ok(())
    }

    /// Applies the increments of `incs` at `idx` (all on `node`).
    async fn apply_node(&self, node: &Node, now: u64, incs: &[Increment], idx: &[usize]) {
        let batch: Vec<&Increment> = idx.iter().map(|i| &incs[*i]).collect();
        // Lost increments are upstream's behaviour too: the answer was already given.
        let Ok(mut c) = self.conn(node).await else {
            return;
        };
        let r = timeout(self.timeout, apply_on(&mut c, now, &batch)).await;
        let _ = self.finish(node, c, "incr", r);
    }

    async fn apply(&self, nodes: &[Arc<Node>], now: u64, incs: &[Increment]) {
        let groups = by_node(incs.iter().map(|i| i.key.as_str()), nodes.len());
        let mut work = Vec::with_capacity(groups.len());
        for (n, idx) in &groups {
            work.push(self.apply_node(&nodes[*n], now, incs, idx));
        }
        join_all(work).await;
    }

    /// Takes back the hits of `batch` at `idx` (all on `node`).
    async fn refund_node(
        &self,
        node: &Node,
        batch: &[Increment],
        idx: &[usize],
    ) -> Result<(), StoreError> {
        let ops: Vec<(&str, u64)> = idx
            .iter()
            .map(|i| (batch[*i].key.as_str(), batch[*i].hits))
            .collect();
        let mut c = self.conn(node).await?;
        // decr stops at zero in memcached and a missing key has nothing to refund; a failed
        // refund leaves the counter high, which the answer already assumed.
        let r = timeout(self.timeout, c.arith("decr", &ops)).await;
        let _ = self.finish(node, c, "decr", r);
        Ok(())
    }

    /// Swaps in `servers` if they differ from the current list; says what changed.
    fn set_servers(&self, servers: &[String]) -> Result<Option<String>, String> {
        let current = self.nodes();
        if current.len() == servers.len() && current.iter().zip(servers).all(|(n, s)| n.addr == *s)
        {
            return Ok(None);
        }
        let mut fresh = Vec::with_capacity(servers.len());
        for s in servers {
            // A node that stays keeps its idle connections.
            match current.iter().find(|n| n.addr == *s) {
                Some(n) => fresh.push(n.clone()),
                None => fresh.push(Arc::new(Node::new(s, self.tls.is_some())?)),
            }
        }
        *self.nodes.write().unwrap_or_else(|e| e.into_inner()) = fresh.into();
        let old: Vec<&str> = current.iter().map(|n| n.addr.as_str()).collect();
        Ok(Some(format!(
            "memcache servers changed from {} to {}",
            old.join(","),
            servers.join(",")
        )))
    }
}

async fn refresh_loop(inner: Weak<Inner>, resolver: SrvResolver, every: Duration, log: Logger) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let found = resolver.servers().await;
        // The store is gone: nothing left to refresh.
        let Some(inner) = inner.upgrade() else {
            return;
        };
        match found.and_then(|servers| inner.set_servers(&servers)) {
            Ok(None) => {}
            Ok(Some(change)) => log(Severity::Info, &change),
            Err(e) => log(
                Severity::Error,
                &format!(
                    "memcache SRV refresh failed, keeping the {} current servers: {e}",
                    inner.nodes().len()
                ),
            ),
        }
    }
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
        let keys: Vec<&str> = batch.iter().map(|i| i.key.as_str()).collect();
        let mut before = vec![0u64; batch.len()];
        self.inner.read_all(&nodes, &keys, &mut before).await?;
        for ((c, b), inc) in counts.iter_mut().zip(&before).zip(batch) {
            *c = b.saturating_add(inc.hits);
        }
        let pending: Vec<Increment> = batch
            .iter()
            .zip(&before)
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

    async fn get(&self, _now: u64, keys: &[&str], out: &mut [u64]) -> Result<(), StoreError> {
        for k in keys {
            check_key(k)?;
        }
        self.inner.read_all(&self.inner.nodes(), keys, out).await
    }

    async fn refund(&self, _now: u64, batch: &[Increment]) -> Result<(), StoreError> {
        for inc in batch {
            check_key(&inc.key)?;
        }
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
