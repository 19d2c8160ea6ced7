//! The compiled rule tree and descriptor matching.
//!
//! Matching follows upstream step for step, quirks included, because operators' configs
//! were written against it: at each level the concatenation `key_value` is looked up first,
//! then the level's wildcard patterns in config order, then the bare `key`; a limit applies
//! only if it sits on the node matched by the request's last entry.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::config::{ConfigError, ConfigErrorKind, DescriptorConfig, Document};
use crate::stats::{RuleStats, Stats, sanitize_stat_name};
use crate::types::Entry;
use crate::unit::Unit;

/// A compiled descriptor entry with a limit (or `unlimited`) of the configuration.
#[derive(Debug)]
pub struct Rule {
    /// Upstream's `FullKey`: `domain.key_value.key...`, also the stats key.
    pub full_key: String,
    /// The limits, in file order: the `rate_limit` block, or each entry of `rate_limits`.
    /// Empty for an unlimited rule.
    pub limits: Box<[Limit]>,
    /// Answered locally with `u32::MAX` remaining.
    pub unlimited: bool,
    /// Counted but never blocking.
    pub shadow_mode: bool,
    /// Takes part in the all-quota-descriptors-over rule.
    pub quota_mode: bool,
    /// Stats per runtime value of every level.
    pub detailed_metric: bool,
    /// The `name` of the first limit ("" when none): what another rule's `replaces` names.
    pub name: String,
    /// Names this rule supersedes (of all its limits).
    pub replaces: Vec<String>,
    /// Config metadata returned in `dynamic_metadata`.
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// Counters under `full_key`.
    pub stats: Arc<RuleStats>,
    levels: Vec<Level>,
    dynamic_stats: bool,
    shares: bool,
    /// `domain + "_" + key + "_"` of the rule's first level, the start of most of its
    /// cache keys, written once at load instead of in four pieces per request.
    stem_head: Box<str>,
    /// The first level's descriptor key, which a request's first entry must carry for
    /// `stem_head` to be its key's start (a `key_value` or wildcard match may split
    /// `key_value` elsewhere).
    head_key: Box<str>,
    /// An unlimited rule's `requests_per_unit` as written, which upstream's `/rlconfig`
    /// shows although nothing counts against it.
    unlimited_requests: u32,
}

/// What the path from the domain root to a rule looks like, level by level.
#[derive(Debug)]
struct Level {
    /// The config part of the key: `key`, `key_value` or `key_pattern`.
    config_part: String,
    /// For `share_threshold` levels, the configured pattern used in place of the value.
    shared_value: Option<String>,
    value_to_metric: bool,
}

impl Rule {
    /// Whether this rule's statistics are looked up per request (`detailed_metric` or
    /// `value_to_metric` on its path) rather than kept in [`Rule::stats`].
    #[inline]
    pub fn has_dynamic_stats(&self) -> bool {
        self.dynamic_stats
    }

    /// The stats key for a request that matched this rule. Static unless the rule uses
    /// `detailed_metric` or `value_to_metric` on its path.
    #[inline]
    pub fn stats_key(&self, domain: &str, entries: &[Entry]) -> Option<String> {
        if !self.dynamic_stats {
            return None;
        }
        Some(self.dynamic_stats_key(domain, entries))
    }

    fn dynamic_stats_key(&self, domain: &str, entries: &[Entry]) -> String {
        let mut s = String::with_capacity(self.full_key.len() + 32);
        s.push_str(domain);
        for (lvl, e) in self.levels.iter().zip(entries) {
            s.push('.');
            if lvl.shared_value.is_some() {
                s.push_str(&lvl.config_part);
            } else if self.detailed_metric {
                let _ = write!(s, "{}_{}", e.key, e.value);
            } else if lvl.value_to_metric {
                s.push_str(&e.key);
                if !e.value.is_empty() {
                    s.push('_');
                    s.push_str(&e.value);
                }
            } else {
                s.push_str(&lvl.config_part);
            }
        }
        sanitize_stat_name(&s)
    }

    /// Writes the cache key of this rule for `entries` in the window starting at
    /// `window_start`: `prefix + domain + "_" + (key "_" value "_")* + window_start`, with
    /// `share_threshold` levels contributing their pattern instead of the runtime value.
    pub fn cache_key_into(
        &self,
        out: &mut String,
        prefix: &str,
        domain: &str,
        entries: &[Entry],
        window_start: u64,
    ) {
        self.cache_key_stem_into(out, prefix, domain, entries);
        let _ = write!(out, "{window_start}");
    }

    /// [`Rule::cache_key_stem_into`] for a request of the rule's own domain (the one it
    /// was matched in), which starts from the key head written at load.
    #[inline(always)] // a call's prologue and spills cost as much as its body
    pub(crate) fn matched_key_stem_into(
        &self,
        out: &mut String,
        prefix: &str,
        domain: &str,
        entries: &[Entry],
    ) {
        debug_assert!(self.stem_head.starts_with(domain));
        match entries.split_first() {
            Some((first, rest))
                if !self.shares && eq_short(first.key.as_bytes(), self.head_key.as_bytes()) =>
            {
                out.clear();
                if !prefix.is_empty() {
                    out.push_str(prefix);
                }
                out.push_str(&self.stem_head);
                out.push_str(&first.value);
                out.push('_');
                for e in rest {
                    push_entry(out, e);
                }
            }
            _ => self.cache_key_stem_into(out, prefix, domain, entries),
        }
    }

