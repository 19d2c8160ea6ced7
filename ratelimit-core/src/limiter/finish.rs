//! The finish step: from the counts to the response. Each counted target is decided by
//! [`crate::decide::decide`] (pure arithmetic); around it this step updates statistics and
//! the local cache, picks the overall code (quota and shadow modes), and adds the
//! optional headers and dynamic metadata.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use super::planned::{Plan, StatsRef, Target, Work};
use super::{HeaderNames, Limiter};
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::clock::Now;
use crate::decide::{LimitSpec, Reading, decide, decide_reading};
use crate::local_cache::LocalCache;
use crate::rules::{Limit, Rule};
use crate::stats::StatDelta;
use crate::store::CounterStore;
use crate::types::{Code, DescriptorStatus, Header, Request, Response};

/// What the overall code depends on, gathered descriptor by descriptor.
#[derive(Default)]
struct Tally {
    any_over: bool,
    quota_total: usize,
    quota_over: usize,
}

impl<S: CounterStore, C: Clock> Limiter<S, C> {
    /// The finish step: turns the counts (`counts[slot]`, the counter after this request's
    /// hits, for each of [`Work::increments`]) into `resp`, whose previous contents are replaced, and
    /// counts the statistics. Asks no store.
    #[inline(always)] // fills the caller's response in place
    pub fn finish(
        &self,
        req: &Request,
        plan: &Plan<'_>,
        work: &Work,
        counts: &[u64],
        now: Now,
        resp: &mut Response,
    ) {
        let mut tally = Tally::default();
        if plan.rest.is_empty() {
            let status = self.status_for(&plan.first, plan, work, counts, now, &mut tally);
            // A new response holds no status, one reused for the next decision holds one:
            // neither needs `SmallVec::truncate`, a generic whose inlining hangs on how
            // the calling crate is split into codegen units.
            match &mut resp.statuses[..] {
                [] => resp.statuses.push(status),
                [only] => *only = status,
                _ => {
                    resp.statuses.clear();
                    resp.statuses.push(status);
                }
            }
        } else {
            resp.statuses.clear();
            resp.statuses.reserve(plan.target_count());
            for t in plan.targets() {
                let status = self.status_for(t, plan, work, counts, now, &mut tally);
                resp.statuses.push(status);
            }
        }
        resp.overall_code = self.overall_code(&tally);
        self.decorate(req, resp, plan, now);
    }

    /// The optional parts of a response: `RateLimit-*` headers and dynamic metadata
    /// (emptied when off, as the response may be a reused one).
    #[inline(always)] // with both off (the default) this is two tests of empty fields
    fn decorate(&self, req: &Request, resp: &mut Response, plan: &Plan<'_>, now: Now) {
        if !resp.response_headers_to_add.is_empty() {
            resp.response_headers_to_add.clear();
        }
        if let Some(names) = &self.settings.response_headers {
            add_headers(resp, plan, names, self.settings.quota_mode, now);
        }
        if self.settings.dynamic_metadata {
            resp.dynamic_metadata = Some(Box::new(dynamic_metadata(req, plan, &resp.statuses)));
        } else if resp.dynamic_metadata.is_some() {
            resp.dynamic_metadata = None;
        }
    }

