//! The count step: the store call of a decision, between the plan and the finish.
//!
//! Each counted limit is an [`Increment`] whose [`crate::store::Op`] says how its algorithm
//! counts (INCRBY and EXPIRE for a fixed window; a sliding window's or a token bucket's
//! check-and-update), sent for the whole request in one [`CounterStore::increment`]
//! round trip. Each store implements each operation as one atomic step of that trip.

use std::future::Future;
use std::pin::Pin;

use super::Limiter;
use super::planned::{Cached, INLINE, Plan, Target};
use crate::clock::Clock;
use crate::store::{CounterStore, Increment, StoreError, StoreKind, groups};

/// The store's answer to the count step.
pub(super) enum Counting<'a> {
    /// Answered during the call: an in-process store, or nothing to count.
    Done(Result<(), StoreError>),
    /// A remote store's round trip (two with `stop_increment_when_over_limit`, which
    /// reads first), to be awaited.
    Pending(Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + 'a>>),
}

/// The counts of one request, inline for the usual handful of increments. The vector
/// for more is an `Option` so that the usual case sets one word for it, not three.
pub(super) struct Counts {
    inline: [u64; INLINE],
    spilled: Option<Vec<u64>>,
}

impl Counts {
    #[inline(always)]
    pub(super) fn new() -> Self {
        Counts {
            inline: [0; INLINE],
            spilled: None,
        }
    }

    /// `n` zeroed counts.
    #[inline(always)]
    pub(super) fn slots(&mut self, n: usize) -> &mut [u64] {
        match self.inline.get_mut(..n) {
            Some(c) => c,
            None => self.spilled.insert(vec![0; n]),
        }
    }
}

impl<S: CounterStore, C: Clock> Limiter<S, C> {
    /// Whether the count step can answer without awaiting: the store counts in process
    /// and no setting needs a second store call (reading before counting, refunds).
    #[inline(always)]
    pub(super) fn counts_now(&self) -> bool {
        matches!(self.store.kind(), StoreKind::InProcess { .. })
            && !self.settings.stop_increment_when_over_limit
            && !self.settings.refund_hits_when_over_limit
    }

