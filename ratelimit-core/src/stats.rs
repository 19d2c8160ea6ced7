//! Statistics: per-rule counters with upstream's names, and a bounded registry.
//!
//! Counters are atomics reached through an `Arc` that the compiled rule holds, so the hot
//! path adds to them without formatting a name or taking a lock. Only stats whose names come
//! from request values (overrides, `detailed_metric`, `value_to_metric`, unknown domains) go
//! through the registry map, and that map is capped: upstream grows without bound there.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

use hashbrown::HashMap;

/// Prefix of every per-rule statistic.
pub const RULE_PREFIX: &str = "ratelimit.service.rate_limit.";

/// The six counters upstream keeps per rule.
///
/// `total_hits` is not stored: it is `within_limit` plus a private count of the other
/// hits, so a request within its limit (the common case) costs one atomic add instead of
/// two. Locked adds on a line that every thread writes are a large share of an in-process
/// decision (measured in docs/benchmarks.md, sixth session).
#[derive(Debug, Default)]
pub struct RuleStats {
    /// Hits not counted in `within_limit` (over the limit, or the part of a request that
    /// crossed it); `total_hits` is this plus `within_limit`.
    not_within: AtomicU64,
    /// Hits over the limit.
    pub over_limit: AtomicU64,
    /// Hits above the near-limit ratio but within the limit.
    pub near_limit: AtomicU64,
    /// Hits within the limit.
    pub within_limit: AtomicU64,
    /// Over-limit hits answered from the local over-limit cache.
    pub over_limit_with_local_cache: AtomicU64,
    /// Over-limit hits let through by a shadow-mode rule.
    pub shadow_mode: AtomicU64,
}

/// What one decision adds to a rule's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatDelta {
    /// Added to `total_hits`.
    pub total_hits: u64,
    /// Added to `over_limit`.
    pub over_limit: u64,
    /// Added to `near_limit`.
    pub near_limit: u64,
    /// Added to `within_limit`.
    pub within_limit: u64,
    /// Added to `over_limit_with_local_cache`.
    pub over_limit_with_local_cache: u64,
    /// Added to `shadow_mode`.
    pub shadow_mode: u64,
}

impl RuleStats {
    /// Adds a delta; zero fields cost a branch, not an atomic operation.
    #[inline(always)] // six tests, usually one add: less than the call
    pub fn add(&self, d: &StatDelta) {
        let add = |c: &AtomicU64, v: u64| {
            if v != 0 {
                c.fetch_add(v, Relaxed);
            }
        };
        add(&self.within_limit, d.within_limit);
        add(
            &self.not_within,
            d.total_hits.saturating_sub(d.within_limit),
        );
        add(&self.over_limit, d.over_limit);
        add(&self.near_limit, d.near_limit);
        add(
            &self.over_limit_with_local_cache,
            d.over_limit_with_local_cache,
        );
        add(&self.shadow_mode, d.shadow_mode);
    }

    /// All hits. Read as two counters, so a read racing an add may see the add's
    /// `within_limit` part only; every counter is a running total, so the next read
    /// catches up.
    pub fn total_hits(&self) -> u64 {
        self.within_limit
            .load(Relaxed)
            .wrapping_add(self.not_within.load(Relaxed))
    }

