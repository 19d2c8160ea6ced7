//! An in-process counter store: sharded maps of fixed-window counters, and of the states
//! of sliding windows and token buckets.

use async_trait::async_trait;
use hashbrown::HashTable;
use parking_lot::Mutex;
use ratelimit_core::{CounterStore, Increment, KeyId, Op, StoreError, StoreKind};

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
    /// upstream rule) stay as small as they are.
    states: HashTable<(KeyId, states::State)>,
    /// Earliest time at which the next sweep of dead keys may run.
    next_sweep: u64,
}

/// A sharded, lock-light in-memory [`CounterStore`].
///
/// Counters are named by [`Increment::id`], a fingerprint of the key's parts that the
/// limiter computes instead of the key's text (see `ratelimit_core::key_id`): a counter
/// holds 16 bytes of identity whatever its key's length. One consequence: descriptors
/// that upstream's `_`-joined text makes one key (`a_b` + `c` and `a` + `b_c`) count
/// apart here, where Redis and memcached count them together (`key_id` has the other).
///
/// A counter lives until its window ends; one found after that starts over in its new
/// window (a key text holds its window's start, an identity the window's length). Dead
/// counters are reclaimed by a sweep of a shard at most once a second, triggered by
/// traffic to that shard, so memory is bounded by the number of live windows.
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
    /// A fixed number, so that indexing by a hash's bits needs no bounds check.
    shards: Box<[Mutex<Shard>; SHARDS]>,
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
            shards: Box::new(std::array::from_fn(|_| Mutex::default())),
        }
    }

    /// An empty store whose shards hold at most `max_chunks` chunks of counters each.
    #[cfg(test)]
    fn with_max_chunks(max_chunks: usize) -> Self {
        MemoryStore {
            shards: Box::new(std::array::from_fn(|_| {
                Mutex::new(Shard {
                    counters: counters::Counters::with_max_chunks(max_chunks),
                    ..Shard::default()
                })
            })),
        }
    }

    /// The counter's hash and its shard.
    #[inline(always)]
    fn shard(&self, id: &KeyId) -> (u64, &Mutex<Shard>) {
        let hash = id.table_hash();
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

    /// Adds the hits of a fixed-window increment to its key and returns the new value;
    /// synchronous core of the store.
    pub fn increment_one(&self, now: u64, inc: &Increment) -> u64 {
        self.count_window(now, inc)
    }

    #[inline(always)] // the body of the store's one common call
    fn count_window(&self, now: u64, inc: &Increment) -> u64 {
        let mut text = KeyId::default();
        let id = inc.counter_id(&mut text);
        let (hash, shard) = self.shard(id);
        let mut shard = shard.lock();
        if now >= shard.next_sweep {
            sweep(&mut shard, now);
        }
        self.count_in(&mut shard, (hash, id), now, inc)
    }

    /// A fixed window's count in a shard already locked.
    #[inline(always)]
    fn count_in(
        &self,
        shard: &mut Shard,
        (hash, id): (u64, &KeyId),
        now: u64,
        inc: &Increment,
    ) -> u64 {
        let seconds = match inc.op {
            Op::Window { seconds } => seconds,
            _ => inc.unit.seconds(),
        };
        shard.counters.add(
            hash,
            &id.to_bytes(),
            inc.hits,
            now,
            || window_end(seconds, now),
            stored_hash,
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

    /// Reads the live value of the fixed-window counter that [`Increment::window`] names
    /// `key` without changing it.
    pub fn value(&self, now: u64, key: &str) -> Option<u64> {
        self.value_of(now, &KeyId::of_text(key))
    }

    /// Reads the live value of a fixed-window counter without changing it.
    pub fn value_of(&self, now: u64, id: &KeyId) -> Option<u64> {
        let (hash, shard) = self.shard(id);
        shard.lock().counters.value(hash, &id.to_bytes(), now)
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

/// The table hash of a stored counter's identity, for a table's growth.
fn stored_hash(id: &counters::Id) -> u64 {
    KeyId::from_bytes(*id).table_hash()
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
            by_id: true,
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

    async fn get(&self, now: u64, batch: &[Increment], out: &mut [u64]) -> Result<(), StoreError> {
        for (inc, o) in batch.iter().zip(out.iter_mut()) {
            *o = if inc.always_counts() {
                self.value_of(now, inc.counter_id(&mut KeyId::default()))
                    .unwrap_or(0)
            } else {
                0
            };
        }
        Ok(())
    }

    async fn refund(&self, now: u64, batch: &[Increment]) -> Result<(), StoreError> {
        for inc in batch {
            let id = inc.counter_id(&mut KeyId::default()).to_bytes();
            let (hash, shard) = self.shard(&KeyId::from_bytes(id));
            shard.lock().counters.refund(hash, &id, inc.hits, now);
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
