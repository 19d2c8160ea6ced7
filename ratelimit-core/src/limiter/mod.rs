//! The embedding facade: rules + store + clock, with rules swapped atomically.
//!
//! Every decision takes one path, whichever entry point it came through: [`Limiter::plan`]
//! (match descriptors, apply `replaces`, build keys and hits; `plan.rs`), the count step
//! (the store call; `count.rs`), and [`Limiter::finish`] (the arithmetic of
//! [`crate::decide::decide`] per limit, then statistics, the local cache, the overall
//! code, headers and metadata; `finish.rs`). The synchronous entry points take it when the
//! store counts in process; the async one takes it too and may await the count. When the
//! store counts in process, a request of one descriptor under one limit runs the same
//! pieces without the per-descriptor bookkeeping (`lone.rs`), held to the same answers by
//! a test.

mod builder;
mod count;
mod current;
mod finish;
mod keys;
mod lone;
mod plan;
mod planned;
mod settings;
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

pub use builder::LimiterBuilder;
pub use planned::{Cached, Plan, Planned, StatsRef, Target, Work};
pub use settings::{Error, HeaderNames, LimiterSettings};

use count::{Counting, Counts};
use current::{RulesCache, SharedRules};

/// What a thread keeps between the requests it decides.
#[derive(Default)]
struct Buffers {
    work: Work,
    /// The rules of the limiter this thread decided for last: checking that they are
    /// still current costs less than an arc-swap guard's atomics.
    rules: Option<RulesCache>,
}

thread_local! {
    // A synchronous decision borrows these in place. An async one moves the `Work` out
    // for its whole duration (so the future stays `Send` and concurrent requests on one
    // thread never share it) and puts it back at the end; one dropped midway just loses it.
    static BUFFERS: RefCell<Buffers> = const {
        RefCell::new(Buffers {
            work: Work::NEW,
            rules: None,
        })
    };
}

/// Drops what the calling thread keeps between decisions: its copy of the rules (which
/// keeps a replaced rule set alive) and its scratch buffers (sized by the largest request
/// it decided). For threads going idle; the next decision on the thread starts afresh, at
/// the cost of one rules load and regrowing its buffers.
pub fn release_thread_state() {
    BUFFERS.with(|b| {
        // Borrowed only while a synchronous decision runs on this thread, never across one.
        if let Ok(mut b) = b.try_borrow_mut() {
            *b = Buffers::default();
        }
    });
}

use crate::clock::{Clock, Now};
use crate::config::ConfigError;
use crate::local_cache::LocalCache;
use crate::rules::RuleSet;
use crate::stats::Stats;
use crate::store::CounterStore;
use crate::types::{Code, Request, Response};

