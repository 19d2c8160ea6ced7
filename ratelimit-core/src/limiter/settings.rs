//! What a [`super::Limiter`] is configured with, and how a decision can fail.

use crate::store::StoreError;

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

/// Behaviour switches of a [`super::Limiter`], named after upstream's settings.
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