    /// The count step: asks the store for the counters of `plan`, writing the value after
    /// this request's hits into `counts` (one per increment of `batch`). Slots the local
    /// cache answered are left at 0 and not sent.
    #[inline(always)] // the in-process case reduces to one call of the store
    pub(super) fn count<'a>(
        &'a self,
        now: u64,
        plan: &'a Plan<'_>,
        (batch, cached): (&'a mut [Increment], Cached<'a>),
        counts: &'a mut [u64],
    ) -> Counting<'a> {
        let stop = self.settings.stop_increment_when_over_limit;
        if matches!(self.store.kind(), StoreKind::InProcess { .. }) && !stop {
            return Counting::Done(self.count_now(now, plan, batch, cached, counts));
        }
        if batch.is_empty() {
            return Counting::Done(Ok(()));
        }
        if !stop && !plan.any_cached {
            return Counting::Pending(self.store.increment(now, batch, counts));
        }
        Counting::Pending(Box::pin(
            self.count_with_reads(now, plan, batch, cached, counts),
        ))
    }

    /// The count step of a store that counts in process, without
    /// `stop_increment_when_over_limit`: the store answers during the call. The
    /// synchronous entry points call it directly ([`Limiter::counts_now`] checked that).
    #[inline(always)] // the usual case is one call of the store
    pub(super) fn count_now(
        &self,
        now: u64,
        plan: &Plan<'_>,
        batch: &[Increment],
        cached: Cached<'_>,
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        if !plan.any_cached {
            // No test for an empty batch (nothing to count): it costs a store without I/O
            // nothing, and the common request has one increment.
            return self.store.increment_now(now, batch, counts);
        }
        // Keys already known over (rare): count the others, a group at a time (the plan
        // marked every increment of a group that could take hits as cached when any of
        // its keys is, so what is left of such a group only ever counts).
        for g in groups(batch) {
            if g.clone().all(|i| !cached.get(i)) {
                self.store
                    .increment_now(now, &batch[g.clone()], &mut counts[g])?;
                continue;
            }
            for i in g.filter(|i| !cached.get(*i)) {
                self.store.increment_now(
                    now,
                    std::slice::from_ref(&batch[i]),
                    std::slice::from_mut(&mut counts[i]),
                )?;
            }
        }
        Ok(())
    }

    /// The count step of the settings and cases that need more than one plain batch:
    /// `stop_increment_when_over_limit`, and keys answered by the local cache on a remote
    /// store (the others are sent as one batch).
    async fn count_with_reads(
        &self,
        now: u64,
        plan: &Plan<'_>,
        batch: &mut [Increment],
        cached: Cached<'_>,
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        if self.settings.stop_increment_when_over_limit {
            self.stop_increments(now, plan, batch, cached).await?;
        }
        if !plan.any_cached {
            return self.store.increment(now, batch, counts).await;
        }
        let mut live: Vec<Increment> = Vec::with_capacity(batch.len());
        for g in groups(batch) {
            // A group with a cached key has only increments that always count left:
            // sent alone, so that none joins the group before it.
            let whole = g.clone().all(|i| !cached.get(i));
            for i in g.filter(|i| !cached.get(*i)) {
                let mut b = batch[i].clone();
                b.joint &= whole;
                live.push(b);
            }
        }
        if live.is_empty() {
            return Ok(());
        }
        let mut live_counts = vec![0u64; live.len()];
        self.store.increment(now, &live, &mut live_counts).await?;
        let mut it = live_counts.into_iter();
        for (i, c) in counts.iter_mut().enumerate() {
            if !cached.get(i) {
                *c = it.next().unwrap_or(0);
            }
        }
        Ok(())
    }

    /// Upstream's `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`: when a key is already known to
    /// be over, nothing else is counted; otherwise the counters are read first and, if any
    /// would go over, only those are incremented.
    async fn stop_increments(
        &self,
        now: u64,
        plan: &Plan<'_>,
        batch: &mut [Increment],
        cached: Cached<'_>,
    ) -> Result<(), StoreError> {
        // Only fixed windows count hits over their limit; the other algorithms already
        // take nothing from a denied request.
        if plan.any_cached {
            for (i, b) in batch.iter_mut().enumerate() {
                if !cached.get(i) && b.always_counts() {
                    b.hits = 0;
                }
            }
            return Ok(());
        }
        let mut current = vec![0u64; batch.len()];
        self.store.get(now, batch, &mut current).await?;
        let mut limits = vec![0u64; batch.len()];
        for t in plan.targets() {
            if let Target::Counted {
                spec, slot, more, ..
            } = t
            {
                limits[*slot] = u64::from(spec.requests_per_unit);
                for (i, l) in more.iter().enumerate() {
                    limits[slot + 1 + i] = u64::from(l.requests_per_unit);
                }
            }
        }
        let near: Vec<bool> = batch
            .iter()
            .zip(&current)
            .zip(&limits)
            .map(|((b, cur), lim)| b.always_counts() && cur.saturating_add(b.hits) > *lim)
            .collect();
        if near.iter().any(|x| *x) {
            for (b, is_near) in batch.iter_mut().zip(&near) {
                if !is_near && b.always_counts() {
                    b.hits = 0;
                }
            }
        }
        Ok(())
    }

    /// `refund_hits_when_over_limit`: a request answered OVER_LIMIT gives back the hits it
    /// added to fixed windows. The decision stands even if the refund fails: it only
    /// affects later requests, and the counters expire with their window. (Sliding
    /// windows and token buckets take nothing from a request their own limit denies; what
    /// they took for a request another descriptor denied stays taken.)
    pub(super) async fn refund(&self, now: u64, batch: &[Increment], cached: Cached<'_>) {
        let added: Vec<Increment> = batch
            .iter()
            .enumerate()
            .filter(|(i, b)| !cached.get(*i) && b.hits > 0 && b.always_counts())
            .map(|(_, b)| b.clone())
            .collect();
        if !added.is_empty() {
            let _ = self.store.refund(now, &added).await;
        }
    }
}