    /// The cache key without its window start, which the caller appends (the limiter
    /// keeps the window's digits from one request to the next).
    #[inline]
    pub(crate) fn cache_key_stem_into(
        &self,
        out: &mut String,
        prefix: &str,
        domain: &str,
        entries: &[Entry],
    ) {
        if !self.shares {
            return cache_key_stem_into(out, prefix, domain, entries);
        }
        out.clear();
        out.push_str(prefix);
        out.push_str(domain);
        out.push('_');
        for (lvl, e) in self.levels.iter().zip(entries) {
            out.push_str(&e.key);
            out.push('_');
            out.push_str(lvl.shared_value.as_deref().unwrap_or(&e.value));
            out.push('_');
        }
    }
}

/// Upstream's cache key for plain entries (also used for request overrides).
pub fn cache_key_into(
    out: &mut String,
    prefix: &str,
    domain: &str,
    entries: &[Entry],
    window_start: u64,
) {
    cache_key_stem_into(out, prefix, domain, entries);
    let _ = write!(out, "{window_start}");
}

/// [`cache_key_into`] without the window start.
pub(crate) fn cache_key_stem_into(out: &mut String, prefix: &str, domain: &str, entries: &[Entry]) {
    out.clear();
    out.push_str(prefix);
    out.push_str(domain);
    out.push('_');
    for e in entries {
        push_entry(out, e);
    }
}

/// One entry's part of a cache key: `key_value_`.
#[inline(always)]
fn push_entry(out: &mut String, e: &Entry) {
    out.push_str(&e.key);
    out.push('_');
    out.push_str(&e.value);
    out.push('_');
}

#[derive(Debug, Default)]
struct Node {
    children: Children,
    rule: Option<Arc<Rule>>,
}

#[derive(Debug, Default)]
struct Children {
    /// Keyed by `key` (key-only entries) or `key_value` (explicit or wildcard values).
    by_key: NameMap<Node>,
    /// `key_value` patterns containing `*`, in config order; the first match wins.
    wildcards: Vec<Box<str>>,
    /// The request keys whose `key_value` can be a name here: the part before each `_`
    /// of every name (an explicit value's key, or a key that holds `_` itself, as
    /// Envoy's `remote_address` and `generic_key` do). See [`Children::bare_key_only`].
    value_keys: NameMap<()>,
}

impl Children {
    /// Whether an entry with `key` can only match its bare key here: no wildcard, and no
    /// name is `key_` and more. Then matching skips building and looking up its
    /// `key_value`, which upstream's lookup tries first.
    #[inline(always)]
    fn bare_key_only(&self, key: &str) -> bool {
        self.wildcards.is_empty()
            && (self.value_keys.is_empty() || !self.value_keys.contains_key(key))
    }

    /// Fills [`Children::value_keys`] once every name is in.
    fn index_value_keys(&mut self) {
        for name in self.by_key.keys() {
            for (i, _) in name.match_indices('_') {
                let key = &name[..i];
                if !self.value_keys.contains_key(key) {
                    self.value_keys.insert(key.into(), ());
                }
            }
        }
    }
}

/// The rules of one domain.
#[derive(Debug, Default)]
struct DomainRules {
    root: Children,
}

/// A validated, compiled configuration: every domain's descriptor tree.
#[derive(Debug, Default)]
pub struct RuleSet {
    domains: NameMap<DomainRules>,
    rules: Vec<Arc<Rule>>,
}

/// A configured domain, found once per request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DomainView<'a>(&'a DomainRules);

impl<'a> DomainView<'a> {
    /// The rule for one descriptor's entries, if any. `scratch` is reused between calls
    /// to build the `key_value` lookup string without allocating per entry.
    #[inline(always)] // two call sites; the single-descriptor one is the hot path
    pub(crate) fn find(self, entries: &[Entry], scratch: &mut String) -> Option<&'a Arc<Rule>> {
        let (last, init) = entries.split_last()?;
        let mut level = &self.0.root;
        for e in init {
            let node = Self::child(level, e, scratch)?;
            // Entries deeper than the tree match nothing.
            if node.children.by_key.is_empty() {
                return None;
            }
            level = &node.children;
        }
        Self::child(level, last, scratch)?.rule.as_ref()
    }

    /// The node one entry leads to from `level`: `key_value`, then the wildcards in config
    /// order, then the bare `key` (a level configured with keys only looks up just that).
    #[inline(always)]
    fn child(level: &'a Children, e: &Entry, scratch: &mut String) -> Option<&'a Node> {
        if level.bare_key_only(&e.key) {
            return level.by_key.get(e.key.as_str());
        }
        scratch.clear();
        scratch.push_str(&e.key);
        scratch.push('_');
        scratch.push_str(&e.value);
        level
            .by_key
            .get(scratch.as_str())
            .or_else(|| {
                level
                    .wildcards
                    .iter()
                    .find(|p| wildcard_match(p, scratch))
                    .and_then(|p| level.by_key.get(p))
            })
            .or_else(|| level.by_key.get(e.key.as_str()))
    }
}

