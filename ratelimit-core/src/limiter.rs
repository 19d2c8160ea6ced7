//! The embedding facade: rules + store + clock, with rules swapped atomically.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use arc_swap::ArcSwapOption;
use arc_swap::cache::Cache;
use smallvec::SmallVec;

/// Descriptors per request kept inline before spilling to the heap.
const INLINE: usize = 4;

/// Most increments kept for reuse per thread, and the largest key worth keeping.
const SPARE_KEYS: usize = 64;
const SPARE_KEY_BYTES: usize = 1024;

/// What a thread keeps between the requests it decides.
#[derive(Default)]
struct Buffers {
    work: Work,
    /// The rules of the limiter this thread decided for last. Checking that they are
    /// still current is one relaxed load, where an arc-swap guard costs a handful of
    /// atomics per decision. It holds those rules alive until this thread decides again
    /// (or exits): one rule set per thread at most.
    rules: Option<RulesCache>,
}

/// Buffers reused by the requests decided on one thread, so that a steady-state decision
/// allocates neither the rule-lookup scratch nor its cache keys. An async request moves them
/// out for its whole duration (so the future stays `Send` and concurrent requests on one
/// thread never share them) and puts them back at the end; one dropped midway just loses
/// them. A synchronous decision borrows them in place, next to the rules it borrows from
/// the same thread's [`Buffers`].
struct Work {
    scratch: String,
    /// The increments of the request in progress (its plan says how many), and beyond
    /// them those of earlier requests, whose key strings are overwritten in place.
    batch: Vec<Increment>,
    /// The last window start written into a key, and its digits: windows change once a
    /// unit, so formatting the number again each request is wasted work.
    window: (u64, String),
    /// A key grew past [`SPARE_KEY_BYTES`]: the next trim has increments to drop.
    oversized: bool,
}

impl Work {
    /// No window yet: `u64::MAX` is no window's start, so the first key formats its own.
    const NEW: Work = Work {
        scratch: String::new(),
        batch: Vec::new(),
        window: (u64::MAX, String::new()),
        oversized: false,
    };
}

impl Default for Work {
    fn default() -> Self {
        Work::NEW
    }
}

type RulesCache = Cache<Arc<ArcSwapOption<RuleSet>>, Option<Arc<RuleSet>>>;

thread_local! {
    static BUFFERS: RefCell<Buffers> = const {
        RefCell::new(Buffers {
            work: Work::NEW,
            rules: None,
        })
    };
}

use crate::clock::Clock;
use crate::config::ConfigError;
use crate::decide::{LimitSpec, decide};
use crate::local_cache::LocalCache;
use crate::rules::{Rule, RuleSet, cache_key_stem_into};
use crate::stats::{RULE_PREFIX, RuleStats, StatDelta, Stats, sanitize_stat_name};
use crate::store::{CounterStore, Increment, StoreError};
use crate::types::{Code, Descriptor, DescriptorStatus, Header, Request, Response};

/// Names of the `RateLimit-*` headers added when response headers are enabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderNames {
    /// Default `RateLimit-Limit`.
    pub limit: String,
    /// Default `RateLimit-Remaining`.
    pub remaining: String,
    /// Default `RateLimit-Reset`.
    pub reset: String,
}

impl Default for HeaderNames {
    fn default() -> Self {
        HeaderNames {
            limit: "RateLimit-Limit".into(),
            remaining: "RateLimit-Remaining".into(),
            reset: "RateLimit-Reset".into(),
        }
    }
}

