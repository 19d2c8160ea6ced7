//! Time as an injected dependency: the core never reads a clock itself.

use std::sync::atomic::{AtomicU64, Ordering};

/// A source of Unix time in whole seconds (upstream's resolution).
pub trait Clock: Send + Sync {
    /// Seconds since the Unix epoch.
    fn now(&self) -> u64;
}

/// A clock that only moves when told to; for tests and simulations.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock showing `now`.
    pub fn new(now: u64) -> Self {
        ManualClock(AtomicU64::new(now))
    }

    /// Sets the time.
    pub fn set(&self, now: u64) {
        self.0.store(now, Ordering::Relaxed);
    }

    /// Moves the time forward.
    pub fn advance(&self, secs: u64) {
        self.0.fetch_add(secs, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now(&self) -> u64 {
        (**self).now()
    }
}