    fn fields(&self) -> [(&'static str, u64); 6] {
        [
            ("near_limit", self.near_limit.load(Relaxed)),
            ("over_limit", self.over_limit.load(Relaxed)),
            (
                "over_limit_with_local_cache",
                self.over_limit_with_local_cache.load(Relaxed),
            ),
            ("shadow_mode", self.shadow_mode.load(Relaxed)),
            ("total_hits", self.total_hits()),
            ("within_limit", self.within_limit.load(Relaxed)),
        ]
    }
}

/// Makes a stat key safe for statsd-style sinks, as upstream does: `:` and `|` become `_`,
/// and so do the dots of IPv4 addresses (which would otherwise split the metric path).
pub fn sanitize_stat_name(name: &str) -> String {
    let mut out: Vec<u8> = name
        .bytes()
        .map(|b| if b == b':' || b == b'|' { b'_' } else { b })
        .collect();
    let mut i = 0;
    while i < out.len() {
        if let Some(len) = ipv4_len(&out[i..]) {
            let at_boundary = i == 0 || !out[i - 1].is_ascii_digit();
            if at_boundary {
                for b in &mut out[i..i + len] {
                    if *b == b'.' {
                        *b = b'_';
                    }
                }
                i += len;
                continue;
            }
        }
        i += 1;
    }
    // Only ASCII bytes were replaced by ASCII bytes.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Length of a dotted quad (four groups of 1-3 digits) at the start of `s`, if any.
fn ipv4_len(s: &[u8]) -> Option<usize> {
    let mut pos = 0;
    for group in 0..4 {
        let digits = s[pos..]
            .iter()
            .take(3)
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        pos += digits;
        if group < 3 {
            if s.get(pos) != Some(&b'.') {
                return None;
            }
            pos += 1;
        }
    }
    if s.get(pos).is_some_and(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(pos)
}

#[derive(Debug, Clone)]
enum Dynamic {
    Rule(Arc<RuleStats>),
    Counter(Arc<AtomicU64>),
}

/// The process-wide statistics of a limiter: per-rule counters and named counters.
#[derive(Debug)]
pub struct Stats {
    rules: RwLock<HashMap<String, Arc<RuleStats>>>,
    counters: RwLock<HashMap<String, Arc<AtomicU64>>>,
    /// Stats named from request values, kept apart so that only they are evicted.
    dynamic: RwLock<HashMap<String, Dynamic>>,
    dynamic_entries: AtomicU64,
    dynamic_cap: u64,
    dropped: AtomicU64,
    /// `ratelimit.service.global_shadow_mode`.
    pub global_shadow_mode: Arc<AtomicU64>,
    /// `ratelimit.service.config_load_success`.
    pub config_load_success: Arc<AtomicU64>,
    /// `ratelimit.service.config_load_error`.
    pub config_load_error: Arc<AtomicU64>,
    /// `ratelimit.service.call.should_rate_limit.service_error`.
    pub service_error: Arc<AtomicU64>,
}

/// Default cap on statistics created from request values.
pub const DEFAULT_DYNAMIC_STATS_CAP: u64 = 10_000;

impl Default for Stats {
    fn default() -> Self {
        Stats::with_dynamic_cap(DEFAULT_DYNAMIC_STATS_CAP)
    }
}

impl Stats {
    /// A registry that keeps at most `cap` statistics named from request values; hits for
    /// further names are counted in `ratelimit.service.stats_dropped` instead.
    pub fn with_dynamic_cap(cap: u64) -> Self {
        let counters: RwLock<HashMap<String, Arc<AtomicU64>>> = RwLock::default();
        let named = |name: &str| {
            let c = Arc::new(AtomicU64::new(0));
            counters
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.to_owned(), c.clone());
            c
        };
        Stats {
            global_shadow_mode: named("ratelimit.service.global_shadow_mode"),
            config_load_success: named("ratelimit.service.config_load_success"),
            config_load_error: named("ratelimit.service.config_load_error"),
            service_error: named("ratelimit.service.call.should_rate_limit.service_error"),
            rules: RwLock::default(),
            counters,
            dynamic: RwLock::default(),
            dynamic_entries: AtomicU64::new(0),
            dynamic_cap: cap,
            dropped: AtomicU64::new(0),
        }
    }

    /// Counters of the rule with stats key `key` (e.g. `domain.key_value`), created on
    /// first use. Rules from configuration use this; their number is bounded by the config.
    pub fn rule(&self, key: &str) -> Arc<RuleStats> {
        if let Some(s) = self
            .rules
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
        {
            return s.clone();
        }
        self.rules
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.to_owned())
            .or_default()
            .clone()
    }

    /// Like [`Stats::rule`] for keys built from request values. Once `cap` such stats
    /// exist, an arbitrary one is evicted to make room (its counts are lost; the eviction is
    /// counted in `ratelimit.service.stats_dropped`). Keys that are also configured rules
    /// resolve to the rule's counters.
    pub fn dynamic_rule(&self, key: &str) -> Option<Arc<RuleStats>> {
        if let Some(s) = self
            .rules
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
        {
            return Some(s.clone());
        }
        match self.dynamic(key, || Dynamic::Rule(Arc::default())) {
            Dynamic::Rule(r) => Some(r),
            // The name is taken by a counter; there is nothing sensible to add to.
            Dynamic::Counter(_) => None,
        }
    }

    /// The dynamic stat named `key`, created (evicting another at the cap) when missing.
    fn dynamic(&self, key: &str, make: impl FnOnce() -> Dynamic) -> Dynamic {
        if let Some(d) = self
            .dynamic
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
        {
            return d.clone();
        }
        let mut map = self.dynamic.write().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = map.get(key) {
            return d.clone();
        }
        while map.len() as u64 >= self.dynamic_cap.max(1) {
            // hashbrown's iteration order is effectively random: a cheap random eviction.
            let Some(victim) = map.keys().next().cloned() else {
                break;
            };
            map.remove(&victim);
            self.dropped.fetch_add(1, Relaxed);
        }
        let d = make();
        map.insert(key.to_owned(), d.clone());
        self.dynamic_entries.store(map.len() as u64, Relaxed);
        d
    }

    /// A named counter, created on first use. For names built from request values use
    /// [`Stats::dynamic_counter_add`].
    pub fn counter(&self, name: &str) -> Arc<AtomicU64> {
        if let Some(c) = self
            .counters
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            return c.clone();
        }
        self.counters
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name.to_owned())
            .or_default()
            .clone()
    }

    /// Adds `n` to a counter whose name comes from request values, within the cap.
    pub fn dynamic_counter_add(&self, name: &str, n: u64) {
        if let Some(c) = self
            .counters
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            c.fetch_add(n, Relaxed);
            return;
        }
        if let Dynamic::Counter(c) = self.dynamic(name, || Dynamic::Counter(Arc::default())) {
            c.fetch_add(n, Relaxed);
        }
    }

    /// Number of stats created from request values so far.
    pub fn dynamic_entries(&self) -> u64 {
        self.dynamic_entries.load(Relaxed)
    }

    /// Every statistic with its full name and current value, sorted by name.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for (k, c) in self
            .counters
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            out.insert(k.clone(), c.load(Relaxed));
        }
        let rule_fields = |out: &mut BTreeMap<String, u64>, k: &str, s: &RuleStats| {
            for (field, v) in s.fields() {
                out.insert(format!("{RULE_PREFIX}{k}.{field}"), v);
            }
        };
        for (k, s) in self.rules.read().unwrap_or_else(|e| e.into_inner()).iter() {
            rule_fields(&mut out, k, s);
        }
        for (k, d) in self
            .dynamic
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            match d {
                Dynamic::Rule(s) => rule_fields(&mut out, k, s),
                Dynamic::Counter(c) => {
                    out.insert(k.clone(), c.load(Relaxed));
                }
            }
        }
        out.insert(
            "ratelimit.service.stats_dropped".to_owned(),
            self.dropped.load(Relaxed),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_like_upstream() {
        assert_eq!(sanitize_stat_name("a:b|c"), "a_b_c");
        assert_eq!(
            sanitize_stat_name("domain.remote_address_10.0.0.1"),
            "domain.remote_address_10_0_0_1"
        );
        assert_eq!(sanitize_stat_name("domain.key_1.2.3"), "domain.key_1.2.3");
        assert_eq!(sanitize_stat_name("d.k_1.2.3.4567"), "d.k_1.2.3.4567");
    }

    #[test]
    fn dynamic_stats_are_capped_by_eviction() {
        let s = Stats::with_dynamic_cap(3);
        for i in 0..10 {
            s.dynamic_rule(&format!("d.k_{i}"))
                .unwrap()
                .add(&StatDelta {
                    total_hits: 1,
                    ..StatDelta::default()
                });
        }
        s.dynamic_counter_add("ratelimit.service.rate_limit.x.domain_not_found", 1);
        assert_eq!(s.dynamic_entries(), 3);
        assert_eq!(s.snapshot()["ratelimit.service.stats_dropped"], 8);
        assert!(
            s.dynamic_rule("ratelimit.service.rate_limit.x.domain_not_found")
                .is_none()
        );
        // The newest key is always present.
        assert_eq!(
            s.snapshot()["ratelimit.service.rate_limit.x.domain_not_found"],
            1
        );
        // Configured rules are never evicted.
        let r = s.rule("d.configured");
        for i in 0..10 {
            s.dynamic_rule(&format!("d.z_{i}"));
        }
        assert!(Arc::ptr_eq(&r, &s.rule("d.configured")));
    }
}