/// Behaviour switches of a [`Limiter`], named after upstream's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LimiterSettings {
    /// `CACHE_KEY_PREFIX`: prepended to every cache key.
    pub cache_key_prefix: String,
    /// `NEAR_LIMIT_RATIO` (0.8).
    pub near_limit_ratio: f32,
    /// `EXPIRATION_JITTER_MAX_SECONDS` (300): keys live `unit + [0, max)` seconds.
    pub expiration_jitter_max_seconds: u64,
    /// `SHADOW_MODE`: never answer OVER_LIMIT overall.
    pub shadow_mode: bool,
    /// `QUOTA_MODE`: every limited descriptor is a quota descriptor.
    pub quota_mode: bool,
    /// `LIMIT_RESPONSE_HEADERS_ENABLED` with the header names.
    pub response_headers: Option<HeaderNames>,
    /// `RESPONSE_DYNAMIC_METADATA`.
    pub dynamic_metadata: bool,
    /// `LOCAL_CACHE_SIZE_IN_BYTES`: remember over-limit keys locally (0 = off).
    pub local_cache_bytes: usize,
    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`: upstream's mode that reads all counters
    /// first and, when one would go over, increments only the ones that would.
    pub stop_increment_when_over_limit: bool,
    /// `REFUND_HITS_WHEN_OVERLIMIT` (ours): a request answered OVER_LIMIT gives back the
    /// hits it added, so denied traffic does not consume any descriptor's quota. Costs a
    /// second store round trip only for denied requests.
    pub refund_hits_when_over_limit: bool,
}

impl Default for LimiterSettings {
    fn default() -> Self {
        LimiterSettings {
            cache_key_prefix: String::new(),
            near_limit_ratio: 0.8,
            expiration_jitter_max_seconds: 300,
            shadow_mode: false,
            quota_mode: false,
            response_headers: None,
            dynamic_metadata: false,
            local_cache_bytes: 0,
            stop_increment_when_over_limit: false,
            refund_hits_when_over_limit: false,
        }
    }
}

/// Why a request could not be decided. Being over the limit is not an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request's domain is empty.
    #[error("rate limit domain must not be empty")]
    EmptyDomain,
    /// The request has no descriptors.
    #[error("rate limit descriptor list must not be empty")]
    EmptyDescriptors,
    /// No rules were ever loaded.
    #[error("no rate limit configuration loaded")]
    NoConfig,
    /// The counter store failed.
    #[error("{0}")]
    Store(#[from] StoreError),
}

impl Error {
    /// The `should_rate_limit.<err_type>` statistic this error is counted under.
    pub fn err_type(&self) -> &'static str {
        match self {
            Error::Store(e) => e.err_type,
            _ => "service_error",
        }
    }
}

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
pub struct Limiter<S, C> {
    /// Shared with the threads' rule caches (see [`Buffers`]), which tell limiters apart
    /// by this allocation.
    rules: Arc<ArcSwapOption<RuleSet>>,
    local_cache: Option<LocalCache>,
    store: S,
    clock: C,
    settings: LimiterSettings,
    stats: Arc<Stats>,
    /// The expiry jitter bound, 0 for a store that ignores TTLs: fixed at build so that
    /// deciding asks the store nothing.
    jitter_max: u64,
}

/// Builds a [`Limiter`].
pub struct LimiterBuilder<S, C> {
    store: S,
    clock: C,
    settings: LimiterSettings,
    stats: Option<Arc<Stats>>,
    files: Vec<(String, String)>,
    merge_domains: bool,
}

impl<S: CounterStore, C: Clock> LimiterBuilder<S, C> {
    /// Adds a YAML rule document.
    pub fn yaml(mut self, name: impl Into<String>, text: impl Into<String>) -> Self {
        self.files.push((name.into(), text.into()));
        self
    }

    /// Allows several documents to share a domain.
    pub fn merge_domains(mut self, merge: bool) -> Self {
        self.merge_domains = merge;
        self
    }

    /// Replaces the settings.
    pub fn settings(mut self, settings: LimiterSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Uses an existing statistics registry (shared with a server's sinks).
    pub fn stats(mut self, stats: Arc<Stats>) -> Self {
        self.stats = Some(stats);
        self
    }

    /// Compiles the documents (if any were given) and builds the limiter. Without
    /// documents the limiter starts with no configuration and answers
    /// [`Error::NoConfig`] until [`Limiter::set_rules`] is called.
    pub fn build(self) -> Result<Limiter<S, C>, ConfigError> {
        let stats = self.stats.unwrap_or_default();
        let jitter_max = if self.store.uses_ttl() {
            self.settings.expiration_jitter_max_seconds
        } else {
            0
        };
        let limiter = Limiter {
            jitter_max,
            rules: Arc::new(ArcSwapOption::empty()),
            local_cache: (self.settings.local_cache_bytes > 0)
                .then(|| LocalCache::new(self.settings.local_cache_bytes)),
            store: self.store,
            clock: self.clock,
            settings: self.settings,
            stats,
        };
        if !self.files.is_empty() {
            let rules = RuleSet::from_yaml(
                self.files.iter().map(|(n, t)| (n.as_str(), t.as_str())),
                self.merge_domains,
                &limiter.stats,
            );
            match rules {
                Ok(r) => limiter.set_rules(r),
                Err(e) => {
                    limiter.stats.config_load_error.fetch_add(1, Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(limiter)
    }
}

/// The counters one request touches. Filled in place by [`Limiter::plan`]: with the
/// inline buffers it is several hundred bytes, and moving it around cost more than the
/// allocations the buffers save.
#[derive(Default)]
struct Plan<'r> {
    targets: SmallVec<[Target<'r>; INLINE]>,
    /// How many of the buffers' increments are this request's.
    increments: usize,
    /// Per increment: known over its limit by the local cache, so not counted. Empty
    /// without a local cache.
    cached: SmallVec<[bool; INLINE]>,
    any_cached: bool,
}

impl Plan<'_> {
    fn is_cached(&self, slot: usize) -> bool {
        self.cached.get(slot).copied().unwrap_or(false)
    }
}

/// Bounds what a thread keeps: a burst of huge requests must not pin its memory.
#[inline(always)] // two tests per request; the work is in the cold part
fn trim(bufs: &mut Work) {
    if bufs.batch.len() > SPARE_KEYS || bufs.oversized {
        trim_slow(bufs);
    }
}

#[cold]
fn trim_slow(bufs: &mut Work) {
    bufs.batch.truncate(SPARE_KEYS);
    if bufs.oversized {
        bufs.batch.retain(|i| i.key.capacity() <= SPARE_KEY_BYTES);
        bufs.oversized = false;
    }
}

/// What the overall code depends on, gathered descriptor by descriptor.
#[derive(Default)]
struct Tally {
    any_over: bool,
    quota_total: usize,
    quota_over: usize,
}

/// What one descriptor resolved to before the store is asked.
enum Target<'a> {
    NoLimit,
    Unlimited,
    Counted {
        spec: LimitSpec<'a>,
        rule: Option<&'a Arc<Rule>>,
        hits: u64,
        /// The rule's own statistics are borrowed; per-value ones are looked up.
        stats: Option<std::borrow::Cow<'a, Arc<RuleStats>>>,
        slot: usize,
    },
}

impl<S: CounterStore, C: Clock> Limiter<S, C> {
    /// Starts building a limiter over `store`, reading time from `clock`.
    pub fn builder(store: S, clock: C) -> LimiterBuilder<S, C> {
        LimiterBuilder {
            store,
            clock,
            settings: LimiterSettings::default(),
            stats: None,
            files: Vec::new(),
            merge_domains: false,
        }
    }

    /// Installs new rules atomically; requests in flight finish on the rules they started with.
    /// The statistics of rules the new set lacks are retired (see
    /// [`Stats::retire_rules_except`]).
    pub fn set_rules(&self, rules: RuleSet) {
        let rules = Arc::new(rules);
        self.rules.store(Some(rules.clone()));
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
        let r = Box::pin(self.decide_request(req, &mut bufs)).await;
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
    /// a just-written struct stall on store forwarding; measured in docs/benchmarks.md).
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
        let in_process = self.store.counts_in_process()
            && !self.settings.stop_increment_when_over_limit
            && !self.settings.refund_hits_when_over_limit;
        if !in_process {
            return None;
        }
        // Borrowed in place: nothing here awaits, so no other request on this thread can
        // want them meanwhile (a store calling back into the limiter gets fresh ones).
        let r = BUFFERS.with(|b| match b.try_borrow_mut() {
            Ok(mut bufs) => self.decide_now(req, &mut bufs, resp),
            Err(_) => self.decide_now(req, &mut Buffers::default(), resp),
        });
        if let Err(e) = &r {
            self.count_error_slow(e);
        }
        Some(r)
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
    fn start(&self, req: &Request) -> Result<(Arc<RuleSet>, u64), Error> {
        Self::check(req)?;
        let rules = self.rules.load_full().ok_or(Error::NoConfig)?;
        Ok((rules, self.clock.now()))
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

    async fn decide_request(&self, req: &Request, bufs: &mut Work) -> Result<Response, Error> {
        let (rules, now) = self.start(req)?;
        let mut p = Plan::default();
        if let Some(resp) = self.plan(req, &rules, now, bufs, &mut p) {
            return Ok(resp);
        }
        let batch = &mut bufs.batch[..p.increments];
        if self.settings.stop_increment_when_over_limit && !batch.is_empty() {
            self.stop_increments(now, &p.targets, batch, &p.cached, p.any_cached)
                .await?;
        }
        let batch = &bufs.batch[..p.increments];
        let mut counts: SmallVec<[u64; INLINE]> = smallvec::smallvec![0u64; batch.len()];
        if p.any_cached {
            let live: Vec<Increment> = batch
                .iter()
                .zip(&p.cached)
                .filter(|(_, c)| !**c)
                .map(|(b, _)| b.clone())
                .collect();
            if !live.is_empty() {
                let mut live_counts = vec![0u64; live.len()];
                self.store.increment(now, &live, &mut live_counts).await?;
                let mut it = live_counts.into_iter();
                for (c, is_cached) in counts.iter_mut().zip(&p.cached) {
                    if !is_cached {
                        *c = it.next().unwrap_or(0);
                    }
                }
            }
        } else if !batch.is_empty() {
            self.store.increment(now, batch, &mut counts).await?;
        }
        let mut resp = Response::default();
        self.finish(req, &p, batch, &counts, now, &mut resp);
        if resp.overall_code == Code::OverLimit && self.settings.refund_hits_when_over_limit {
            let added: Vec<Increment> = batch
                .iter()
                .enumerate()
                .filter(|(i, b)| !p.is_cached(*i) && b.hits > 0)
                .map(|(_, b)| b.clone())
                .collect();
            if !added.is_empty() {
                // The decision stands even if the refund fails: it only affects later
                // requests, and the counters expire with their window.
                let _ = self.store.refund(now, &added).await;
            }
        }
        trim(bufs);
        Ok(resp)
    }

    /// The same decision without an await, for stores that count in process: nothing is
    /// boxed and the plan stays on the stack instead of in a future. Only used when no
    /// setting needs a second store round trip (reading before counting, refunds).
    #[inline(always)] // one frame with its caller, so the response is not copied once more
    fn decide_now(
        &self,
        req: &Request,
        bufs: &mut Buffers,
        resp: &mut Response,
    ) -> Result<(), Error> {
        Self::check(req)?;
        let Buffers { work, rules } = bufs;
        let cache = match rules {
            Some(c) if std::ptr::eq(c.arc_swap(), &*self.rules) => c,
            _ => rules.insert(Cache::new(Arc::clone(&self.rules))),
        };
        match cache.load() {
            Some(rules) => self.decide_with(req, rules, work, resp),
            None => Err(Error::NoConfig),
        }
    }

    #[inline(always)] // one frame with the single-descriptor path it picks
    fn decide_with(
        &self,
        req: &Request,
        rules: &RuleSet,
        bufs: &mut Work,
        resp: &mut Response,
    ) -> Result<(), Error> {
        let now = self.clock.now();
        if let [d] = req.descriptors.as_slice() {
            return self.decide_single(req, d, rules, now, bufs, resp);
        }
        let mut p = Plan::default();
        if let Some(r) = self.plan(req, rules, now, bufs, &mut p) {
            *resp = r;
            return Ok(());
        }
        let batch = &bufs.batch[..p.increments];
        let mut counts = [0u64; INLINE];
        let mut spilled = Vec::new();
        let counts: &mut [u64] = match counts.get_mut(..batch.len()) {
            Some(c) => c,
            None => {
                spilled.resize(batch.len(), 0);
                &mut spilled
            }
        };
        if p.any_cached {
            // Rare (a key already known over): count the others one by one.
            for ((b, c), is_cached) in batch.iter().zip(counts.iter_mut()).zip(&p.cached) {
                if !is_cached {
                    self.count_now(now, std::slice::from_ref(b), std::slice::from_mut(c))?;
                }
            }
        } else if !batch.is_empty() {
            self.count_now(now, batch, counts)?;
        }
        self.finish(req, &p, batch, counts, now, resp);
        trim(bufs);
        Ok(())
    }

    #[inline(always)] // a check around the store's call
    fn count_now(&self, now: u64, batch: &[Increment], counts: &mut [u64]) -> Result<(), Error> {
        match self.store.increment_now(now, batch, counts) {
            Some(done) => Ok(done?),
            None => Err(Error::Store(StoreError::new(
                "store_error",
                "the store claimed to count in process but did not",
            ))),
        }
    }

    /// Matches every descriptor and builds the increments into `p`: everything before the
    /// store. `Some` is a complete answer that needs no counting (unknown domain).
    fn plan<'r>(
        &self,
        req: &Request,
        rules: &'r RuleSet,
        now: u64,
        bufs: &mut Work,
        p: &mut Plan<'r>,
    ) -> Option<Response> {
        let Work {
            scratch,
            batch,
            window: window_text,
            oversized,
        } = bufs;
        let Some(domain_rules) = rules.domain(&req.domain) else {
            return Some(self.unknown_domain(req));
        };

        // Resolve every descriptor to a rule (or override) first: `replaces` looks across
        // all of them before anything is counted.
        // Inline storage for the usual handful of descriptors: no heap allocation per request.
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
            let replaced: HashSet<&str> = matched
                .iter()
                .flatten()
                .flat_map(|r| r.replaces.iter().map(String::as_str))
                .collect();
            for m in &mut matched {
                if m.is_some_and(|r| !r.name.is_empty() && replaced.contains(r.name.as_str())) {
                    *m = None;
                }
            }
        }

        let Plan {
            targets,
            increments,
            cached,
            any_cached,
        } = p;
        for (d, m) in req.descriptors.iter().zip(&matched) {
            targets.push(self.target(req, d, *m, now, (batch, increments), window_text));
        }

        *oversized |= batch[..*increments]
            .iter()
            .any(|i| i.key.capacity() > SPARE_KEY_BYTES);

        // Keys known to be over their limit this window are answered locally.
        if let Some(lc) = &self.local_cache {
            cached.extend(
                batch[..*increments]
                    .iter()
                    .map(|b| lc.contains(&b.key, now)),
            );
            *any_cached = cached.iter().any(|c| *c);
        }
        None
    }

    /// The answer for a domain without rules: OK for every descriptor, and counted.
    #[cold]
    fn unknown_domain(&self, req: &Request) -> Response {
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

    /// [`Self::decide_with`] for the commonest request, one descriptor: the same steps
    /// (the shared ones are the same functions) without the per-request plan, whose inline
    /// vectors cost more to fill and walk than the single decision they would carry.
    #[inline(always)] // one frame with its caller
    fn decide_single(
        &self,
        req: &Request,
        d: &Descriptor,
        rules: &RuleSet,
        now: u64,
        bufs: &mut Work,
        resp: &mut Response,
    ) -> Result<(), Error> {
        let Some(domain_rules) = rules.domain(&req.domain) else {
            *resp = self.unknown_domain(req);
            return Ok(());
        };
        let Work {
            scratch,
            batch,
            window,
            oversized,
        } = bufs;
        // `replaces` needs no look here: only another descriptor's rule could replace this
        // one, since the loader rejects a rule replacing its own name (as upstream does).
        let m = if d.limit.is_some() {
            None
        } else {
            domain_rules.find(&d.entries, scratch)
        };
        let mut used = 0;
        let t = self.target(req, d, m, now, (batch, &mut used), window);
        let batch = &batch[..used];
        let mut count = 0;
        let mut from_cache = false;
        if let Some(inc) = batch.first() {
            *oversized |= inc.key.capacity() > SPARE_KEY_BYTES;
            from_cache = (self.local_cache.as_ref()).is_some_and(|lc| lc.contains(&inc.key, now));
            if !from_cache {
                let count = std::slice::from_mut(&mut count);
                self.count_now(now, batch, count)?;
            }
        }
        let mut tally = Tally::default();
        let counts = std::slice::from_ref(&count);
        let cached = std::slice::from_ref(&from_cache);
        let status = self.status_for(&t, batch, counts, cached, now, &mut tally);
        // A new response holds no status, one reused for the next decision holds one:
        // neither needs `SmallVec::truncate`, a generic the optimiser inlined or not
        // depending on how the calling crate was split into codegen units (998 or 1,053
        // Ir per decision for the same source).
        match &mut resp.statuses[..] {
            [] => resp.statuses.push(status),
            [only] => *only = status,
            _ => {
                resp.statuses.clear();
                resp.statuses.push(status);
            }
        }
        resp.overall_code = self.overall_code(&tally);
        self.decorate(req, resp, std::slice::from_ref(&t), now);
        trim(bufs);
        Ok(())
    }

    /// What one descriptor resolves to, given the rule it matched (`None`: no rule, or
    /// replaced); a counted one has its increment appended to the batch.
    #[inline(always)] // two call sites; the single-descriptor one is the hot path
    fn target<'r>(
        &self,
        req: &Request,
        d: &Descriptor,
        m: Option<&'r Arc<Rule>>,
        now: u64,
        (batch, increments): (&mut Vec<Increment>, &mut usize),
        window_text: &mut (u64, String),
    ) -> Target<'r> {
        let hits = req.hits_for(d);
        if let Some(o) = d.limit {
            let spec = LimitSpec {
                requests_per_unit: o.requests_per_unit,
                unit: o.unit,
                name: "",
                shadow_mode: false,
            };
            self.push_increment(
                (batch, increments),
                window_text,
                None,
                &req.domain,
                d,
                spec.unit,
                hits,
                now,
            );
            return Target::Counted {
                stats: self
                    .stats
                    .dynamic_rule(&override_stats_key(&req.domain, d))
                    .map(std::borrow::Cow::Owned),
                spec,
                rule: None,
                hits,
                slot: *increments - 1,
            };
        }
        match m {
            None => Target::NoLimit,
            Some(r) if r.unlimited => Target::Unlimited,
            Some(r) => {
                let unit = r.unit.unwrap_or(crate::Unit::Second);
                self.push_increment(
                    (batch, increments),
                    window_text,
                    Some(r),
                    &req.domain,
                    d,
                    unit,
                    hits,
                    now,
                );
                let stats = match r.stats_key(&req.domain, &d.entries) {
                    None => Some(std::borrow::Cow::Borrowed(&r.stats)),
                    Some(k) => self.stats.dynamic_rule(&k).map(std::borrow::Cow::Owned),
                };
                Target::Counted {
                    spec: LimitSpec {
                        requests_per_unit: r.requests_per_unit,
                        unit,
                        name: &r.name,
                        shadow_mode: r.shadow_mode,
                    },
                    rule: Some(r),
                    hits,
                    stats,
                    slot: *increments - 1,
                }
            }
        }
    }

    /// Turns the counts into the response: statuses, statistics, the local cache,
    /// headers and metadata.
    #[inline(always)] // fills the caller's response in place
    fn finish(
        &self,
        req: &Request,
        p: &Plan<'_>,
        batch: &[Increment],
        counts: &[u64],
        now: u64,
        resp: &mut Response,
    ) {
        let targets = &p.targets;
        resp.statuses.clear();
        resp.statuses.reserve(targets.len());
        let mut tally = Tally::default();
        for t in targets {
            let status = self.status_for(t, batch, counts, &p.cached, now, &mut tally);
            resp.statuses.push(status);
        }
        resp.overall_code = self.overall_code(&tally);
        self.decorate(req, resp, targets, now);
    }

    /// The optional parts of a response: `RateLimit-*` headers and dynamic metadata
    /// (emptied when off, as the response may be a reused one).
    #[inline(always)] // with both off (the default) this is two tests of empty fields
    fn decorate(&self, req: &Request, resp: &mut Response, targets: &[Target<'_>], now: u64) {
        if !resp.response_headers_to_add.is_empty() {
            resp.response_headers_to_add.clear();
        }
        if let Some(names) = &self.settings.response_headers {
            add_headers(resp, targets, names, self.settings.quota_mode, now);
        }
        if self.settings.dynamic_metadata {
            resp.dynamic_metadata = Some(dynamic_metadata(req, targets, &resp.statuses));
        } else if resp.dynamic_metadata.is_some() {
            resp.dynamic_metadata = None;
        }
    }

    /// One descriptor's status from its counter, with its statistics and the local cache
    /// updated; `tally` collects what the overall code needs. `cached` marks the slots the
    /// local cache answered (empty: none).
    #[inline(always)] // the status is built in the caller's frame: no copy out
    fn status_for(
        &self,
        t: &Target<'_>,
        batch: &[Increment],
        counts: &[u64],
        cached: &[bool],
        now: u64,
        tally: &mut Tally,
    ) -> DescriptorStatus {
        let Target::Counted {
            spec,
            rule,
            hits,
            stats,
            slot,
        } = t
        else {
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
        let from_cache = cached.get(*slot).copied().unwrap_or(false);
        let (status, delta): (DescriptorStatus, StatDelta) = decide(
            spec,
            counts[*slot],
            *hits,
            self.settings.near_limit_ratio,
            now,
            from_cache,
        );
        if let Some(s) = stats {
            s.add(&delta);
        }
        if let Some(lc) = &self.local_cache
            && !from_cache
            && counts[*slot] > u64::from(spec.requests_per_unit)
        {
            // Upstream keeps the key for a unit from now; the window start in the key
            // stops it matching in the next window anyway.
            lc.insert(&batch[*slot].key, now + spec.unit.seconds(), now);
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

    /// OVER_LIMIT when a non-quota descriptor is over, or every quota one is; OK instead
    /// (and counted) in global shadow mode.
    #[inline]
    fn overall_code(&self, tally: &Tally) -> Code {
        if !(tally.any_over || (tally.quota_total > 0 && tally.quota_over == tally.quota_total)) {
            return Code::Ok;
        }
        if self.settings.shadow_mode {
            self.stats.global_shadow_mode.fetch_add(1, Relaxed);
            return Code::Ok;
        }
        Code::OverLimit
    }

    /// Upstream's `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`: when a key is already known to
    /// be over, nothing else is counted; otherwise the counters are read first and, if any
    /// would go over, only those are incremented.
    async fn stop_increments(
        &self,
        now: u64,
        targets: &[Target<'_>],
        batch: &mut [Increment],
        cached: &[bool],
        any_cached: bool,
    ) -> Result<(), Error> {
        if any_cached {
            for (b, c) in batch.iter_mut().zip(cached) {
                if !c {
                    b.hits = 0;
                }
            }
            return Ok(());
        }
        let keys: Vec<&str> = batch.iter().map(|b| b.key.as_str()).collect();
        let mut current = vec![0u64; batch.len()];
        self.store.get(now, &keys, &mut current).await?;
        let mut limits = vec![0u64; batch.len()];
        for t in targets {
            if let Target::Counted { spec, slot, .. } = t {
                limits[*slot] = u64::from(spec.requests_per_unit);
            }
        }
        let near: Vec<bool> = batch
            .iter()
            .zip(&current)
            .zip(&limits)
            .map(|((b, cur), lim)| cur.saturating_add(b.hits) > *lim)
            .collect();
        if near.iter().any(|x| *x) {
            for (b, is_near) in batch.iter_mut().zip(&near) {
                if !is_near {
                    b.hits = 0;
                }
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)] // one call site per kind of target; a struct adds nothing
    #[inline]
    fn push_increment(
        &self,
        (batch, used): (&mut Vec<Increment>, &mut usize),
        window_text: &mut (u64, String),
        rule: Option<&Arc<Rule>>,
        domain: &str,
        d: &Descriptor,
        unit: crate::Unit,
        hits: u64,
        now: u64,
    ) {
        let window = unit.window_start(now);
        let prefix = &self.settings.cache_key_prefix;
        // An increment left by an earlier request on this thread: its key usually has
        // room already.
        if *used == batch.len() {
            batch.push(Increment {
                key: String::new(),
                hits: 0,
                unit,
                ttl_seconds: 0,
            });
        }
        let inc = &mut batch[*used];
        *used += 1;
        let key = &mut inc.key;
        // No reserve up front: the slot's key usually has room from an earlier request,
        // and summing the entries' lengths first costs more than the odd regrowth.
        match rule {
            Some(r) => r.cache_key_stem_into(key, prefix, domain, &d.entries),
            None => cache_key_stem_into(key, prefix, domain, &d.entries),
        }
        if window_text.0 != window {
            window_text.1.clear();
            let _ = write!(window_text.1, "{window}");
            window_text.0 = window;
        }
        key.push_str(&window_text.1);
        inc.ttl_seconds = unit.seconds() + jitter(key, self.jitter_max);
        inc.hits = hits;
        inc.unit = unit;
    }
}

/// Spreads key expiry over `[0, max)` seconds. Upstream draws a random number per request;
/// a hash of the key spreads expiries just as well, needs no randomness source in a pure
/// crate, and keeps a key's TTL stable across its refreshes.
#[inline]
fn jitter(key: &str, max: u64) -> u64 {
    if max == 0 { 0 } else { key_hash(key) % max }
}

/// A cheap hash of a key, for [`jitter`].
fn key_hash(key: &str) -> u64 {
    // Eight bytes per step (a multiply-xorshift mix): keys are hashed on every decision,
    // and quality is irrelevant beyond spreading values.
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h: u64 = key.len() as u64;
    let mut words = key.as_bytes().chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes(<[u8; 8]>::try_from(w).unwrap_or_default());
        h = (h ^ w).wrapping_mul(K);
        h ^= h >> 32;
    }
    let rest = words.remainder();
    let last = if rest.is_empty() {
        0
    } else if key.len() >= 8 {
        // The last eight bytes, overlapping the words already mixed: a fixed-size read
        // instead of copying a tail of unknown length.
        let end = &key.as_bytes()[key.len() - 8..];
        u64::from_le_bytes(<[u8; 8]>::try_from(end).unwrap_or_default())
    } else {
        rest.iter().fold(0, |acc, b| (acc << 8) | u64::from(*b))
    };
    h = (h ^ last).wrapping_mul(K);
    h ^ (h >> 32)
}

/// Upstream's stats key for a request override: `domain.` + entries as `key_value`
/// (or `key` when the value is empty), joined by dots.
fn override_stats_key(domain: &str, d: &Descriptor) -> String {
    let mut s = String::with_capacity(domain.len() + 32);
    s.push_str(domain);
    for e in &d.entries {
        s.push('.');
        s.push_str(&e.key);
        if !e.value.is_empty() {
            s.push('_');
            s.push_str(&e.value);
        }
    }
    sanitize_stat_name(&s)
}

/// `RateLimit-*` headers for the descriptor that binds: the one with the fewest remaining
/// hits, unless a non-quota descriptor is over its limit, in which case the last such one.
fn add_headers(
    resp: &mut Response,
    targets: &[Target<'_>],
    names: &HeaderNames,
    global_quota: bool,
    now: u64,
) {
    let mut chosen: Option<usize> = None;
    let mut forced = false;
    for (i, (s, t)) in resp.statuses.iter().zip(targets).enumerate() {
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
            value: limit.unit.until_reset(now).to_string(),
        },
    ];
}

/// The `dynamic_metadata` struct upstream returns (§9 of the behaviour notes).
fn dynamic_metadata(
    req: &Request,
    targets: &[Target<'_>],
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
    for (t, s) in targets.iter().zip(statuses) {
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

#[cfg(test)]
mod tests {
    use super::jitter;

    #[test]
    fn jitter_spreads_keys_and_stays_below_its_bound() {
        let values: std::collections::HashSet<u64> = (0..3000)
            .map(|i| jitter(&format!("domain_user_{i}_1700000000"), 300))
            .collect();
        assert!(values.iter().all(|v| *v < 300));
        // 3000 keys into 300 buckets: a fair spread leaves almost none empty.
        assert!(values.len() > 290, "only {} distinct", values.len());
        // Keys that differ only in the last byte, or only past the first eight, differ.
        assert_ne!(jitter("a_b_1", 1 << 40), jitter("a_b_2", 1 << 40));
        assert_ne!(jitter("12345678x", 1 << 40), jitter("12345678y", 1 << 40));
        assert_eq!(jitter("anything", 0), 0);
    }
}
