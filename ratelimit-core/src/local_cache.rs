//! The local over-limit cache: keys known to be over their limit in the current window are
//! answered without asking the store again (upstream's `LOCAL_CACHE_SIZE_IN_BYTES`).
//!
//! Bounded by bytes, not entries, as operators size it. An entry costs its key plus a fixed
//! overhead; when full, expired entries go first, then arbitrary ones (an evicted key only
//! costs one more store call).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use hashbrown::HashMap;

/// Bytes charged per entry on top of the key: map slot, expiry, allocation header.
const ENTRY_OVERHEAD: usize = 48;
const SHARDS: usize = 16;

#[derive(Debug, Default)]
struct Shard {
    map: HashMap<Box<str>, u64>,
    bytes: usize,
}

/// Counters of the cache, exported as `ratelimit.localcache.*` gauges.
#[derive(Debug, Default)]
pub struct LocalCacheStats {
    /// Lookups that found a live entry.
    pub hit_count: AtomicU64,
    /// Lookups that found nothing (or an expired entry).
    pub miss_count: AtomicU64,
    /// All lookups.
    pub lookup_count: AtomicU64,
    /// Entries dropped because their window ended.
    pub expired_count: AtomicU64,
    /// Live entries dropped to make room.
    pub evacuate_count: AtomicU64,
    /// Entries replaced by a newer insert of the same key.
    pub overwrite_count: AtomicU64,
}

/// A byte-bounded set of over-limit cache keys with expiry.
#[derive(Debug)]
pub struct LocalCache {
    shards: Box<[Mutex<Shard>]>,
    shard_budget: usize,
    hasher: hashbrown::DefaultHashBuilder,
    /// Hit, miss and eviction counters.
    pub stats: LocalCacheStats,
}

impl LocalCache {
    /// A cache that holds at most about `bytes` bytes of entries.
    pub fn new(bytes: usize) -> Self {
        LocalCache {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            shard_budget: (bytes / SHARDS).max(ENTRY_OVERHEAD + 64),
            hasher: hashbrown::DefaultHashBuilder::default(),
            stats: LocalCacheStats::default(),
        }
    }

    fn shard(&self, key: &str) -> &Mutex<Shard> {
        use std::hash::BuildHasher;
        &self.shards[(self.hasher.hash_one(key) >> 60) as usize % SHARDS]
    }

    /// Whether `key` is known to be over its limit at `now`.
    pub fn contains(&self, key: &str, now: u64) -> bool {
        self.stats.lookup_count.fetch_add(1, Relaxed);
        let mut shard = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        let live = match shard.map.get(key) {
            Some(&exp) if exp > now => true,
            Some(_) => {
                if shard.map.remove(key).is_some() {
                    shard.bytes = shard.bytes.saturating_sub(key.len() + ENTRY_OVERHEAD);
                    self.stats.expired_count.fetch_add(1, Relaxed);
                }
                false
            }
            None => false,
        };
        let c = if live {
            &self.stats.hit_count
        } else {
            &self.stats.miss_count
        };
        c.fetch_add(1, Relaxed);
        live
    }

    /// Remembers `key` as over its limit until `expires_at`.
    pub fn insert(&self, key: &str, expires_at: u64, now: u64) {
        let cost = key.len() + ENTRY_OVERHEAD;
        if cost > self.shard_budget {
            return;
        }
        let mut shard = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = shard.map.get_mut(key) {
            *e = expires_at;
            self.stats.overwrite_count.fetch_add(1, Relaxed);
            return;
        }
        if shard.bytes + cost > self.shard_budget {
            let before = shard.map.len();
            shard.map.retain(|_, exp| *exp > now);
            let expired = before - shard.map.len();
            self.stats.expired_count.fetch_add(expired as u64, Relaxed);
            shard.bytes = shard.map.keys().map(|k| k.len() + ENTRY_OVERHEAD).sum();
            while shard.bytes + cost > self.shard_budget {
                let Some(victim) = shard.map.keys().next().cloned() else {
                    break;
                };
                shard.map.remove(&victim);
                shard.bytes = shard.bytes.saturating_sub(victim.len() + ENTRY_OVERHEAD);
                self.stats.evacuate_count.fetch_add(1, Relaxed);
            }
        }
        shard.map.insert(key.into(), expires_at);
        shard.bytes += cost;
    }

    /// Live and not yet swept entries.
    pub fn entry_count(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).map.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_until_expiry() {
        let c = LocalCache::new(1 << 20);
        assert!(!c.contains("k", 10));
        c.insert("k", 20, 10);
        assert!(c.contains("k", 19));
        assert!(!c.contains("k", 20));
        assert_eq!(c.stats.hit_count.load(Relaxed), 1);
        assert_eq!(c.stats.miss_count.load(Relaxed), 2);
        assert_eq!(c.stats.expired_count.load(Relaxed), 1);
    }

    #[test]
    fn stays_within_its_byte_budget() {
        let budget = 64 * 1024;
        let c = LocalCache::new(budget);
        for i in 0..100_000 {
            c.insert(&format!("domain_key_value_{i}_1700000000"), 1_000, 0);
        }
        let bytes: usize = c.shards.iter().map(|s| s.lock().unwrap().bytes).sum();
        assert!(bytes <= budget, "{bytes} > {budget}");
        assert!(c.entry_count() > 500, "still useful: {}", c.entry_count());
        assert!(c.stats.evacuate_count.load(Relaxed) > 0);
    }
}
