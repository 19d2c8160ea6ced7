//! An in-process counter store: sharded maps of fixed-window counters, and of the states
//! of sliding windows and token buckets.

use std::hash::{BuildHasher, Hasher};

use async_trait::async_trait;
use hashbrown::HashTable;
use parking_lot::Mutex;
use ratelimit_core::{CounterStore, Increment, Op, StoreError, StoreKind};

mod counters;
mod states;

/// Shard count: a power of two comfortably above the core counts this runs on, so two
/// threads rarely contend for one lock.
const SHARDS: usize = 64;

#[derive(Debug, Default)]
struct Shard {
    /// Fixed-window counters, each alive until its window ends. Entries are found by a
    /// hash computed once per call, which also picks the shard.
    counters: counters::Counters,
    /// Sliding windows and token buckets, apart so that fixed-window counters (every
    /// upstream rule) stay as small as they are. Keys of up to 24 bytes (most) sit in
    /// the entry itself: a lookup compares them without following a pointer.
    states: HashTable<(compact_str::CompactString, states::State)>,
    /// Earliest time at which the next sweep of dead keys may run.
    next_sweep: u64,
}

/// A sharded, lock-light in-memory [`CounterStore`].
///
/// Keys live until their window ends (the window is encoded in the key, so a key is never
/// counted again after that). Dead keys are reclaimed by a sweep of a shard at most once a
/// second, triggered by traffic to that shard, so memory is bounded by the number of live
/// windows.
///
/// ```
/// use ratelimit_backends::MemoryStore;
/// use ratelimit_core::{CounterStore, Increment, Unit};
///
/// let store = MemoryStore::new();
/// let inc = Increment::window("d_k_v_60", 2, Unit::Minute, 60);
/// let mut counts = [0];
/// futures_executor::block_on(store.increment(61, &[inc], &mut counts)).unwrap();
/// assert_eq!(counts, [2]);
/// ```
#[derive(Debug)]
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    hasher: KeyHasher,
}

/// Hashes keys for the shards and their tables, seeded at random per store. A key of 17
/// to 32 bytes (most cache keys) takes foldhash's mix of such lengths written out inline;
/// other lengths go through foldhash itself.
#[derive(Debug)]
struct KeyHasher {
    fold: hashbrown::DefaultHashBuilder,
    seeds: [u64; 3],
}

impl Default for KeyHasher {
    fn default() -> Self {
        let fold = hashbrown::DefaultHashBuilder::default();
        let seeds = [1u64, 2, 3].map(|i| fold.hash_one(i));
        KeyHasher { fold, seeds }
    }
}

impl KeyHasher {
    #[inline(always)]
    fn hash(&self, key: &[u8]) -> u64 {
        let n = key.len();
        if !(17..=32).contains(&n) {
            // One write: foldhash mixes the length into it, so no length prefix is needed.
            let mut h = self.fold.build_hasher();
            h.write(key);
            return h.finish();
        }
        let w = |at: usize| {
            let mut b = [0; 8];
            b.copy_from_slice(&key[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let [s0, s1, s2] = self.seeds;
        let a = folded_multiply(w(0) ^ s0, w(n - 16) ^ s1);
        let b = folded_multiply(w(8) ^ s2, w(n - 8) ^ s1);
        folded_multiply(a ^ n as u64, b ^ s0)
    }
}

/// The high and low halves of the full product, folded together.
#[inline(always)]
fn folded_multiply(x: u64, y: u64) -> u64 {
    let p = u128::from(x) * u128::from(y);
    (p as u64) ^ ((p >> 64) as u64)
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: KeyHasher::default(),
        }
    }

    /// An empty store whose shards hold at most `max_chunks` chunks of counters each.
    #[cfg(test)]
    fn with_max_chunks(max_chunks: usize) -> Self {
        MemoryStore {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        counters: counters::Counters::with_max_chunks(max_chunks),
                        ..Shard::default()
                    })
                })
                .collect(),
            hasher: KeyHasher::default(),
        }
    }

    /// The key's hash and its shard.
    #[inline(always)]
    fn shard(&self, key: &str) -> (u64, &Mutex<Shard>) {
        let hash = self.hasher_hash(key.as_bytes());
        (hash, &self.shards[self.shard_index(hash)])
    }

    /// The shard of a key's hash.
    #[inline]
    fn shard_index(&self, hash: u64) -> usize {
        // Bits that hashbrown leaves alone: it picks buckets with the low ones and tags
        // them with the top seven, and a shard whose keys all shared a tag would compare
        // every key of a probed group.
        (hash >> 40) as usize % SHARDS
    }

    /// The hash of a key's bytes, for the shard and the tables.
    #[inline(always)]
    fn hasher_hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash(key)
    }

    /// Adds the hits of a fixed-window increment to its key and returns the new value;
    /// synchronous core of the store.
    pub fn increment_one(&self, now: u64, inc: &Increment) -> u64 {
        self.count_window(now, inc)
    }

    #[inline(always)] // the body of the store's one common call
    fn count_window(&self, now: u64, inc: &Increment) -> u64 {
        let (hash, shard) = self.shard(&inc.key);
        let mut shard = shard.lock();
        if now >= shard.next_sweep {
            sweep(&mut shard, now);
        }
        self.count_in(&mut shard, hash, now, inc)
    }

    /// A fixed window's count in a shard already locked.
    #[inline(always)]
    fn count_in(&self, shard: &mut Shard, hash: u64, now: u64, inc: &Increment) -> u64 {
        let seconds = match inc.op {
            Op::Window { seconds } => seconds,
            _ => inc.unit.seconds(),
        };
        shard.counters.add(
            hash,
            &inc.key,
            inc.hits,
            now,
            || window_end(seconds, now),
            |k| self.hasher_hash(k),
        )
    }

    /// Number of keys held, dead ones not yet swept included.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock();
                s.counters.len() + s.states.len()
            })
            .sum()
    }

    /// Whether the store holds no keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads a key's live value without changing it.
    pub fn value(&self, now: u64, key: &str) -> Option<u64> {
        let (hash, shard) = self.shard(key);
        shard.lock().counters.value(hash, key, now)
    }
}

