//! The plan step: match every descriptor, apply `replaces`, and build the keys and hits of
//! the counters the request touches, into buffers a thread reuses from request to request.

use std::collections::HashSet;
use std::sync::Arc;

use smallvec::SmallVec;

use super::Limiter;
use super::keys::override_stats_key;
use super::planned::{INLINE, Plan, Planned, SPARE_KEY_BYTES, StatsRef, Target, Work};
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::clock::Now;
use crate::decide::LimitSpec;
use crate::rules::{Limit, Rule, RuleSet};
use crate::stats::{RULE_PREFIX, RuleStats, sanitize_stat_name};
use crate::store::{CounterStore, Increment};
use crate::types::{Code, Descriptor, DescriptorStatus, Request, Response};

impl<S: CounterStore, C: Clock> Limiter<S, C> {
    /// The plan step: matches every descriptor (applying `replaces`) and builds the
    /// increments into `work` and the targets into `plan`, which must be empty. Asks no
    /// store; a request with one descriptor is the common case and skips the cross-
    /// descriptor look of `replaces`.
    #[inline(always)] // the single-descriptor case is the hot path of every entry point
    pub fn plan<'r>(
        &self,
        req: &Request,
        rules: &'r RuleSet,
        now: Now,
        work: &mut Work,
        plan: &mut Plan<'r>,
    ) -> Planned {
        let Some(domain_rules) = rules.domain(&req.domain) else {
            return Planned::UnknownDomain;
        };
        let Work {
            scratch,
            batch,
            window,
            oversized,
            looked_up,
            cached,
        } = work;
        if !looked_up.is_empty() {
            looked_up.clear();
        }
        let Plan {
            first,
            rest,
            increments,
            any_cached,
        } = plan;
        if let [d] = req.descriptors.as_slice() {
            // `replaces` needs no look here: only another descriptor's rule could replace
            // this one, since the loader rejects a rule replacing its own name (as
            // upstream does).
            let m = if d.limit.is_some() {
                None
            } else {
                domain_rules.find(&d.entries, scratch)
            };
            self.target(
                req,
                d,
                m,
                now,
                (batch, increments),
                window,
                looked_up,
                first,
            );
        } else {
            // Resolve every descriptor to a rule (or override) first: `replaces` looks
            // across all of them before anything is counted.
            let mut matched: SmallVec<[Option<&Arc<Rule>>; INLINE]> =
                SmallVec::with_capacity(req.descriptors.len());
            let mut any_replaces = false;
            for d in &req.descriptors {
                let m = if d.limit.is_some() {
                    None
                } else {
                    let r = domain_rules.find(&d.entries, scratch);
                    any_replaces |= r.is_some_and(|r| !r.replaces.is_empty());
                    r
                };
                matched.push(m);
            }
            if any_replaces {
                apply_replaces(&mut matched);
            }
            for (i, (d, m)) in req.descriptors.iter().zip(&matched).enumerate() {
                let mut t = Target::NoLimit;
                self.target(
                    req,
                    d,
                    *m,
                    now,
                    (batch, increments),
                    window,
                    looked_up,
                    &mut t,
                );
                if i == 0 {
                    *first = t;
                } else {
                    rest.push(t);
                }
            }
        }
        let planned = &batch[..*increments];
        *oversized |= planned.iter().any(|i| i.key.capacity() > SPARE_KEY_BYTES);
        // Keys known to be over their limit this window are answered locally.
        if let Some(lc) = &self.local_cache {
            cached.clear();
            cached.extend(planned.iter().map(|b| lc.contains(&b.key, now.secs)));
            *any_cached = cached.iter().any(|c| *c);
            if *any_cached {
                spread_cached(planned, cached);
            }
        }
        Planned::Counted
    }

    /// The answer for a domain without rules: OK for every descriptor, and counted.
    #[cold]
    pub(super) fn unknown_domain(&self, req: &Request) -> Response {
        let name = format!(
            "{RULE_PREFIX}{}.domain_not_found",
            sanitize_stat_name(&req.domain)
        );
        self.stats
            .dynamic_counter_add(&name, req.descriptors.len() as u64);
        Response {
            overall_code: Code::Ok,
            statuses: std::iter::repeat_n(
                DescriptorStatus {
                    code: Code::Ok,
                    ..DescriptorStatus::default()
                },
                req.descriptors.len(),
            )
            .collect(),
            ..Response::default()
        }
    }

    /// What one descriptor resolves to, given the rule it matched (`None`: no rule, or
    /// replaced); a counted one has its increment appended to the batch.
    #[inline(always)] // two call sites; the single-descriptor one is the hot path
    #[allow(clippy::too_many_arguments)] // the plan's parts, borrowed apart
    fn target<'r>(
        &self,
        req: &Request,
        d: &Descriptor,
        m: Option<&'r Arc<Rule>>,
        now: Now,
        (batch, increments): (&mut Vec<Increment>, &mut usize),
        window_text: &mut (u64, String),
        looked_up: &mut Vec<Arc<RuleStats>>,
        out: &mut Target<'r>,
    ) {
        let mut look_up = |key: &str| {
            self.stats.dynamic_rule(key).map(|s| {
                looked_up.push(s);
                StatsRef::LookedUp(looked_up.len() - 1)
            })
        };
        let hits = req.hits_for(d);
        if let Some(o) = d.limit {
            let limit = Limit::fixed(o.requests_per_unit, o.unit);
            let slot = self.push_increment(
                (batch, increments),
                window_text,
                None,
                &req.domain,
                d,
                &limit,
                (hits, false),
                now,
            );
            *out = Target::Counted {
                stats: look_up(&override_stats_key(&req.domain, d)),
                spec: LimitSpec {
                    requests_per_unit: o.requests_per_unit,
                    unit: o.unit,
                    name: "",
                    shadow_mode: false,
                    algorithm: Algorithm::FixedWindow {
                        seconds: o.unit.seconds(),
                    },
                },
                more: &[],
                rule: None,
                hits,
                slot,
            };
            return;
        }
        *out = match m {
            None => Target::NoLimit,
            Some(r) => match &r.limits[..] {
                [] => Target::Unlimited,
                [first, more @ ..] => {
                    let slot = self.push_increment(
                        (batch, increments),
                        window_text,
                        Some(r),
                        &req.domain,
                        d,
                        first,
                        (hits, false),
                        now,
                    );
                    if !more.is_empty() {
                        self.push_more(
                            (batch, increments),
                            window_text,
                            r,
                            &req.domain,
                            d,
                            hits,
                            now,
                        );
                    }
                    let stats = match r.stats_key(&req.domain, &d.entries) {
                        None => Some(StatsRef::Rule(&r.stats)),
                        Some(k) => look_up(&k),
                    };
                    Target::Counted {
                        spec: first.spec(r.shadow_mode),
                        more,
                        rule: Some(r),
                        hits,
                        stats,
                        slot,
                    }
                }
            },
        };
    }

    /// The increments of a rule's limits after its first.
    #[cold]
    #[allow(clippy::too_many_arguments)] // as `target`
    fn push_more(
        &self,
        (batch, increments): (&mut Vec<Increment>, &mut usize),
        window_text: &mut (u64, String),
        r: &Arc<Rule>,
        domain: &str,
        d: &Descriptor,
        hits: u64,
        now: Now,
    ) {
        for l in &r.limits[1..] {
            self.push_increment(
                (batch, increments),
                window_text,
                Some(r),
                domain,
                d,
                l,
                (hits, l.joint),
                now,
            );
        }
    }
}

/// Within a group of joint increments, a key the local cache knows to be over makes the
/// group over: its sliding-window and token-bucket increments must take nothing, so they
/// are answered as cached too. Fixed windows still count, as upstream's do.
#[cold]
fn spread_cached(batch: &[Increment], cached: &mut [bool]) {
    for g in crate::store::groups(batch) {
        if g.len() > 1 && cached[g.clone()].iter().any(|c| *c) {
            for i in g {
                cached[i] |= !batch[i].always_counts();
            }
        }
    }
}

/// Drops the matches whose rule another matched rule `replaces`.
#[cold]
fn apply_replaces(matched: &mut [Option<&Arc<Rule>>]) {
    let replaced: HashSet<&str> = matched
        .iter()
        .flatten()
        .flat_map(|r| r.replaces.iter().map(String::as_str))
        .collect();
    for m in matched {
        if m.is_some_and(|r| !r.name.is_empty() && replaced.contains(r.name.as_str())) {
            *m = None;
        }
    }
}
