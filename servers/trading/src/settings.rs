//! What the server is started with: its settings and its one clock.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Exchanges the sandbox accepts until exchange data is configurable: code and name.
pub(crate) const DEFAULT_EXCHANGES: [(&str, &str); 8] = [
    ("binance", "Binance"),
    ("bitfinex", "Bitfinex"),
    ("bitmax", "BitMax"),
    ("bitstamp", "Bitstamp"),
    ("coinbasepro", "Coinbase Pro"),
    ("huobipro", "Huobi Pro"),
    ("kraken", "Kraken"),
    ("okex", "OKEx"),
];

/// Source of the current time in milliseconds since the Unix epoch; injectable for tests.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    })
}

/// The sandbox's one clock when time control is enabled: the wall clock plus an offset
/// that only grows. Tests move it forward (`POST /sandbox/advance?ms=N`) instead of
/// sleeping; because it never runs behind the wall clock, nonces derived from real time by
/// the SDKs stay acceptable.
#[derive(Debug, Default)]
pub struct SandboxClock {
    offset_ms: AtomicU64,
}

impl SandboxClock {
    /// A clock that starts at the wall clock.
    pub fn new() -> Arc<SandboxClock> {
        Arc::new(SandboxClock::default())
    }

    /// The clock to put in [`Settings::clock`].
    pub fn clock(self: &Arc<SandboxClock>) -> Clock {
        let me = self.clone();
        let wall = system_clock();
        Arc::new(move || wall().saturating_add(me.offset_ms.load(Ordering::Relaxed)))
    }

    /// Moves the clock forward by `ms`; returns the total offset.
    pub fn advance(&self, ms: u64) -> u64 {
        self.offset_ms
            .fetch_add(ms, Ordering::Relaxed)
            .saturating_add(ms)
    }
}

/// Server settings.
#[derive(Clone)]
pub struct Settings {
    /// Largest request body accepted (413 above it).
    pub max_body_bytes: usize,
    /// Time a client gets to send its request headers, and separately its body.
    pub read_timeout: Duration,
    /// Time open connections get to finish after shutdown is requested.
    pub grace: Duration,
    /// Exchange codes accepted where the catalogue asks for `is_supported_exchange`.
    pub exchanges: Vec<String>,
    /// Clock for `meta.ms` / `meta.time`, nonces and time-based answers.
    pub clock: Clock,
    /// Where the store lives; `None` keeps everything in memory (lost at exit).
    pub data_dir: Option<PathBuf>,
    /// Requests per minute per address for calls without a valid key; 0 disables the limit.
    pub ip_per_minute: u32,
    /// Seed of the simulated market (equal seeds give equal prices, books and news).
    pub seed: u64,
    /// Time control for tests: when set, `POST /sandbox/advance?ms=N` moves this clock
    /// (which must then be the one in `clock`) forward.
    pub sandbox: Option<Arc<SandboxClock>>,
    /// Enforce every plan's `user_settings.ratelimit.ms` spacing (Free: 1 signed call a
    /// second) on all accounts; when off, only accounts that chose a spacing in
    /// `user/settings` get one.
    pub plan_spacing: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            max_body_bytes: 1 << 20,
            read_timeout: Duration::from_secs(30),
            grace: Duration::from_secs(10),
            exchanges: DEFAULT_EXCHANGES
                .iter()
                .map(|(code, _)| (*code).to_owned())
                .collect(),
            clock: system_clock(),
            data_dir: None,
            ip_per_minute: 60,
            seed: 1,
            sandbox: None,
            plan_spacing: false,
        }
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("max_body_bytes", &self.max_body_bytes)
            .field("read_timeout", &self.read_timeout)
            .field("grace", &self.grace)
            .field("exchanges", &self.exchanges)
            .field("data_dir", &self.data_dir)
            .field("ip_per_minute", &self.ip_per_minute)
            .field("seed", &self.seed)
            .field("sandbox", &self.sandbox.is_some())
            .field("plan_spacing", &self.plan_spacing)
            .finish_non_exhaustive()
    }
}