    /// One descriptor's status from its counter, with its statistics and the local cache
    /// updated; `tally` collects what the overall code needs.
    #[inline(always)] // the status is built in the caller's frame: no copy out
    fn status_for<'r>(
        &self,
        t: &Target<'r>,
        plan: &Plan<'r>,
        work: &Work,
        counts: &[u64],
        now: Now,
        tally: &mut Tally,
    ) -> DescriptorStatus {
        let Target::Counted {
            spec,
            more,
            rule,
            hits,
            stats,
            slot,
        } = t
        else {
            // Upstream counts a descriptor without a limit (no rule, or its rule replaced)
            // as a quota descriptor under the global quota mode, one that passed; an
            // unlimited one not at all.
            if matches!(t, Target::NoLimit) && self.settings.quota_mode {
                tally.quota_total += 1;
            }
            return DescriptorStatus {
                code: Code::Ok,
                limit_remaining: if matches!(t, Target::Unlimited) {
                    u32::MAX
                } else {
                    0
                },
                ..DescriptorStatus::default()
            };
        };
        if !more.is_empty() {
            // Several limits: out of the way of every upstream rule's path.
            let (status, delta) =
                self.decide_limits(spec, more, *slot, *hits, plan, work, counts, now);
            return self.account(status, &delta, *stats, *rule, work, tally);
        }
        let from_cache = work.cached(plan).get(*slot);
        let answer = counts[*slot];
        let reading = match spec.algorithm {
            Algorithm::FixedWindow { seconds } | Algorithm::SlidingWindow { seconds } => {
                Reading::window(spec, seconds, answer, now)
            }
            Algorithm::TokenBucket(b) => Reading::bucket(&b, answer, *hits, now, from_cache),
        };
        let (status, delta): (DescriptorStatus, StatDelta) = decide_reading(
            spec,
            reading,
            *hits,
            self.settings.near_limit_ratio,
            from_cache,
        );
        if let Some(lc) = &self.local_cache
            && !from_cache
        {
            self.cache_if_over(lc, spec, *slot, *hits, plan, work, counts, now);
        }
        self.account(status, &delta, *stats, *rule, work, tally)
    }

    /// Adds a descriptor's statistics and its part of the overall code; hands its status on.
    #[inline(always)] // the status passes through the caller's frame
    fn account(
        &self,
        status: DescriptorStatus,
        delta: &StatDelta,
        stats: Option<StatsRef<'_>>,
        rule: Option<&Arc<Rule>>,
        work: &Work,
        tally: &mut Tally,
    ) -> DescriptorStatus {
        if let Some(s) = stats.and_then(|s| work.stats(s)) {
            s.add(delta);
        }
        let over = status.code == Code::OverLimit;
        if self.settings.quota_mode || rule.is_some_and(|r| r.quota_mode) {
            tally.quota_total += 1;
            tally.quota_over += usize::from(over);
        } else {
            tally.any_over |= over;
        }
        status
    }

    /// Whether a limit's answer is over it (shadow mode aside).
    fn is_over(spec: &LimitSpec<'_>, answer: u64, hits: u64, now: Now) -> bool {
        match spec.algorithm {
            Algorithm::FixedWindow { .. } | Algorithm::SlidingWindow { .. } => {
                answer > u64::from(spec.requests_per_unit)
            }
            Algorithm::TokenBucket(b) => !b.take(answer, now.micros, hits).admitted,
        }
    }

    /// Tells the local cache about the limit at `slot` if its answer is over it.
    #[cold]
    #[allow(clippy::too_many_arguments)] // the parts of the finish step
    fn cache_if_over(
        &self,
        lc: &LocalCache,
        spec: &LimitSpec<'_>,
        slot: usize,
        hits: u64,
        plan: &Plan<'_>,
        work: &Work,
        counts: &[u64],
        now: Now,
    ) {
        if Self::is_over(spec, counts[slot], hits, now) {
            self.cache_over(
                lc,
                spec,
                &work.increments(plan)[slot].key,
                counts[slot],
                now,
            );
        }
    }

    /// A rule's limits (one token bucket, or several limits): each decided; the status
    /// reported is the first over its limit in file order, else the one with the fewest
    /// hits remaining.
    #[cold]
    #[allow(clippy::too_many_arguments)] // the parts of the finish step
    fn decide_limits(
        &self,
        first: &LimitSpec<'_>,
        more: &[Limit],
        slot: usize,
        hits: u64,
        plan: &Plan<'_>,
        work: &Work,
        counts: &[u64],
        now: Now,
    ) -> (DescriptorStatus, StatDelta) {
        let shadow = first.shadow_mode;
        let mut chosen: Option<((DescriptorStatus, StatDelta), bool)> = None;
        let specs = std::iter::once(*first).chain(more.iter().map(|l| l.spec(shadow)));
        for (i, spec) in specs.enumerate() {
            let (decided, over) =
                self.decide_one(&spec, (slot + i, true), hits, plan, work, counts, now);
            let better = match &chosen {
                None => true,
                Some((_, true)) => false,
                Some(((s, _), false)) => over || decided.0.limit_remaining < s.limit_remaining,
            };
            if better {
                chosen = Some((decided, over));
            }
        }
        chosen.map(|(d, _)| d).unwrap_or_default()
    }

    /// One limit of any algorithm decided from its slot, the local cache told when it is
    /// over; and whether it is (shadow mode aside).
    #[cold]
    #[allow(clippy::too_many_arguments)] // the parts of the finish step
    fn decide_one(
        &self,
        spec: &LimitSpec<'_>,
        (slot, want_over): (usize, bool),
        hits: u64,
        plan: &Plan<'_>,
        work: &Work,
        counts: &[u64],
        now: Now,
    ) -> ((DescriptorStatus, StatDelta), bool) {
        let from_cache = work.cached(plan).get(slot);
        let decided = decide(
            spec,
            counts[slot],
            hits,
            self.settings.near_limit_ratio,
            now,
            from_cache,
        );
        // Only a rule of several limits and the local cache need to know.
        let over = from_cache
            || ((want_over || self.local_cache.is_some())
                && Self::is_over(spec, counts[slot], hits, now));
        if let Some(lc) = &self.local_cache
            && over
            && !from_cache
        {
            self.cache_over(
                lc,
                spec,
                &work.increments(plan)[slot].key,
                counts[slot],
                now,
            );
        }
        (decided, over)
    }

    /// Tells the local cache that `key` is over its limit, for as long as no request
    /// could pass: the rest of a window (upstream keeps a unit from now; the window
    /// start in the key stops it matching in the next window anyway), or a bucket's wait
    /// for one token. A sliding window is not cached: its estimate falls continuously.
    #[cold]
    fn cache_over(&self, lc: &LocalCache, spec: &LimitSpec<'_>, key: &str, answer: u64, now: Now) {
        let until = match spec.algorithm {
            Algorithm::FixedWindow { seconds } => now.secs + seconds.max(spec.unit.seconds()),
            Algorithm::SlidingWindow { .. } => return,
            Algorithm::TokenBucket(b) => {
                (now.micros + b.wait_us(answer, now.micros, 1)) / 1_000_000
            }
        };
        if until > now.secs {
            lc.insert(key, until, now.secs);
        }
    }

    /// OVER_LIMIT when a non-quota descriptor is over, or every quota one is; OK instead
    /// (and counted) in global shadow mode.
    #[inline]
    fn overall_code(&self, tally: &Tally) -> Code {
        self.overall_of(
            tally.any_over || (tally.quota_total > 0 && tally.quota_over == tally.quota_total),
        )
    }

    /// The overall code of a request that is `over` (OK instead, and counted, in global
    /// shadow mode).
    #[inline]
    pub(super) fn overall_of(&self, over: bool) -> Code {
        if !over {
            return Code::Ok;
        }
        if self.settings.shadow_mode {
            self.stats.global_shadow_mode.fetch_add(1, Relaxed);
            return Code::Ok;
        }
        Code::OverLimit
    }
}

