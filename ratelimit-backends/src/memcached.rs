//! A memcached counter store with upstream's protocol use: read all keys with one `get` per
//! node, decide from those values, and apply the increments asynchronously (`incr`, or
//! `add` with the TTL when the key is new). Concurrent requests may therefore overshoot a
//! limit slightly, as upstream documents.
//!
//! Keys map to nodes as gomemcache does (CRC-32 of the key modulo the node count), so this
//! server and upstream's can share a memcached fleet.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_memcached::{AsciiProtocol, Client, Error as McError, Status};
use async_trait::async_trait;
use ratelimit_core::{CounterStore, Increment, StoreError};

const ERR: &str = "memcache_error";
/// memcached reads expirations above 30 days as absolute Unix times.
const RELATIVE_TTL_MAX: u64 = 2_592_000;
/// memcached's key length limit.
pub const MAX_KEY_LEN: usize = 250;

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError::new(ERR, e.to_string())
}

/// Settings named after upstream's `MEMCACHE_*` variables.
#[derive(Debug, Clone)]
pub struct MemcachedSettings {
    /// `MEMCACHE_HOST_PORT`: every node, in the same order on every instance.
    pub nodes: Vec<String>,
    /// `MEMCACHE_MAX_IDLE_CONNS`: idle connections kept per node.
    pub max_idle_conns: usize,
    /// Bound on each operation (ours: `MEMCACHE_TIMEOUT`).
    pub timeout: Duration,
}

impl Default for MemcachedSettings {
    fn default() -> Self {
        MemcachedSettings {
            nodes: Vec::new(),
            max_idle_conns: 2,
            timeout: Duration::from_secs(1),
        }
    }
}

struct Node {
    addr: String,
    idle: Mutex<Vec<Client>>,
}

/// The memcached [`CounterStore`].
pub struct MemcachedStore {
    nodes: Arc<Vec<Node>>,
    settings: MemcachedSettings,
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
    async fn conn(&self, timeout: Duration) -> Result<Client, StoreError> {
        if let Some(c) = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(c);
        }
        match tokio::time::timeout(timeout, Client::new(format!("tcp://{}", self.addr))).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(err(format!("memcached {}: {e}", self.addr))),
            Err(_) => Err(err(format!("memcached {}: connect timed out", self.addr))),
        }
    }

    fn put_back(&self, c: Client, max_idle: usize) {
        if c.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < max_idle {
            idle.push(c);
        }
    }
}

