//! The registry of statistics named from request values, bounded in entries and in bytes.
//!
//! Request values are attacker-sized: a count cap alone lets 10,000 names of a megabyte
//! each pin 10 GB. So every entry is charged its name's length plus a fixed estimate of its
//! bookkeeping, the total stays under a byte budget, and a name too long to share that
//! budget sensibly (over [`NAME_SHARE`] of it) is never stored at all.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use hashbrown::HashMap;

use super::RuleStats;

/// What an entry costs besides its name: the map slot (name `String` and `Dynamic`) and
/// the counters' `Arc` allocation, rounded up for allocator headers.
pub const ENTRY_OVERHEAD: usize = 128;

/// A name may take at most this fraction (1/N) of the byte budget: past it, one name would
/// evict many ordinary ones, and a stat name that long is no use to anyone reading it.
pub const NAME_SHARE: usize = 64;

#[derive(Debug, Clone)]
pub(super) enum Dynamic {
    Rule(Arc<RuleStats>),
    Counter(Arc<AtomicU64>),
}

/// What [`Registry::get_or_insert`] did besides answering.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Dropped(pub u64);

#[derive(Debug)]
pub(super) struct Registry {
    map: HashMap<String, Dynamic>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

/// The bytes an entry named `key` is charged.
pub fn cost(key: &str) -> usize {
    key.len().saturating_add(ENTRY_OVERHEAD)
}

impl Registry {
    pub fn new(max_entries: u64, max_bytes: u64) -> Self {
        Registry {
            map: HashMap::new(),
            bytes: 0,
            max_entries: usize::try_from(max_entries).unwrap_or(usize::MAX).max(1),
            max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Dynamic> {
        self.map.get(key)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Bytes charged to the entries held now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Dynamic)> {
        self.map.iter()
    }

    /// The entry named `key`, created with `make` when missing after evicting arbitrary
    /// entries until both bounds hold. `None` when the name alone is over its share of the
    /// budget; the refusal counts as one dropped statistic.
    pub fn get_or_insert(
        &mut self,
        key: &str,
        make: impl FnOnce() -> Dynamic,
    ) -> (Option<Dynamic>, Dropped) {
        if let Some(d) = self.map.get(key) {
            return (Some(d.clone()), Dropped(0));
        }
        let cost = cost(key);
        if cost > self.max_bytes / NAME_SHARE {
            return (None, Dropped(1));
        }
        let mut dropped = 0;
        while self.map.len() >= self.max_entries || self.bytes.saturating_add(cost) > self.max_bytes
        {
            // hashbrown's iteration order follows the hashes: a cheap random eviction.
            let Some(victim) = self.map.keys().next().cloned() else {
                break;
            };
            self.map.remove(&victim);
            self.bytes -= self::cost(&victim);
            dropped += 1;
        }
        let d = make();
        self.map.insert(key.to_owned(), d.clone());
        self.bytes += cost;
        (Some(d), Dropped(dropped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter() -> Dynamic {
        Dynamic::Counter(Arc::default())
    }

    #[test]
    fn bytes_are_charged_and_released_on_eviction() {
        let mut r = Registry::new(1_000, 10 * ENTRY_OVERHEAD as u64 * NAME_SHARE as u64);
        let (d, dropped) = r.get_or_insert("abc", counter);
        assert!(d.is_some());
        assert_eq!(dropped, Dropped(0));
        assert_eq!(r.bytes(), 3 + ENTRY_OVERHEAD);
        // Fill past the budget with names of a known size: the total never exceeds it.
        let name = |i: usize| format!("{i:0>1000}");
        let mut evicted = 0;
        for i in 0..200 {
            evicted += r.get_or_insert(&name(i), counter).1.0;
            assert!(r.bytes() <= r.max_bytes, "{} > {}", r.bytes(), r.max_bytes);
            assert!(r.get(&name(i)).is_some(), "the newest name is kept");
        }
        assert!(evicted > 0);
        let held: usize = r.iter().map(|(k, _)| cost(k)).sum();
        assert_eq!(held, r.bytes());
    }

    #[test]
    fn a_name_over_its_share_is_not_stored() {
        let budget = 64 * 1024;
        let mut r = Registry::new(1_000, budget);
        r.get_or_insert("small", counter);
        let huge = "x".repeat(1 << 20);
        let (d, dropped) = r.get_or_insert(&huge, counter);
        assert!(d.is_none());
        assert_eq!(dropped, Dropped(1));
        // Nothing was evicted for it, and it holds no bytes.
        assert_eq!(r.len(), 1);
        assert_eq!(r.bytes(), cost("small"));
        let limit = budget as usize / NAME_SHARE - ENTRY_OVERHEAD;
        assert!(r.get_or_insert(&"y".repeat(limit), counter).0.is_some());
        assert!(r.get_or_insert(&"z".repeat(limit + 1), counter).0.is_none());
    }

    #[test]
    fn the_entry_cap_still_holds() {
        let mut r = Registry::new(3, u64::MAX);
        let dropped: u64 = (0..10)
            .map(|i| r.get_or_insert(&format!("k{i}"), counter).1.0)
            .sum();
        assert_eq!(r.len(), 3);
        assert_eq!(dropped, 7);
    }
}
