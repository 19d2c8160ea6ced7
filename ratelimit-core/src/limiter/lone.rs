//! The synchronous path's lane for a lone descriptor: a request of one descriptor whose
//! rule has at most one limit, which is almost every request a proxy sends. It runs the
//! plan, count and finish steps' own pieces (`push_increment`, the store's
//! `increment_now`, `decide_reading`, the rule's statistics) without the per-target
//! bookkeeping that requests of several descriptors need: no [`super::Plan`], no targets,
//! no tally. That bookkeeping was a sixth of the instructions of such a decision
//! (docs/benchmarks.md).
//!
//! Whatever the lane does not take goes the general way: a request override, a rule of
//! several limits or in quota mode or with per-value statistics, an unknown domain, and
//! limiters with a local cache, response headers, dynamic metadata or global quota mode.
//! `tests::the_lone_lane_answers_as_the_general_path` holds the two to the same answers,
//! counters and statistics.

use super::planned::{SPARE_KEY_BYTES, Work};
use super::{Error, Limiter};
use crate::clock::{Clock, Now};
use crate::decide::{Reading, decide_reading};
use crate::rules::RuleSet;
use crate::store::CounterStore;
use crate::types::{Code, DescriptorStatus, Request, Response};

impl<S: CounterStore, C: Clock> Limiter<S, C> {
    /// Decides `req` if it is a lone descriptor's request under settings the lane serves;
    /// `None` leaves it to the general path, with nothing counted.
    #[inline(always)] // the hot path of the synchronous entry points
    pub(super) fn decide_lone(
        &self,
        req: &Request,
        rules: &RuleSet,
        now: Now,
        work: &mut Work,
        resp: &mut Response,
    ) -> Option<Result<(), Error>> {
        let [d] = req.descriptors.as_slice() else {
            return None;
        };
        if !self.lone_lane || d.limit.is_some() {
            return None;
        }
        let rule = match rules
            .domain(&req.domain)?
            .find(&d.entries, &mut work.scratch)
        {
            None => return lone_answer(resp, no_limit(0), Code::Ok),
            Some(r) => r,
        };
        let limit = match &rule.limits[..] {
            [] => return lone_answer(resp, no_limit(u32::MAX), Code::Ok),
            [limit] if !rule.quota_mode && !rule.has_dynamic_stats() => limit,
            _ => return None,
        };
        // What the plan step would let go: statistics an earlier request looked up.
        if !work.looked_up.is_empty() {
            work.looked_up.clear();
        }
        let hits = req.hits_for(d);
        let mut used = 0;
        self.push_increment(
            (&mut work.batch, &mut used),
            &mut work.window,
            Some(rule),
            &req.domain,
            d,
            limit,
            (hits, false),
            now,
        );
        let mut count = [0];
        let counted = self
            .store
            .increment_now(now.secs, &work.batch[..1], &mut count);
        // Only a key's text can outgrow the spare room: the lane uses one slot of a batch
        // the general path trims after itself.
        if self.key_text {
            work.oversized |= work.batch[0].key.capacity() > SPARE_KEY_BYTES;
            work.trim();
        }
        if let Err(e) = counted {
            return Some(Err(e.into()));
        }
        let spec = limit.spec(rule.shadow_mode);
        let reading = Reading::of(&spec, count[0], hits, now, false);
        let near_ratio = self.settings.near_limit_ratio;
        let (status, delta) = decide_reading(&spec, reading, hits, near_ratio, false);
        rule.stats.add(&delta);
        let overall = self.overall_of(status.code == Code::OverLimit);
        lone_answer(resp, status, overall)
    }
}

/// The status of a descriptor that nothing counts: no rule (`remaining` 0), or an
/// unlimited one (`u32::MAX`).
#[inline(always)]
fn no_limit(remaining: u32) -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok,
        limit_remaining: remaining,
        ..DescriptorStatus::default()
    }
}

/// Writes a lone descriptor's answer over `resp`, which may hold an earlier one: decided.
#[inline(always)]
fn lone_answer(
    resp: &mut Response,
    status: DescriptorStatus,
    overall: Code,
) -> Option<Result<(), Error>> {
    match &mut resp.statuses[..] {
        [only] => *only = status,
        _ => {
            // A new response (the by-value entry points') has nothing to clear.
            if !resp.statuses.is_empty() {
                resp.statuses.clear();
            }
            resp.statuses.push(status);
        }
    }
    resp.overall_code = overall;
    // The lane serves no limiter that adds either.
    if !resp.response_headers_to_add.is_empty() {
        resp.response_headers_to_add.clear();
    }
    if resp.dynamic_metadata.is_some() {
        resp.dynamic_metadata = None;
    }
    Some(Ok(()))
}

#[cfg(test)]
mod tests;