impl MemcachedStore {
    /// A store over `settings.nodes`; connections are opened on demand.
    pub fn new(settings: MemcachedSettings) -> Result<MemcachedStore, StoreError> {
        if settings.nodes.is_empty() {
            return Err(err("MEMCACHE_HOST_PORT lists no node"));
        }
        let nodes = settings
            .nodes
            .iter()
            .map(|a| Node {
                addr: a.trim().to_owned(),
                idle: Mutex::new(Vec::new()),
            })
            .collect();
        Ok(MemcachedStore {
            nodes: Arc::new(nodes),
            settings,
            pending: Arc::new(AtomicUsize::new(0)),
        })
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

    /// Reads `keys` (all on node `n`), 0 for missing ones.
    async fn read(&self, n: usize, keys: &[&str]) -> Result<Vec<u64>, StoreError> {
        let node = &self.nodes[n];
        let mut c = node.conn(self.settings.timeout).await?;
        let r = tokio::time::timeout(self.settings.timeout, c.get_multi(keys.iter())).await;
        let values = match r {
            Err(_) => return Err(err(format!("memcached {}: get timed out", node.addr))),
            Ok(Err(McError::Protocol(Status::NotFound))) => Vec::new(),
            Ok(Err(e)) => return Err(err(format!("memcached {}: {e}", node.addr))),
            Ok(Ok(v)) => v,
        };
        node.put_back(c, self.settings.max_idle_conns);
        Ok(keys
            .iter()
            .map(|k| {
                values
                    .iter()
                    .find(|v| v.key == k.as_bytes())
                    .and_then(|v| v.data.as_deref())
                    .and_then(|d| std::str::from_utf8(d).ok())
                    .and_then(|s| s.trim().parse().ok())
                    .unwrap_or(0)
            })
            .collect())
    }

    async fn apply(
        nodes: Arc<Vec<Node>>,
        settings: MemcachedSettings,
        now: u64,
        incs: Vec<Increment>,
    ) {
        for inc in incs {
            let node = &nodes[node_for(&inc.key, nodes.len())];
            let Ok(mut c) = node.conn(settings.timeout).await else {
                continue;
            };
            let op = async {
                match c.increment(&inc.key, inc.hits).await {
                    Ok(_) => return,
                    Err(McError::Protocol(Status::NotFound)) => {}
                    Err(_) => return,
                }
                let exp = Some(expiry(inc.ttl_seconds, now));
                let value = inc.hits.to_string();
                // Another instance created it first: count on top of theirs.
                if let Err(McError::Protocol(Status::NotStored)) =
                    c.add(&inc.key, &value, exp, None).await
                {
                    let _ = c.increment(&inc.key, inc.hits).await;
                }
            };
            if tokio::time::timeout(settings.timeout, op).await.is_ok() {
                node.put_back(c, settings.max_idle_conns);
            }
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
        let keys: Vec<&str> = batch.iter().map(|i| i.key.as_str()).collect();
        let mut before = vec![0u64; batch.len()];
        CounterStore::get(self, now, &keys, &mut before).await?;
        for ((c, b), inc) in counts.iter_mut().zip(&before).zip(batch) {
            *c = b.saturating_add(inc.hits);
        }
        let pending: Vec<Increment> = batch.iter().filter(|i| i.hits > 0).cloned().collect();
        if !pending.is_empty() {
            let counter = self.pending.clone();
            counter.fetch_add(1, Ordering::AcqRel);
            let (nodes, settings) = (self.nodes.clone(), self.settings.clone());
            tokio::spawn(async move {
                MemcachedStore::apply(nodes, settings, now, pending).await;
                counter.fetch_sub(1, Ordering::AcqRel);
            });
        }
        Ok(())
    }

    async fn get(&self, _now: u64, keys: &[&str], out: &mut [u64]) -> Result<(), StoreError> {
        let n = self.nodes.len();
        let mut by_node: Vec<Vec<(usize, &str)>> = vec![Vec::new(); n];
        for (i, k) in keys.iter().enumerate() {
            check_key(k)?;
            by_node[node_for(k, n)].push((i, k));
        }
        for (node, items) in by_node.iter().enumerate() {
            if items.is_empty() {
                continue;
            }
            let ks: Vec<&str> = items.iter().map(|(_, k)| *k).collect();
            let vals = self.read(node, &ks).await?;
            for ((i, _), v) in items.iter().zip(vals) {
                out[*i] = v;
            }
        }
        Ok(())
    }

    async fn refund(&self, _now: u64, batch: &[Increment]) -> Result<(), StoreError> {
        for inc in batch {
            check_key(&inc.key)?;
            let node = &self.nodes[node_for(&inc.key, self.nodes.len())];
            let mut c = node.conn(self.settings.timeout).await?;
            // decr stops at zero in memcached; a missing key has nothing to refund.
            let _ =
                tokio::time::timeout(self.settings.timeout, c.decrement(&inc.key, inc.hits)).await;
            node.put_back(c, self.settings.max_idle_conns);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_memcached_cannot_hold_are_refused() {
        assert!(check_key("d_k_v_60").is_ok());
        assert!(check_key(&"x".repeat(250)).is_ok());
        assert!(
            check_key(&"x".repeat(251))
                .unwrap_err()
                .message
                .contains("at most 250")
        );
        assert!(check_key("d_k_a b_60").is_err());
        assert!(check_key("d_k_a\nb_60").is_err());
    }

    #[test]
    fn long_ttls_become_absolute() {
        assert_eq!(expiry(60, 1_000), 60);
        assert_eq!(expiry(2_592_000, 1_000), 2_592_000);
        assert_eq!(expiry(2_592_001, 1_000), 2_593_001);
        assert_eq!(expiry(31_536_000, 1_700_000_000), 1_731_536_000);
    }

    #[test]
    fn node_choice_is_gomemcache_compatible() {
        // crc32("foo") = 0x8c736521
        assert_eq!(node_for("foo", 2), (0x8c73_6521usize) % 2);
        assert_eq!(node_for("foo", 3), (0x8c73_6521usize) % 3);
    }
}
