//! Time as an injected dependency: the core never reads a clock itself.

use std::sync::atomic::{AtomicU64, Ordering};

/// A source of Unix time. Window limits count in whole seconds (upstream's resolution);
/// token buckets and sliding windows use microseconds.
pub trait Clock: Send + Sync {
    /// Seconds since the Unix epoch.
    fn now(&self) -> u64;

    /// Microseconds since the Unix epoch. A clock that only knows seconds keeps the
    /// default, the start of the current second.
    fn now_micros(&self) -> u64 {
        self.now().saturating_mul(1_000_000)
    }
}

/// A clock that only moves when told to; for tests and simulations.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock showing `now` (seconds).
    pub fn new(now: u64) -> Self {
        ManualClock(AtomicU64::new(now.saturating_mul(1_000_000)))
    }

    /// Sets the time in seconds.
    pub fn set(&self, now: u64) {
        self.set_micros(now.saturating_mul(1_000_000));
    }

    /// Moves the time forward by whole seconds.
    pub fn advance(&self, secs: u64) {
        self.advance_micros(secs.saturating_mul(1_000_000));
    }

    /// Sets the time in microseconds.
    pub fn set_micros(&self, now: u64) {
        self.0.store(now, Ordering::Relaxed);
    }

    /// Moves the time forward by microseconds.
    pub fn advance_micros(&self, micros: u64) {
        self.0.fetch_add(micros, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed) / 1_000_000
    }

    fn now_micros(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now(&self) -> u64 {
        (**self).now()
    }

    fn now_micros(&self) -> u64 {
        (**self).now_micros()
    }
}

/// The time of a decision, in both resolutions limits count in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Unix seconds: window starts and expiries.
    pub secs: u64,
    /// Unix microseconds: token buckets and sliding windows.
    pub micros: u64,
}

impl Now {
    /// The time `micros` microseconds after the epoch.
    #[inline]
    pub const fn from_micros(micros: u64) -> Now {
        Now {
            secs: micros / 1_000_000,
            micros,
        }
    }

    /// The start of whole second `secs`.
    #[inline]
    pub const fn from_secs(secs: u64) -> Now {
        Now {
            secs,
            micros: secs.saturating_mul(1_000_000),
        }
    }

    /// Reads `clock`.
    #[inline]
    pub fn of(clock: &(impl Clock + ?Sized)) -> Now {
        Now::from_micros(clock.now_micros())
    }
}
