//! The plan step: match every descriptor, apply `replaces`, and build the keys and hits of
//! the counters the request touches, into buffers a thread reuses from request to request.

use std::collections::HashSet;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use smallvec::SmallVec;

use super::Limiter;
use super::keys::override_stats_key;
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::clock::Now;
use crate::decide::LimitSpec;
use crate::rules::{Limit, Rule, RuleSet};
use crate::stats::{RULE_PREFIX, RuleStats, sanitize_stat_name};
use crate::store::{CounterStore, Increment};
use crate::types::{Code, Descriptor, DescriptorStatus, Request, Response};

/// Descriptors per request kept inline before spilling to the heap.
pub(super) const INLINE: usize = 4;

/// Most increments kept for reuse per thread, and the largest key worth keeping.
const SPARE_KEYS: usize = 64;
const SPARE_KEY_BYTES: usize = 1024;

/// Buffers reused by the requests decided on one thread, so that a steady-state decision
/// allocates neither the rule-lookup scratch nor its cache keys. The plan's increments
/// live here, not in the [`Plan`]: their key strings are overwritten in place by the next
/// request.
pub struct Work {
    scratch: String,
    /// The increments of the request in progress (its plan says how many), and beyond
    /// them those of earlier requests.
    batch: Vec<Increment>,
    /// The last window start written into a key, and its digits: windows change once a
    /// unit, so formatting the number again each request is wasted work.
    window: (u64, String),
    /// A key grew past [`SPARE_KEY_BYTES`]: the next trim has increments to drop.
    oversized: bool,
    /// Statistics looked up for the request in progress (see [`StatsRef::LookedUp`]).
    looked_up: Vec<Arc<RuleStats>>,
    /// Per increment of the request in progress: known over its limit by the local
    /// cache, so not counted. Filled only with a local cache.
    cached: Vec<bool>,
}

impl Work {
    /// No window yet: `u64::MAX` is no window's start, so the first key formats its own.
    pub const NEW: Work = Work {
        scratch: String::new(),
        batch: Vec::new(),
        window: (u64::MAX, String::new()),
        oversized: false,
        looked_up: Vec::new(),
        cached: Vec::new(),
    };

    /// The increments `plan` asks the store for, in slot order.
    #[inline]
    pub fn increments(&self, plan: &Plan<'_>) -> &[Increment] {
        &self.batch[..plan.increments]
    }

    /// The statistics a target adds to.
    #[inline]
    pub fn stats<'a>(&'a self, s: StatsRef<'a>) -> Option<&'a RuleStats> {
        match s {
            StatsRef::Rule(r) => Some(r),
            StatsRef::LookedUp(i) => self.looked_up.get(i).map(|a| &**a),
        }
    }

    /// Which increments of `plan` the local cache answered.
    #[inline]
    pub fn cached(&self, plan: &Plan<'_>) -> Cached<'_> {
        Cached {
            any: plan.any_cached,
            flags: &self.cached,
        }
    }

    /// The increments of `plan`, to count, and which of them the local cache answered.
    #[inline]
    pub(super) fn for_count(&mut self, plan: &Plan<'_>) -> (&mut [Increment], Cached<'_>) {
        let cached = Cached {
            any: plan.any_cached,
            flags: &self.cached,
        };
        (&mut self.batch[..plan.increments], cached)
    }

    /// Bounds what a thread keeps: a burst of huge requests must not pin its memory.
    /// (The statistics a request looked up are let go by the next plan.)
    #[inline(always)] // two tests per request; the work is in the cold part
    pub(super) fn trim(&mut self) {
        if self.batch.len() > SPARE_KEYS || self.oversized {
            self.trim_slow();
        }
    }

    #[cold]
    fn trim_slow(&mut self) {
        self.batch.truncate(SPARE_KEYS);
        if self.oversized {
            self.batch.retain(|i| i.key.capacity() <= SPARE_KEY_BYTES);
            self.oversized = false;
        }
    }
}

/// Which increments of a plan the local cache already knows to be over their limit, so
/// that they are not counted.
#[derive(Clone, Copy)]
pub struct Cached<'a> {
    any: bool,
    flags: &'a [bool],
}

