//! The counter store boundary: the only I/O a decision needs, behind a trait.

use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;

use crate::key_id::KeyId;
use crate::unit::Unit;

/// The most hits the limiter adds to a counter in one increment: one more than the largest
/// limit (limits are `u32`), so one such increment is over any limit and a larger one
/// would decide nothing differently. A counter grows from it only by many increments,
/// which leaves every store room below its integer's top (Redis counts in `i64`).
pub const MAX_HITS: u64 = u32::MAX as u64 + 1;

/// One counter operation of a decision: a limit's key, the hits to add, and how the
/// limit's algorithm counts them ([`Op`]).
///
/// A counter is named by `key` or by `id`, as the store says ([`StoreKind`]): the limiter
/// fills in only the one its store reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Increment {
    /// The cache key (upstream's format, prefix included). Empty for a store that counts
    /// by [`Increment::id`], unless the limiter's local cache needs it.
    pub key: String,
    /// The counter's identity for a store that counts by it
    /// (`StoreKind::InProcess { by_id: true, .. }`): a fingerprint of the key's parts
    /// (see [`crate::key_id`]), or [`KeyId::default`], which says the counter is named
    /// by `key` (such a store then takes [`KeyId::of_text`]). The limiter leaves it at
    /// the default for other stores, so that a store wrapped by one that does not pass
    /// its kind on still counts right.
    pub id: KeyId,
    /// Hits to add; 0 reads the counter without changing it. At most [`MAX_HITS`] from the
    /// limiter; a store still takes any value without wrapping its counter.
    pub hits: u64,
    /// The unit of the limit; stores may route by it (e.g. a per-second instance).
    pub unit: Unit,
    /// Expiry to set on the key, in seconds: the window (or a bucket's refill time) plus
    /// jitter.
    pub ttl_seconds: u64,
    /// The limit the hits are checked against: `requests_per_unit`, or a bucket's
    /// capacity. Only [`Op::Slide`], [`Op::Bucket`] and joint increments need it.
    pub limit: u64,
    /// How this limit counts.
    pub op: Op,
    /// Decided together with the increment before it (the limits of one descriptor with
    /// several): its sliding-window and token-bucket increments take their hits only if
    /// no increment of the group is over its limit, fixed windows included. See
    /// [`groups`].
    pub joint: bool,
}

/// A store operation, one per algorithm; each store implements every one as a single
/// atomic step on its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A fixed window of `seconds`: INCRBY, and EXPIRE when the key is new (upstream's).
    /// Answers the value after the increment.
    Window {
        /// The window length, which the key's window start is a multiple of.
        seconds: u64,
    },
    /// A sliding window of `window_us` at `now_us`: the key holds this window's and the
    /// previous window's counts; hits are added only when [`crate::algorithm::slide`]
    /// admits them. Answers its `used` value.
    Slide {
        /// The window length.
        window_us: u64,
        /// The time of the decision.
        now_us: u64,
    },
    /// A token bucket at `now_us`: the key holds the TAT; [`crate::algorithm::Bucket::take`]
    /// decides and moves it. Answers the TAT before the request (`tat_before`).
    Bucket {
        /// Microseconds per token.
        interval_us: u64,
        /// The time of the decision.
        now_us: u64,
    },
}

impl Increment {
    /// A fixed-window increment of `hits` on `key`, alone in its group: what upstream
    /// sends. Named by its text (`id` is the default).
    pub fn window(key: impl Into<String>, hits: u64, unit: Unit, ttl_seconds: u64) -> Increment {
        Increment {
            key: key.into(),
            id: KeyId::default(),
            hits,
            unit,
            ttl_seconds,
            limit: 0,
            op: Op::Window {
                seconds: unit.seconds(),
            },
            joint: false,
        }
    }

    /// Whether hits of this increment are taken whatever the limit says (a fixed window).
    #[inline]
    pub fn always_counts(&self) -> bool {
        matches!(self.op, Op::Window { .. })
    }

    /// The identity a store that counts by id names this increment's counter by: `id`,
    /// or, when `id` is the default, the fingerprint of `key`, written into `text`. A
    /// reference, so that a store reads the lanes where the limiter just wrote them
    /// (copying the identity whole moves it through a vector register, whose load
    /// cannot take the two 8-byte stores that wrote it from the store buffer).
    #[inline(always)]
    pub fn counter_id<'a>(&'a self, text: &'a mut KeyId) -> &'a KeyId {
        if self.id.is_set() {
            return &self.id;
        }
        *text = named_by_text(&self.key);
        text
    }

    /// The key [`CounterStore::get`] reads for this increment on a store of text keys:
    /// its key for a fixed window, else "" (nothing to read).
    #[inline]
    pub fn read_key(&self) -> &str {
        if self.always_counts() { &self.key } else { "" }
    }
}

#[cold]
#[inline(never)]
fn named_by_text(key: &str) -> KeyId {
    KeyId::of_text(key)
}

/// The groups of a batch: runs of increments decided together (see [`Increment::joint`]),
/// as index ranges in order.
pub fn groups(batch: &[Increment]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= batch.len() {
            return None;
        }
        let end = batch[start + 1..]
            .iter()
            .position(|i| !i.joint)
            .map_or(batch.len(), |p| start + 1 + p);
        let r = start..end;
        start = end;
        Some(r)
    })
}

/// Why a store could not answer. Over-limit is never an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StoreError {
    /// Names the statistic `ratelimit.service.call.should_rate_limit.<err_type>`,
    /// e.g. `redis_error`.
    pub err_type: &'static str,
    /// What went wrong, for logs and the error status.
    pub message: String,
}

