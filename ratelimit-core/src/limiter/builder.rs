//! Building a [`Limiter`]: rule documents, settings and statistics, compiled once, and
//! what the settings fix for the limiter's life (the local cache, the expiry jitter,
//! whether the lone-descriptor lane serves it).

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use super::{Limiter, LimiterSettings};
use crate::clock::Clock;
use crate::config::{ConfigError, Document};
use crate::local_cache::LocalCache;
use crate::rules::RuleSet;
use crate::stats::Stats;
use crate::store::CounterStore;

/// Builds a [`Limiter`].
pub struct LimiterBuilder<S, C> {
    store: S,
    clock: C,
    settings: LimiterSettings,
    stats: Option<Arc<Stats>>,
    files: Vec<(String, String)>,
    /// Documents built in code ([`crate::code_rules::Rules`]), compiled with the files.
    documents: Vec<Document>,
    merge_domains: bool,
}

impl<S: CounterStore, C: Clock> LimiterBuilder<S, C> {
    pub(super) fn new(store: S, clock: C) -> Self {
        LimiterBuilder {
            store,
            clock,
            settings: LimiterSettings::default(),
            stats: None,
            files: Vec::new(),
            documents: Vec::new(),
            merge_domains: false,
        }
    }

    /// Adds a YAML rule document.
    pub fn yaml(mut self, name: impl Into<String>, text: impl Into<String>) -> Self {
        self.files.push((name.into(), text.into()));
        self
    }

    /// Adds the rules of a domain written in code; they compile together with the YAML
    /// documents, as one more file would.
    pub fn rules(mut self, rules: crate::code_rules::Rules) -> Self {
        self.documents.push(rules.into_document());
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

    /// Compiles the documents (if any were given: YAML, then those built in code) and
    /// builds the limiter. Without documents the limiter starts with no configuration
    /// and answers [`Error::NoConfig`](super::Error::NoConfig) until [`Limiter::set_rules`] is called.
    pub fn build(self) -> Result<Limiter<S, C>, ConfigError> {
        let stats = self.stats.unwrap_or_default();
        let jitter_max = if self.store.kind().expires_by_ttl() {
            self.settings.expiration_jitter_max_seconds
        } else {
            0
        };
        let s = &self.settings;
        let lone_lane = s.local_cache_bytes == 0
            && s.response_headers.is_none()
            && !s.dynamic_metadata
            && !s.quota_mode;
        let by_id = self.store.kind().by_id();
        let limiter = Limiter {
            jitter_max,
            lone_lane,
            by_id,
            key_text: !by_id || s.local_cache_bytes > 0,
            rules: Arc::default(),
            local_cache: (self.settings.local_cache_bytes > 0)
                .then(|| LocalCache::new(self.settings.local_cache_bytes)),
            store: self.store,
            clock: self.clock,
            settings: self.settings,
            stats,
        };
        if !self.files.is_empty() || !self.documents.is_empty() {
            let parsed: Result<Vec<Document>, ConfigError> = self
                .files
                .iter()
                .map(|(n, t)| crate::config::parse_document(n, t))
                .collect();
            let rules = parsed.and_then(|mut docs| {
                docs.extend(self.documents);
                RuleSet::compile(&docs, self.merge_domains, &limiter.stats)
            });
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
