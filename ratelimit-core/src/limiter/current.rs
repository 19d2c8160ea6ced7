//! The rules in force: shared by a limiter and the per-thread copies its synchronous
//! deciders read, so that checking a copy is still current is one load and a compare.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};

use arc_swap::ArcSwapOption;

use crate::rules::RuleSet;

/// A limiter's rules, swapped atomically.
#[derive(Default)]
pub(super) struct SharedRules {
    rules: ArcSwapOption<RuleSet>,
    /// Bumped after every swap. A thread's copy taken at an older generation is stale;
    /// one taken at this generation holds these rules or newer ones.
    generation: AtomicU64,
}

impl SharedRules {
    pub(super) fn store(&self, rules: Arc<RuleSet>) {
        self.rules.store(Some(rules));
        self.generation.fetch_add(1, Release);
    }

    pub(super) fn load_full(&self) -> Option<Arc<RuleSet>> {
        self.rules.load_full()
    }
}

/// One thread's copy of the rules of the limiter it decided for last. It holds those
/// rules alive until this thread decides again (or exits): one rule set per thread at
/// most.
pub(super) struct RulesCache {
    /// Which limiter: limiters are told apart by this allocation.
    source: Arc<SharedRules>,
    generation: u64,
    rules: Option<Arc<RuleSet>>,
}

impl RulesCache {
    /// The rules of `shared`, from the copy in `slot` while it is current.
    #[inline(always)] // a load and two compares on every synchronous decision
    pub(super) fn load<'a>(
        slot: &'a mut Option<RulesCache>,
        shared: &Arc<SharedRules>,
    ) -> Option<&'a RuleSet> {
        let generation = shared.generation.load(Acquire);
        let current =
            matches!(slot, Some(c) if Arc::ptr_eq(&c.source, shared) && c.generation == generation);
        if !current {
            refill(slot, shared, generation);
        }
        slot.as_ref().and_then(|c| c.rules.as_deref())
    }
}

/// Takes a new copy, read after `generation` was.
#[cold]
fn refill(slot: &mut Option<RulesCache>, shared: &Arc<SharedRules>, generation: u64) {
    *slot = Some(RulesCache {
        source: Arc::clone(shared),
        generation,
        rules: shared.load_full(),
    });
}