/// The rate limiter that services embed.
///
/// ```
/// use ratelimit_core::{Code, Descriptor, Limiter, ManualClock, Request};
/// use ratelimit_backends::MemoryStore;
///
/// let yaml = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n";
/// let limiter = Limiter::builder(MemoryStore::new(), ManualClock::new(1_700_000_000))
///     .yaml("api.yaml", yaml)
///     .build()
///     .expect("valid rules");
/// let req = Request::new("api", vec![Descriptor::new([("user", "alice")])]);
/// let codes: Vec<Code> = (0..3)
///     .map(|_| futures_executor::block_on(limiter.should_rate_limit(&req)).unwrap().overall_code)
///     .collect();
/// assert_eq!(codes, [Code::Ok, Code::Ok, Code::OverLimit]);
/// ```
///
/// A token bucket (docs/algorithms.md): bursts of up to 3, then one request every
/// 100 ms; a denied client is told how long to wait.
///
/// ```
/// use std::sync::Arc;
/// use ratelimit_core::{Code, Descriptor, Limiter, ManualClock, Request, Response};
/// use ratelimit_backends::MemoryStore;
///
/// let yaml = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 3}\n";
/// let clock = Arc::new(ManualClock::new(1_700_000_000));
/// let limiter = Limiter::builder(MemoryStore::new(), clock.clone())
///     .yaml("api.yaml", yaml)
///     .build()
///     .expect("valid rules");
/// let req = Request::new("api", vec![Descriptor::new([("user", "alice")])]);
/// let mut resp = Response::default();
/// let mut decide = || {
///     limiter.should_rate_limit_now_into(&req, &mut resp).unwrap().unwrap();
///     (resp.overall_code, resp.statuses[0].limit_remaining, resp.statuses[0].duration_until_reset)
/// };
/// assert_eq!(decide(), (Code::Ok, 2, Some(1)));
/// assert_eq!(decide().0, Code::Ok);
/// assert_eq!(decide().0, Code::Ok);
/// // Empty: wait (at most a second, rounded up) for the next token.
/// assert_eq!(decide(), (Code::OverLimit, 0, Some(1)));
/// clock.advance_micros(100_000);
/// assert_eq!(decide().0, Code::Ok);
/// assert_eq!(decide().0, Code::OverLimit);
/// ```
pub struct Limiter<S, C> {
    /// Shared with the threads' rule caches (see [`Buffers`]), which tell limiters apart
    /// by this allocation.
    rules: Arc<SharedRules>,
    local_cache: Option<LocalCache>,
    store: S,
    clock: C,
    settings: LimiterSettings,
    stats: Arc<Stats>,
    /// The expiry jitter bound, 0 for a store that ignores TTLs: fixed at build so that
    /// deciding asks the store nothing.
    jitter_max: u64,
    /// No setting adds work the lone-descriptor lane leaves out (`lone.rs`).
    lone_lane: bool,
    /// The store names counters by [`crate::Increment::id`]: the plan step computes it.
    by_id: bool,
    /// Something reads the keys' text (the store, or the local cache): the plan step
    /// writes it.
    key_text: bool,
}

impl<S: CounterStore, C: Clock> Limiter<S, C> {
    /// Starts building a limiter over `store`, reading time from `clock`.
    pub fn builder(store: S, clock: C) -> LimiterBuilder<S, C> {
        LimiterBuilder::new(store, clock)
    }

    /// Installs new rules atomically; requests in flight finish on the rules they started with.
    /// The statistics of rules the new set lacks are retired (see
    /// [`Stats::retire_rules_except`]).
    pub fn set_rules(&self, rules: RuleSet) {
        let rules = Arc::new(rules);
        self.rules.store(rules.clone());
        self.stats
            .retire_rules_except(rules.rules().iter().map(|r| &r.stats));
        self.stats.config_load_success.fetch_add(1, Relaxed);
    }