impl Cached<'_> {
    /// Whether the increment at `slot` was answered by the local cache.
    #[inline]
    pub fn get(self, slot: usize) -> bool {
        self.any && self.flags.get(slot).copied().unwrap_or(false)
    }
}

impl Default for Work {
    fn default() -> Self {
        Work::NEW
    }
}

/// The counters one request touches, one [`Target`] per descriptor. Filled in place by
/// [`Limiter::plan`]: with the inline buffers it is several hundred bytes, and moving it
/// around costs more than the allocations the buffers save.
pub struct Plan<'r> {
    /// The first descriptor's target, held apart: most requests have no other, and then
    /// the plan is a single target with no vector to fill, walk and drop.
    pub(super) first: Target<'r>,
    /// The targets of the other descriptors, in order. Dropped by hand (see the `Drop`
    /// impl): the vector's drop glue is a call even when it holds nothing.
    pub(super) rest: ManuallyDrop<SmallVec<[Target<'r>; INLINE - 1]>>,
    /// How many of the [`Work`]'s increments are this request's.
    pub(super) increments: usize,
    /// Whether the local cache knows any of the increments to be over ([`Work::is_cached`]).
    pub(super) any_cached: bool,
}

impl Drop for Plan<'_> {
    #[inline(always)] // one test for the usual plan
    fn drop(&mut self) {
        // Targets own nothing: only a vector on the heap has anything to free.
        if self.rest.spilled() {
            drop(std::mem::take(&mut *self.rest));
        }
    }
}

impl Default for Plan<'_> {
    #[inline]
    fn default() -> Self {
        Plan {
            first: Target::NoLimit,
            rest: ManuallyDrop::new(SmallVec::new()),
            increments: 0,
            any_cached: false,
        }
    }
}

impl<'r> Plan<'r> {
    /// One target per descriptor of the request, in order (once [`Limiter::plan`] has
    /// answered [`Planned::Counted`]).
    #[inline]
    pub fn targets(&self) -> impl Iterator<Item = &Target<'r>> + Clone {
        std::iter::once(&self.first).chain(self.rest.iter())
    }

    /// How many targets the plan holds.
    #[inline]
    pub fn target_count(&self) -> usize {
        1 + self.rest.len()
    }
}

/// What the plan step found for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planned {
    /// The plan holds a target per descriptor: count, then finish.
    Counted,
    /// The domain has no rules: every descriptor is OK and nothing is counted.
    UnknownDomain,
}

/// The statistics a counted target adds to: a rule's own are borrowed from the rules;
/// per-value ones (and those of request overrides) are looked up per request and held by
/// the [`Work`], so that a target owns nothing and needs no drop.
#[derive(Clone, Copy)]
pub enum StatsRef<'a> {
    /// The rule's own statistics.
    Rule(&'a Arc<RuleStats>),
    /// The statistics looked up for this request at this index ([`Work::stats`]).
    LookedUp(usize),
}

/// What one descriptor resolved to before the store is asked.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    /// No rule matched (or it was replaced): OK, not counted.
    NoLimit,
    /// The rule is `unlimited`: OK, not counted.
    Unlimited,
    /// Counted against a limit, in the increment at `slot` (and against the rule's other
    /// limits, if any, in the slots after it).
    Counted {
        /// The (first) limit decided against.
        spec: LimitSpec<'a>,
        /// The rule's other limits, in file order: usually none.
        more: &'a [Limit],
        /// The rule, `None` for a request's own limit override.
        rule: Option<&'a Arc<Rule>>,
        /// Hits this request adds.
        hits: u64,
        /// Where the statistics of this limit are counted, if anywhere.
        stats: Option<StatsRef<'a>>,
        /// Index of the increment in [`Work::increments`].
        slot: usize,
    },
}

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