/// The outcome of matching one descriptor against a domain's tree.
#[derive(Debug, Clone, Copy)]
pub enum Match<'a> {
    /// The domain is not configured.
    UnknownDomain,
    /// No rule applies (no match, depth mismatch, or a whitelisted value).
    NoRule,
    /// This rule applies.
    Rule(&'a Arc<Rule>),
}

impl RuleSet {
    /// An empty rule set (every domain unknown).
    pub fn empty() -> Self {
        RuleSet::default()
    }

    /// Compiles documents into a rule set. With `merge_domains`, documents may share a
    /// domain (upstream's `MERGE_DOMAIN_CONFIG`); duplicate keys still fail.
    pub fn compile(
        docs: &[Document],
        merge_domains: bool,
        stats: &Stats,
    ) -> Result<RuleSet, ConfigError> {
        let mut set = RuleSet::default();
        for doc in docs {
            if doc.domain.is_empty() {
                return Err(ConfigError::new(
                    ConfigErrorKind::EmptyDomain,
                    &doc.name,
                    "domain",
                    "config file cannot have empty domain",
                ));
            }
            if set.domains.contains_key(&doc.domain) && !merge_domains {
                return Err(ConfigError::new(
                    ConfigErrorKind::DuplicateDomain,
                    &doc.name,
                    "domain",
                    format!("duplicate domain '{}' in config file", doc.domain),
                ));
            }
            let domain = set.domains.get_or_insert_default(&doc.domain);
            let mut cx = Compiler {
                doc,
                stats,
                rules: &mut set.rules,
                levels: Vec::new(),
                root_key: String::new(),
            };
            cx.level(
                &mut domain.root,
                &doc.descriptors,
                &format!("{}.", doc.domain),
                "descriptors",
            )?;
        }
        Ok(set)
    }

    /// Parses and compiles YAML documents given as `(name, text)` pairs.
    pub fn from_yaml<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
        merge_domains: bool,
        stats: &Stats,
    ) -> Result<RuleSet, ConfigError> {
        let docs = files
            .into_iter()
            .map(|(name, text)| crate::config::parse_document(name, text))
            .collect::<Result<Vec<_>, _>>()?;
        RuleSet::compile(&docs, merge_domains, stats)
    }

    /// Whether `domain` has rules.
    pub fn has_domain(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    /// Number of configured domains.
    pub fn domain_count(&self) -> usize {
        self.domains.len()
    }

    /// Every compiled rule, in config order.
    pub fn rules(&self) -> &[Arc<Rule>] {
        &self.rules
    }

    /// Matches one descriptor's entries. `scratch` is reused between calls to build the
    /// `key_value` lookup string without allocating per entry.
    pub fn find<'a>(&'a self, domain: &str, entries: &[Entry], scratch: &mut String) -> Match<'a> {
        match self.domain(domain) {
            None => Match::UnknownDomain,
            Some(d) => d.find(entries, scratch).map_or(Match::NoRule, Match::Rule),
        }
    }

    /// One domain's rules, so that a request hashes its domain once for all descriptors.
    #[inline]
    pub(crate) fn domain(&self, domain: &str) -> Option<DomainView<'_>> {
        self.domains.get(domain).map(DomainView)
    }

    /// Upstream's `/rlconfig` dump: one line per rule, sorted by key; a rule with
    /// several limits has a line per limit.
    pub fn dump(&self) -> String {
        let mut lines: Vec<String> = Vec::with_capacity(self.rules.len());
        for r in self.rules.iter() {
            if r.limits.is_empty() {
                lines.push(format!(
                    "{}: unit=UNKNOWN requests_per_unit={}, shadow_mode: {}, quota_mode: {}\n",
                    r.full_key, r.unlimited_requests, r.shadow_mode, r.quota_mode
                ));
            }
            for l in r.limits.iter() {
                lines.push(format!(
                    "{}: {}\n",
                    r.full_key,
                    l.dump_line(r.shadow_mode, r.quota_mode)
                ));
            }
        }
        lines.sort();
        lines.concat()
    }
}

/// Matches `s` against a pattern where each `*` stands for any run of characters: the
/// first segment must be a prefix, the last a suffix, the middle ones appear in order.
pub fn wildcard_match(pattern: &str, s: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = s.strip_prefix(first) else {
        return false;
    };
    let mut segments: Vec<&str> = parts.collect();
    let Some(last) = segments.pop() else {
        return rest.is_empty();
    };
    for seg in segments {
        match rest.find(seg) {
            Some(at) => rest = &rest[at + seg.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

mod bucket;
mod compile;
mod ids;
mod limit;
mod names;
#[cfg(test)]
mod tests;

pub use bucket::MAX_BUCKET_ENTRIES;
use compile::Compiler;
pub(crate) use ids::key_id;
pub use limit::Limit;
use names::{NameMap, eq_short};
