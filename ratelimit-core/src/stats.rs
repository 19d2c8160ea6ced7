//! Statistics: per-rule counters with upstream's names, and a bounded registry.
//!
//! Counters are atomics reached through an `Arc` that the compiled rule holds, so the hot
//! path adds to them without formatting a name or taking a lock. Only stats whose names come
//! from request values (overrides, `detailed_metric`, `value_to_metric`, unknown domains) go
//! through the registry map, and that map is bounded in entries and bytes: upstream grows
//! without bound there. Rules removed by a reload leave the registry after a last flush.

pub mod dynamic;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};

use hashbrown::HashMap;

use dynamic::{Dynamic, Registry};

/// Prefix of every per-rule statistic.
pub const RULE_PREFIX: &str = "ratelimit.service.rate_limit.";

/// The six counters upstream keeps per rule.
///
/// `total_hits` is not stored: it is `within_limit` plus a private count of the other
/// hits, so a request within its limit (the common case) costs one atomic add instead of
/// two. Locked adds on a line that every thread writes are a large share of an in-process
/// decision.
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
/// Beyond upstream, so do ASCII control characters: request values reach stat keys
/// (`detailed_metric`, `value_to_metric`), and a newline in one would end the statsd line
/// and start another, under any name the client chose.
pub fn sanitize_stat_name(name: &str) -> String {
    let mut out: Vec<u8> = name
        .bytes()
        .map(|b| {
            if b == b':' || b == b'|' || b.is_ascii_control() {
                b'_'
            } else {
                b
            }
        })
        .collect();
    // Upstream's unanchored `\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`: leftmost match first,
    // each group as long as still lets the rest match, then on after the match.
    let mut i = 0;
    while i < out.len() {
        match dotted_quad_len(&out[i..], 0) {
            Some(len) => {
                for b in &mut out[i..i + len] {
                    if *b == b'.' {
                        *b = b'_';
                    }
                }
                i += len;
            }
            None => i += 1,
        }
    }
    // Only ASCII bytes were replaced by ASCII bytes.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Length of the match of groups `group..4` of the dotted quad pattern at the start of
/// `s`, preferring longer groups as Go's regexp does.
fn dotted_quad_len(s: &[u8], group: usize) -> Option<usize> {
    let digits = s.iter().take(3).take_while(|b| b.is_ascii_digit()).count();
    (1..=digits).rev().find_map(|n| {
        if group == 3 {
            return Some(n);
        }
        if s.get(n) != Some(&b'.') {
            return None;
        }
        dotted_quad_len(&s[n + 1..], group + 1).map(|rest| n + 1 + rest)
    })
}

/// The process-wide statistics of a limiter: per-rule counters and named counters.
///
/// Rule counters are kept by stat key, so a rule that survives a reload keeps counting where
/// it was. A reload retires the keys its rules no longer use ([`Stats::retire_rules_except`]);
/// a registry serves the rules of one limiter.
#[derive(Debug)]
pub struct Stats {
    rules: RwLock<HashMap<String, Arc<RuleStats>>>,
    retired: Mutex<Retired>,
    /// Whether retired rules wait for a sink's final flush (see [`Stats::hold_retired`]).
    hold_retired: AtomicBool,
    counters: RwLock<HashMap<String, Arc<AtomicU64>>>,
    /// Stats named from request values, kept apart so that only they are evicted.
    dynamic: RwLock<Registry>,
    dynamic_entries: AtomicU64,
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

/// Rule counters that a reload removed, each with the number of the retirement, waiting
/// for the flush that reports their last values.
#[derive(Debug, Default)]
struct Retired {
    last: u64,
    rules: HashMap<String, (u64, Arc<RuleStats>)>,
}

/// Which retirements a snapshot included: [`Stats::release_flushed`] drops those and no later
/// ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushMark(u64);

/// Default cap on statistics created from request values.
pub const DEFAULT_DYNAMIC_STATS_CAP: u64 = 10_000;

/// Default byte budget of statistics created from request values (names plus bookkeeping).
pub const DEFAULT_DYNAMIC_STATS_BYTES: u64 = 8 << 20;

impl Default for Stats {
    fn default() -> Self {
        Stats::with_dynamic_cap(DEFAULT_DYNAMIC_STATS_CAP)
    }
}

impl Stats {
    /// A registry that keeps at most `cap` statistics named from request values (within the
    /// default byte budget); further names evict others, counted in
    /// `ratelimit.service.stats_dropped`.
    pub fn with_dynamic_cap(cap: u64) -> Self {
        Stats::with_dynamic_bounds(cap, DEFAULT_DYNAMIC_STATS_BYTES)
    }

    /// Like [`Stats::with_dynamic_cap`], with a byte budget too: names plus
    /// [`dynamic::ENTRY_OVERHEAD`] each stay under `bytes`, and a name longer than
    /// 1/[`dynamic::NAME_SHARE`] of it is not kept at all (its hits are not counted; the
    /// refusal is counted in `stats_dropped`).
    pub fn with_dynamic_bounds(cap: u64, bytes: u64) -> Self {
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
            retired: Mutex::default(),
            hold_retired: AtomicBool::new(false),
            counters,
            dynamic: RwLock::new(Registry::new(cap, bytes)),
            dynamic_entries: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Counters of the rule with stats key `key` (e.g. `domain.key_value`), created on
    /// first use. Rules from configuration use this; their number is bounded by the config.
    /// A key retired by a reload and not yet flushed comes back with its counts.
    pub fn rule(&self, key: &str) -> Arc<RuleStats> {
        if let Some(s) = self
            .rules
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
        {
            return s.clone();
        }
        let mut rules = self.rules.write().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = rules.get(key) {
            return s.clone();
        }
        let s = self
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .rules
            .remove(key)
            .map(|(_, s)| s)
            .unwrap_or_default();
        rules.insert(key.to_owned(), s.clone());
        s
    }

    /// Retires the rule counters that none of `live` (the counters of the rules now in
    /// force) is: they leave the registry, after one more flush when a sink holds them
    /// ([`Stats::hold_retired`]), at once otherwise. Without this, every rule ever loaded
    /// would stay in every snapshot.
    pub fn retire_rules_except<'a>(&self, live: impl IntoIterator<Item = &'a Arc<RuleStats>>) {
        let live: hashbrown::HashSet<*const RuleStats> =
            live.into_iter().map(Arc::as_ptr).collect();
        let mut rules = self.rules.write().unwrap_or_else(|e| e.into_inner());
        let gone: Vec<(String, Arc<RuleStats>)> = rules
            .extract_if(|_, s| !live.contains(&Arc::as_ptr(s)))
            .collect();
        if rules.capacity() > 2 * rules.len() + 16 {
            rules.shrink_to_fit();
        }
        if gone.is_empty() || !self.hold_retired.load(Relaxed) {
            return;
        }
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        retired.last += 1;
        let n = retired.last;
        retired
            .rules
            .extend(gone.into_iter().map(|(k, s)| (k, (n, s))));
    }

    /// Makes retired rule counters wait for [`Stats::release_flushed`] instead of leaving at
    /// once: a push sink turns this on so that a removed rule's last counts are sent.
    pub fn hold_retired(&self, hold: bool) {
        self.hold_retired.store(hold, Relaxed);
    }

    /// Drops the retired rule counters that the snapshot marked `mark` reported.
    pub fn release_flushed(&self, mark: FlushMark) {
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        retired.rules.retain(|_, (n, _)| *n > mark.0);
        if retired.rules.capacity() > 2 * retired.rules.len() + 16 {
            retired.rules.shrink_to_fit();
        }
    }

    /// Like [`Stats::rule`] for keys built from request values, within the registry's
    /// bounds: at either bound an arbitrary such stat is evicted to make room (its counts
    /// are lost; the eviction is counted in `ratelimit.service.stats_dropped`). Keys that
    /// are also configured rules resolve to the rule's counters. `None` when the name is
    /// taken by a counter or too long to keep.
    pub fn dynamic_rule(&self, key: &str) -> Option<Arc<RuleStats>> {
        if let Some(s) = self
            .rules
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
        {
            return Some(s.clone());
        }
        match self.dynamic(key, || Dynamic::Rule(Arc::default()))? {
            Dynamic::Rule(r) => Some(r),
            // The name is taken by a counter; there is nothing sensible to add to.
            Dynamic::Counter(_) => None,
        }
    }

    /// The dynamic stat named `key`, created (evicting others at the bounds) when missing.
    fn dynamic(&self, key: &str, make: impl FnOnce() -> Dynamic) -> Option<Dynamic> {
        if let Some(d) = self
            .dynamic
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
        {
            return Some(d.clone());
        }
        let mut map = self.dynamic.write().unwrap_or_else(|e| e.into_inner());
        let (d, dropped) = map.get_or_insert(key, make);
        if dropped.0 > 0 {
            self.dropped.fetch_add(dropped.0, Relaxed);
        }
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

    /// Adds `n` to a counter whose name comes from request values, within the bounds.
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
        if let Some(Dynamic::Counter(c)) = self.dynamic(name, || Dynamic::Counter(Arc::default())) {
            c.fetch_add(n, Relaxed);
        }
    }

    /// Number of stats created from request values held now.
    pub fn dynamic_entries(&self) -> u64 {
        self.dynamic_entries.load(Relaxed)
    }

    /// Bytes charged to the stats created from request values held now.
    pub fn dynamic_bytes(&self) -> usize {
        self.dynamic
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .bytes()
    }

    /// Every statistic with its full name and current value, sorted by name; retired rules
    /// still waiting for their final flush included.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.snapshot_for_flush().0
    }

    /// [`Stats::snapshot`], and the mark to pass to [`Stats::release_flushed`] once the
    /// values are sent.
    pub fn snapshot_for_flush(&self) -> (BTreeMap<String, u64>, FlushMark) {
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
        // Read after the live rules: a rule retired meanwhile is in one of the two reads.
        let mark = {
            let retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
            for (k, (_, s)) in &retired.rules {
                rule_fields(&mut out, k, s);
            }
            FlushMark(retired.last)
        };
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
        (out, mark)
    }
}

#[cfg(test)]
mod tests;
