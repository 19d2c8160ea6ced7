//! What the plan step produces: the [`Plan`] of one request (a [`Target`] per
//! descriptor) and the [`Work`] buffers a thread reuses from request to request, where the
//! plan's increments live.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::decide::LimitSpec;
use crate::rules::{Limit, Rule};
use crate::stats::RuleStats;
use crate::store::Increment;

/// Descriptors per request kept inline before spilling to the heap.
pub(super) const INLINE: usize = 4;

/// Most increments kept for reuse per thread, and the largest key worth keeping.
const SPARE_KEYS: usize = 64;
pub(super) const SPARE_KEY_BYTES: usize = 1024;

/// Buffers reused by the requests decided on one thread, so that a steady-state decision
/// allocates neither the rule-lookup scratch nor its cache keys. The plan's increments
/// live here, not in the [`Plan`]: their key strings are overwritten in place by the next
/// request.
pub struct Work {
    pub(super) scratch: String,
    /// The increments of the request in progress (its plan says how many), and beyond
    /// them those of earlier requests.
    pub(super) batch: Vec<Increment>,
    /// The last window start written into a key, and its digits: windows change once a
    /// unit, so formatting the number again each request is wasted work.
    pub(super) window: (u64, String),
    /// A key grew past [`SPARE_KEY_BYTES`]: the next trim has increments to drop.
    pub(super) oversized: bool,
    /// Statistics looked up for the request in progress (see [`StatsRef::LookedUp`]).
    pub(super) looked_up: Vec<Arc<RuleStats>>,
    /// Per increment of the request in progress: known over its limit by the local
    /// cache, so not counted. Filled only with a local cache.
    pub(super) cached: Vec<bool>,
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
/// [`Limiter::plan`](super::Limiter::plan): with the inline buffers it is several hundred bytes, and moving it
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
    /// One target per descriptor of the request, in order (once [`Limiter::plan`](super::Limiter::plan) has
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