impl MemoryStore {
    /// A batch of several increments, or of another algorithm's.
    #[inline(never)]
    fn increment_batch(&self, now: u64, batch: &[Increment], counts: &mut [u64]) {
        if batch
            .iter()
            .all(|i| !i.joint && matches!(i.op, Op::Window { .. }))
        {
            for (inc, out) in batch.iter().zip(counts.iter_mut()) {
                *out = self.count_window(now, inc);
            }
        } else {
            self.decide_groups(now, batch, counts);
        }
    }
}

/// When the window of `seconds` holding `now` ends. Only a new or restarted counter needs
/// it, so it is out of line.
#[cold]
#[inline(never)]
fn window_end(seconds: u64, now: u64) -> u64 {
    ratelimit_core::algorithm::window_start(now, seconds) + seconds
}

/// Drops a shard's dead keys; at most once a second per shard.
#[cold]
fn sweep(shard: &mut Shard, now: u64) {
    shard.counters.sweep(now);
    shard.states.retain(|(_, s)| s.expires_at > now);
    shard.next_sweep = now + 1;
}

#[async_trait]
impl CounterStore for MemoryStore {
    async fn increment(
        &self,
        now: u64,
        batch: &[Increment],
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        self.increment_now(now, batch, counts)
    }

    /// Keys end with their window (`expires_at`), whatever their TTL says.
    fn kind(&self) -> StoreKind {
        StoreKind::InProcess {
            expires_by_ttl: false,
        }
    }

    #[inline(always)] // the whole store call of a single-descriptor decision
    fn increment_now(
        &self,
        now: u64,
        batch: &[Increment],
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        // A lone fixed window (every single-descriptor upstream rule) takes the short way.
        if let [inc] = batch {
            counts[0] = match inc.op {
                Op::Window { .. } => self.count_window(now, inc),
                _ => self.decide_alone(now, inc),
            };
            return Ok(());
        }
        self.increment_batch(now, batch, counts);
        Ok(())
    }

    async fn get(&self, now: u64, keys: &[&str], out: &mut [u64]) -> Result<(), StoreError> {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.value(now, k).unwrap_or(0);
        }
        Ok(())
    }

    async fn refund(&self, now: u64, batch: &[Increment]) -> Result<(), StoreError> {
        for inc in batch {
            let (hash, shard) = self.shard(&inc.key);
            shard.lock().counters.refund(hash, &inc.key, inc.hits, now);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use ratelimit_core::Unit;

    fn inc(key: &str, hits: u64, unit: Unit) -> Increment {
        Increment::window(key, hits, unit, unit.seconds())
    }

    #[test]
    fn counts_and_expires_with_the_window() {
        let s = MemoryStore::new();
        assert_eq!(s.increment_one(60, &inc("k", 1, Unit::Minute)), 1);
        assert_eq!(s.increment_one(119, &inc("k", 2, Unit::Minute)), 3);
        // Same key after its window ended starts over (keys normally change with the window).
        assert_eq!(s.increment_one(120, &inc("k", 1, Unit::Minute)), 1);
        assert_eq!(s.value(120, "k"), Some(1));
        assert_eq!(s.value(180, "k"), None);
    }

    #[test]
    fn dead_windows_are_reclaimed() {
        let s = MemoryStore::new();
        for i in 0..10_000 {
            s.increment_one(0, &inc(&format!("k{i}"), 1, Unit::Second));
        }
        assert_eq!(s.len(), 10_000);
        // Touch every shard a second later: each sweeps its dead keys.
        for i in 0..10_000 {
            s.increment_one(5, &inc(&format!("n{i}"), 1, Unit::Second));
        }
        assert_eq!(s.len(), 10_000, "only the live keys of second 5 remain");
    }

    #[test]
    fn a_full_shard_answers_over_every_limit() {
        let s = MemoryStore::with_max_chunks(0);
        let mut counts = [0];
        s.increment_now(0, &[inc("k", 1, Unit::Minute)], &mut counts)
            .unwrap();
        assert_eq!(counts, [u64::MAX]);
        assert_eq!(s.value(0, "k"), None);
    }

    #[test]
    fn no_lost_increments_under_concurrency() {
        let s = Arc::new(MemoryStore::new());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..5_000u64 {
                        s.increment_one(100, &inc(&format!("k{}", i % 7), 1 + (t % 2), Unit::Hour));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let total: u64 = (0..7)
            .map(|k| s.value(100, &format!("k{k}")).unwrap())
            .sum();
        // Four threads add 1, four add 2, 5000 times each.
        assert_eq!(total, 4 * 5_000 + 4 * 2 * 5_000);
    }
}