/// `RateLimit-*` headers for the descriptor that binds: the one with the fewest remaining
/// hits, unless a non-quota descriptor is over its limit, in which case the last such one.
fn add_headers(
    resp: &mut Response,
    plan: &Plan<'_>,
    names: &HeaderNames,
    global_quota: bool,
    now: Now,
) {
    let mut chosen: Option<usize> = None;
    let mut forced = false;
    for (i, (s, t)) in resp.statuses.iter().zip(plan.targets()).enumerate() {
        if s.current_limit.is_none() {
            continue;
        }
        let quota =
            global_quota || matches!(t, Target::Counted { rule: Some(r), .. } if r.quota_mode);
        if s.code == Code::OverLimit && !quota {
            chosen = Some(i);
            forced = true;
            continue;
        }
        if forced {
            continue;
        }
        match chosen {
            Some(c) if resp.statuses[c].limit_remaining <= s.limit_remaining => {}
            _ => chosen = Some(i),
        }
    }
    let Some(i) = chosen else { return };
    let s = &resp.statuses[i];
    let Some(limit) = &s.current_limit else {
        return;
    };
    resp.response_headers_to_add = vec![
        Header {
            key: names.limit.clone(),
            value: limit.requests_per_unit.to_string(),
        },
        Header {
            key: names.remaining.clone(),
            value: s.limit_remaining.to_string(),
        },
        Header {
            key: names.reset.clone(),
            value: s
                .duration_until_reset
                .unwrap_or_else(|| limit.unit.until_reset(now.secs))
                .to_string(),
        },
    ];
}

/// The `dynamic_metadata` struct upstream returns (§9 of the behaviour notes).
fn dynamic_metadata(
    req: &Request,
    plan: &Plan<'_>,
    statuses: &[DescriptorStatus],
) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::{Map, Value};
    let mut out = Map::new();
    out.insert("domain".into(), Value::String(req.domain.clone()));
    let descriptors = req
        .descriptors
        .iter()
        .map(|d| {
            let mut m = Map::new();
            m.insert(
                "entries".into(),
                Value::Array(
                    d.entries
                        .iter()
                        .map(|e| Value::String(format!("{}={}", e.key, e.value)))
                        .collect(),
                ),
            );
            if let Some(o) = d.limit {
                m.insert(
                    "limit".into(),
                    Value::String(format!(
                        "requests_per_unit:{} unit:{}",
                        o.requests_per_unit,
                        o.unit.name()
                    )),
                );
            }
            if let Some(h) = d.hits_addend {
                m.insert("hitsAddend".into(), Value::from(h));
            }
            Value::Object(m)
        })
        .collect();
    out.insert("descriptors".into(), Value::Array(descriptors));
    if req.hits_addend != 0 {
        out.insert("hitsAddend".into(), Value::from(req.hits_addend));
    }
    let mut merged = Map::new();
    for (t, s) in plan.targets().zip(statuses) {
        if s.code == Code::OverLimit {
            continue;
        }
        if let Target::Counted { rule: Some(r), .. } = t
            && let Some(md) = &r.metadata
        {
            merge_first_wins(&mut merged, md);
        }
    }
    if !merged.is_empty() {
        out.insert("metadata".into(), Value::Object(merged));
    }
    out
}

fn merge_first_wins(
    into: &mut serde_json::Map<String, serde_json::Value>,
    from: &serde_json::Map<String, serde_json::Value>,
) {
    for (k, v) in from {
        match (into.get_mut(k), v) {
            (None, _) => {
                into.insert(k.clone(), v.clone());
            }
            (Some(serde_json::Value::Object(a)), serde_json::Value::Object(b)) => {
                merge_first_wins(a, b)
            }
            _ => {}
        }
    }
}