impl StoreError {
    /// A store error counted under `err_type`.
    pub fn new(err_type: &'static str, message: impl Into<String>) -> Self {
        StoreError {
            err_type,
            message: message.into(),
        }
    }
}

/// What a store is, which says how the limiter talks to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// The counters live in this process and every operation answers during the call:
    /// the limiter counts through [`CounterStore::increment_now`] without building a
    /// future, and [`crate::Limiter::should_rate_limit_now`] answers.
    InProcess {
        /// Whether keys expire by [`Increment::ttl_seconds`]. A store that ends each key
        /// with its window by itself (the memory store) says `false`: the limiter then
        /// skips hashing every key for its expiry jitter and passes the bare unit.
        expires_by_ttl: bool,
        /// Whether the store names counters by [`Increment::id`] instead of their key
        /// text: the limiter then builds no key text at all (unless its local cache
        /// needs it). Keys that upstream's `_` joins into one text count apart then (see
        /// [`crate::key_id`]).
        by_id: bool,
    },
    /// The counters live on a server: every operation is one round trip per request,
    /// awaited, and keys expire by their TTL.
    Remote,
}

impl StoreKind {
    /// Whether the store expires keys by [`Increment::ttl_seconds`], so that spreading
    /// expiries with jitter matters.
    pub fn expires_by_ttl(self) -> bool {
        match self {
            StoreKind::InProcess { expires_by_ttl, .. } => expires_by_ttl,
            StoreKind::Remote => true,
        }
    }

    /// Whether the store names counters by [`Increment::id`].
    pub fn by_id(self) -> bool {
        matches!(self, StoreKind::InProcess { by_id: true, .. })
    }
}

/// A shared counter store: runs a batch of counter operations and reports each one's
/// answer. The store owns atomicity and expiry; everything else is decided in this crate.
///
/// Each [`Op`] is one atomic step on the key (for a remote store, part of the one round
/// trip of the batch); a group of joint increments ([`groups`]) is one atomic step for
/// all its keys.
///
/// Counters saturate: a counter near the top of the store's integer stays there (or as high
/// as it got) instead of wrapping or failing, and is reported as at least that high. Any
/// count above `u32::MAX` is over every limit, so no decision depends on where it stops.
#[async_trait]
pub trait CounterStore: Send + Sync {
    /// Runs each increment's operation (creating keys with their TTL when absent) and
    /// writes its answer into `counts` (same order and length as `batch`): for
    /// [`Op::Window`] the value after the increment; see [`Op`] for the others.
    /// `now` is the Unix time in seconds the decision is made at.
    async fn increment(
        &self,
        now: u64,
        batch: &[Increment],
        counts: &mut [u64],
    ) -> Result<(), StoreError>;

    /// What kind of store this is; see [`StoreKind`]. Asked when the limiter is built and
    /// on each decision, so it must not change over the store's life.
    fn kind(&self) -> StoreKind {
        StoreKind::Remote
    }

    /// [`CounterStore::increment`] without waiting, for a store of kind
    /// [`StoreKind::InProcess`], which must implement it: the limiter calls it instead of
    /// building and boxing the future on every decision. Other stores keep the default,
    /// an error the limiter never provokes.
    fn increment_now(
        &self,
        _now: u64,
        _batch: &[Increment],
        _counts: &mut [u64],
    ) -> Result<(), StoreError> {
        Err(StoreError::new(
            "store_error",
            "the store claimed to count in process but did not",
        ))
    }

    /// Reads the current values of the fixed-window counters of `batch` without changing
    /// them, into `out` (same order and length; 0 for absent keys and for increments of
    /// other algorithms, see [`Increment::read_key`]). Used by upstream's
    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT` mode.
    async fn get(&self, now: u64, batch: &[Increment], out: &mut [u64]) -> Result<(), StoreError>;

    /// Takes back hits added by [`CounterStore::increment`] (never below zero), for the
    /// opt-in mode where denied requests do not consume quota.
    async fn refund(&self, now: u64, batch: &[Increment]) -> Result<(), StoreError>;

    /// Whether the store is currently usable (for health checks).
    fn healthy(&self) -> bool {
        true
    }
}

#[async_trait]
impl<S: CounterStore + ?Sized> CounterStore for std::sync::Arc<S> {
    // Written out rather than `async fn`: forwarding the inner store's boxed future saves
    // a second box and a poll layer on every decision (the server's store is an `Arc`).
    fn increment<'s, 'b, 'c, 'async_trait>(
        &'s self,
        now: u64,
        batch: &'b [Increment],
        counts: &'c mut [u64],
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + 'async_trait>>
    where
        's: 'async_trait,
        'b: 'async_trait,
        'c: 'async_trait,
        Self: 'async_trait,
    {
        (**self).increment(now, batch, counts)
    }

    #[inline]
    fn kind(&self) -> StoreKind {
        (**self).kind()
    }

    #[inline(always)] // the one store call of every in-process decision
    fn increment_now(
        &self,
        now: u64,
        batch: &[Increment],
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        (**self).increment_now(now, batch, counts)
    }

    async fn get(&self, now: u64, batch: &[Increment], out: &mut [u64]) -> Result<(), StoreError> {
        (**self).get(now, batch, out).await
    }

    async fn refund(&self, now: u64, batch: &[Increment]) -> Result<(), StoreError> {
        (**self).refund(now, batch).await
    }

    fn healthy(&self) -> bool {
        (**self).healthy()
    }
}