    /// Parses, compiles and installs YAML documents; on error the current rules stay and
    /// `config_load_error` is counted.
    pub fn reload_yaml<'a>(
        &self,
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
        merge_domains: bool,
    ) -> Result<(), ConfigError> {
        match RuleSet::from_yaml(files, merge_domains, &self.stats) {
            Ok(r) => {
                self.set_rules(r);
                Ok(())
            }
            Err(e) => {
                self.stats.config_load_error.fetch_add(1, Relaxed);
                Err(e)
            }
        }
    }

    /// The rules in force, if any were loaded.
    pub fn rules(&self) -> Option<Arc<RuleSet>> {
        self.rules.load_full()
    }

    /// The statistics registry.
    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// The settings.
    pub fn settings(&self) -> &LimiterSettings {
        &self.settings
    }

    /// The counter store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The local over-limit cache, when enabled.
    pub fn local_cache(&self) -> Option<&LocalCache> {
        self.local_cache.as_ref()
    }

    /// Decides a request: one status per descriptor and the overall code.
    pub async fn should_rate_limit(&self, req: &Request) -> Result<Response, Error> {
        if let Some(r) = self.should_rate_limit_now(req) {
            return r;
        }
        let mut bufs = BUFFERS
            .with(|b| b.try_borrow_mut().map(|mut b| std::mem::take(&mut b.work)))
            .unwrap_or_default();
        // Boxed so that this future stays small for the in-process path above.
        let r = Box::pin(self.decide_awaiting(req, &mut bufs)).await;
        BUFFERS.with(|b| {
            if let Ok(mut b) = b.try_borrow_mut() {
                b.work = bufs;
            }
        });
        self.count_error(&r);
        r
    }

    /// Decides a request without awaiting, when the store counts in process (the memory
    /// store) and no setting needs a second store call (`stop_increment_when_over_limit`,
    /// `refund_hits_when_over_limit`); `None` otherwise, and then
    /// [`Limiter::should_rate_limit`] is the way. For synchronous embedders, and the
    /// cheapest path there is: no future, no executor.
    ///
    /// ```
    /// use ratelimit_backends::MemoryStore;
    /// use ratelimit_core::{Code, Descriptor, Limiter, ManualClock, Request};
    ///
    /// let rules = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
    /// let limiter = Limiter::builder(MemoryStore::new(), ManualClock::new(1_700_000_000))
    ///     .yaml("api.yaml", rules)
    ///     .build()
    ///     .unwrap();
    /// let req = Request::new("api", vec![Descriptor::new([("user", "alice")])]);
    /// let first = limiter.should_rate_limit_now(&req).unwrap().unwrap();
    /// let second = limiter.should_rate_limit_now(&req).unwrap().unwrap();
    /// assert_eq!((first.overall_code, second.overall_code), (Code::Ok, Code::OverLimit));
    /// ```
    pub fn should_rate_limit_now(&self, req: &Request) -> Option<Result<Response, Error>> {
        let mut resp = Response::default();
        let r = self.should_rate_limit_now_into(req, &mut resp)?;
        Some(r.map(|()| resp))
    }

    /// [`Limiter::should_rate_limit_now`] writing its answer into `resp`, whose previous
    /// contents are replaced. A caller deciding many requests keeps one `Response` for all
    /// of them: the answer is built where it stays, instead of being built, returned
    /// through two layers of `Option` and `Result`, and dropped per decision (copies of
    /// a just-written struct stall on store forwarding).
    /// On an error `resp` holds no meaningful answer.
    ///
    /// ```
    /// use ratelimit_backends::MemoryStore;
    /// use ratelimit_core::{Code, Descriptor, Limiter, ManualClock, Request, Response};
    ///
    /// let rules = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 2}\n";
    /// let limiter = Limiter::builder(MemoryStore::new(), ManualClock::new(1_700_000_000))
    ///     .yaml("api.yaml", rules)
    ///     .build()
    ///     .unwrap();
    /// let req = Request::new("api", vec![Descriptor::new([("user", "alice")])]);
    /// let mut resp = Response::default();
    /// let mut codes = Vec::new();
    /// for _ in 0..3 {
    ///     limiter.should_rate_limit_now_into(&req, &mut resp).unwrap().unwrap();
    ///     codes.push(resp.overall_code);
    /// }
    /// assert_eq!(codes, [Code::Ok, Code::Ok, Code::OverLimit]);
    /// assert_eq!(resp.statuses[0].limit_remaining, 0);
    /// ```
    #[inline] // a small prologue: whether it joins the caller should not hang on codegen units
    pub fn should_rate_limit_now_into(
        &self,
        req: &Request,
        resp: &mut Response,
    ) -> Option<Result<(), Error>> {
        if !self.counts_now() {
            return None;
        }
        // Borrowed in place: nothing here awaits, so no other request on this thread can
        // want them meanwhile (a store calling back into the limiter gets fresh ones).
        // The error comes back boxed: a one-word result returns in a register, where the
        // full `Result` went through memory and its read stalled on store forwarding.
        let r = BUFFERS.with(|b| match b.try_borrow_mut() {
            Ok(mut bufs) => self.decide_now(req, &mut bufs, resp).map_err(Box::new),
            Err(_) => self
                .decide_now(req, &mut Buffers::default(), resp)
                .map_err(Box::new),
        });
        match r {
            Ok(()) => Some(Ok(())),
            Err(e) => {
                self.count_error_slow(&e);
                Some(Err(*e))
            }
        }
    }

    #[inline]
    fn count_error(&self, r: &Result<Response, Error>) {
        if let Err(e) = r {
            self.count_error_slow(e);
        }
    }

    #[cold]
    fn count_error_slow(&self, e: &Error) {
        match e {
            Error::Store(s) => self.stats.dynamic_counter_add(
                &format!("ratelimit.service.call.should_rate_limit.{}", s.err_type),
                1,
            ),
            _ => {
                self.stats.service_error.fetch_add(1, Relaxed);
            }
        }
    }

    /// What every decision checks first: a domain, descriptors and loaded rules; then the
    /// time it is made at.
    fn start(&self, req: &Request) -> Result<(Arc<RuleSet>, Now), Error> {
        Self::check(req)?;
        let rules = self.rules.load_full().ok_or(Error::NoConfig)?;
        Ok((rules, Now::of(&self.clock)))
    }

    fn check(req: &Request) -> Result<(), Error> {
        if req.domain.is_empty() {
            return Err(Error::EmptyDomain);
        }
        if req.descriptors.is_empty() {
            return Err(Error::EmptyDescriptors);
        }
        Ok(())
    }

    /// The decision path, awaiting the count step: the async entry point's, for stores
    /// that do not count in process or settings that need a second store call.
    async fn decide_awaiting(&self, req: &Request, work: &mut Work) -> Result<Response, Error> {
        let (rules, now) = self.start(req)?;
        let mut plan = Plan::default();
        if self.plan(req, &rules, now, work, &mut plan) == Planned::UnknownDomain {
            return Ok(self.unknown_domain(req));
        }
        let mut counts = Counts::new();
        let counts = counts.slots(plan.increments);
        match self.count(now.secs, &plan, work.for_count(&plan), counts) {
            Counting::Done(r) => r?,
            Counting::Pending(f) => f.await?,
        }
        let mut resp = Response::default();
        self.finish(req, &plan, work, counts, now, &mut resp);
        if resp.overall_code == Code::OverLimit && self.settings.refund_hits_when_over_limit {
            self.refund(now.secs, work.increments(&plan), work.cached(&plan))
                .await;
        }
        work.trim();
        Ok(resp)
    }

    /// The synchronous entry points' start: the rules from this thread's cache, then the
    /// decision path.
    #[inline(always)] // one frame with its caller, so the response is not copied once more
    fn decide_now(
        &self,
        req: &Request,
        bufs: &mut Buffers,
        resp: &mut Response,
    ) -> Result<(), Error> {
        Self::check(req)?;
        let Buffers { work, rules } = bufs;
        match RulesCache::load(rules, &self.rules) {
            Some(rules) => self.decide_in_place(req, rules, work, resp),
            None => Err(Error::NoConfig),
        }
    }

    /// The decision path without an await, for a store whose count step answers during
    /// the call ([`Limiter::counts_now`]): the same plan, count and finish steps as
    /// [`Limiter::decide_awaiting`], with nothing boxed and the plan on the stack.
    #[inline(always)] // one frame with its caller
    fn decide_in_place(
        &self,
        req: &Request,
        rules: &RuleSet,
        work: &mut Work,
        resp: &mut Response,
    ) -> Result<(), Error> {
        let now = Now::of(&self.clock);
        if let Some(r) = self.decide_lone(req, rules, now, work, resp) {
            return r;
        }
        let mut plan = Plan::default();
        if self.plan(req, rules, now, work, &mut plan) == Planned::UnknownDomain {
            *resp = self.unknown_domain(req);
            return Ok(());
        }
        let mut counts = Counts::new();
        let counts = counts.slots(plan.increments);
        self.count_now(
            now.secs,
            &plan,
            work.increments(&plan),
            work.cached(&plan),
            counts,
        )?;
        self.finish(req, &plan, work, counts, now, resp);
        work.trim();
        Ok(())
    }
}
