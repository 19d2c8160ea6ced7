//! The nodes and their connections: pooling, one pipelined exchange per node, the fixed
//! windows' reads and background increments, and the SRV refresh of the node list.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::task::Poll;
use std::time::Duration;

use ratelimit_core::{Increment, StoreError};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_rustls::TlsConnector;

use super::proto::{Cmd, Conn, Reply};
use super::srv::SrvResolver;
use super::{Severity, err, expiry, node_for};
use crate::Io;

pub(super) type Logger = Arc<dyn Fn(Severity, &str) + Send + Sync>;
pub(super) type Pooled = Conn<Box<dyn Io>>;

pub(super) struct Node {
    pub(super) addr: String,
    /// The name the node's certificate must carry, when TLS is on.
    server_name: Option<ServerName<'static>>,
    idle: Mutex<Vec<Pooled>>,
}

pub(super) type NodeList = Arc<[Arc<Node>]>;

pub(super) struct Inner {
    /// Swapped as a whole when the SRV record changes; a call keeps the list it started with.
    pub(super) nodes: RwLock<NodeList>,
    pub(super) tls: Option<TlsConnector>,
    pub(super) max_idle_conns: usize,
    pub(super) timeout: Duration,
}

impl Node {
    pub(super) fn new(addr: &str, tls: bool) -> Result<Node, String> {
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
pub(super) async fn join_all<F: Future>(mut futs: Vec<F>) -> Vec<F::Output> {
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
pub(super) fn by_node<'a>(
    keys: impl Iterator<Item = &'a str>,
    nodes: usize,
) -> Vec<(usize, Vec<usize>)> {
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
    pub(super) fn nodes(&self) -> NodeList {
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

    /// Runs `cmds` (all for `node`) as one pipeline, failing on a command memcached
    /// refused (the connection is then not pooled again).
    async fn pipeline(&self, node: &Node, cmds: &[Cmd<'_>]) -> Result<Vec<Reply>, StoreError> {
        let run = async |c: &mut Pooled| {
            let replies = c.run(cmds).await?;
            first_error(&replies).map_or(Ok(replies), Err)
        };
        let pooled = node.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some(mut c) = pooled {
            match timeout(self.timeout, run(&mut c)).await {
                // As for reads: a pooled connection the node had closed answers nothing, and
                // nothing sent on it ran, so even counting commands are safe to send again.
                Ok(Err(_)) if !c.replied() => {}
                r => return self.finish(node, c, "pipeline", r),
            }
        }
        let mut c = self.fresh_conn(node).await?;
        let r = timeout(self.timeout, run(&mut c)).await;
        self.finish(node, c, "pipeline", r)
    }

    /// Runs `cmds` on the nodes of their keys: one pipeline per node, concurrently.
    /// Replies come back in the order of `cmds`.
    pub(super) async fn exchange(
        &self,
        nodes: &[Arc<Node>],
        cmds: &[Cmd<'_>],
    ) -> Result<Vec<Reply>, StoreError> {
        let groups = by_node(cmds.iter().map(|c| c.key()), nodes.len());
        let batches: Vec<Vec<Cmd<'_>>> = groups
            .iter()
            .map(|(_, idx)| idx.iter().map(|i| cmds[*i]).collect())
            .collect();
        let work = groups
            .iter()
            .zip(&batches)
            .map(|((n, _), b)| self.pipeline(&nodes[*n], b))
            .collect();
        let mut replies = vec![Reply::NotFound; cmds.len()];
        for ((_, idx), r) in groups.iter().zip(join_all(work).await) {
            for (i, reply) in idx.iter().zip(r?) {
                replies[*i] = reply;
            }
        }
        Ok(replies)
    }

    /// Reads `keys` from their nodes, concurrently, into `out`.
    pub(super) async fn read_all(
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

    pub(super) async fn apply(&self, nodes: &[Arc<Node>], now: u64, incs: &[Increment]) {
        let groups = by_node(incs.iter().map(|i| i.key.as_str()), nodes.len());
        let mut work = Vec::with_capacity(groups.len());
        for (n, idx) in &groups {
            work.push(self.apply_node(&nodes[*n], now, incs, idx));
        }
        join_all(work).await;
    }

    /// Takes back the hits of `batch` at `idx` (all on `node`).
    pub(super) async fn refund_node(
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

pub(super) async fn refresh_loop(
    inner: Weak<Inner>,
    resolver: SrvResolver,
    every: Duration,
    log: Logger,
) {
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
