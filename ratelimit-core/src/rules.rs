//! The compiled rule tree and descriptor matching.
//!
//! Matching follows upstream step for step, quirks included, because operators' configs
//! were written against it: at each level the concatenation `key_value` is looked up first,
//! then the level's wildcard patterns in config order, then the bare `key`; a limit applies
//! only if it sits on the node matched by the request's last entry.

use std::fmt::Write as _;
use std::sync::Arc;

use hashbrown::HashMap;

use crate::config::{ConfigError, ConfigErrorKind, DescriptorConfig, Document};
use crate::stats::{RuleStats, Stats, sanitize_stat_name};
use crate::types::Entry;
use crate::unit::Unit;

/// A compiled limit of the configuration.
#[derive(Debug)]
pub struct Rule {
    /// Upstream's `FullKey`: `domain.key_value.key...`, also the stats key.
    pub full_key: String,
    /// Allowed hits per window (0 blocks everything).
    pub requests_per_unit: u32,
    /// The window; `None` for unlimited rules.
    pub unit: Option<Unit>,
    /// Answered locally with `u32::MAX` remaining.
    pub unlimited: bool,
    /// Counted but never blocking.
    pub shadow_mode: bool,
    /// Takes part in the all-quota-descriptors-over rule.
    pub quota_mode: bool,
    /// Stats per runtime value of every level.
    pub detailed_metric: bool,
    /// The rule's `name` ("" when none).
    pub name: String,
    /// Names this rule supersedes.
    pub replaces: Vec<String>,
    /// Config metadata returned in `dynamic_metadata`.
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// Counters under `full_key`.
    pub stats: Arc<RuleStats>,
    levels: Vec<Level>,
    dynamic_stats: bool,
    shares: bool,
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
        out.push_str(&e.key);
        out.push('_');
        out.push_str(&e.value);
        out.push('_');
    }
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
    /// No wildcard and no name with `_`: a request's `key_value` (which always holds a
    /// `_`) cannot match here, so matching skips building and hashing it.
    key_only: bool,
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

/// Names to values, for the few names of one tree level or the domains of a config.
/// Up to [`NameMap::SCAN`] names are compared one by one, which beats hashing the name
/// for the handful most levels have; above that an index is hashed.
#[derive(Debug)]
struct NameMap<V> {
    entries: Vec<(Box<str>, V)>,
    index: Option<HashMap<Box<str>, usize>>,
}

impl<V> Default for NameMap<V> {
    fn default() -> Self {
        NameMap {
            entries: Vec::new(),
            index: None,
        }
    }
}

impl<V> NameMap<V> {
    const SCAN: usize = 8;

    fn position(&self, name: &str) -> Option<usize> {
        match &self.index {
            None => self.entries.iter().position(|(n, _)| **n == *name),
            Some(ix) => ix.get(name).copied(),
        }
    }

    #[inline(always)] // a handful of compares on every request: a call would cost as much
    fn get(&self, name: &str) -> Option<&V> {
        if let Some(ix) = &self.index {
            return ix.get(name).map(|&i| &self.entries[i].1);
        }
        for (n, v) in &self.entries {
            if **n == *name {
                return Some(v);
            }
        }
        None
    }

    fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| &**n)
    }

    /// Adds a name that is not there yet (callers check for duplicates first).
    fn insert(&mut self, name: Box<str>, value: V) {
        let i = self.entries.len();
        if let Some(ix) = &mut self.index {
            ix.insert(name.clone(), i);
        } else if i == Self::SCAN {
            let mut ix: HashMap<Box<str>, usize> = self
                .entries
                .iter()
                .enumerate()
                .map(|(j, (n, _))| (n.clone(), j))
                .collect();
            ix.insert(name.clone(), i);
            self.index = Some(ix);
        }
        self.entries.push((name, value));
    }

    fn get_or_insert_default(&mut self, name: &str) -> &mut V
    where
        V: Default,
    {
        let i = match self.position(name) {
            Some(i) => i,
            None => {
                self.insert(name.into(), V::default());
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }
}

/// A configured domain, found once per request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DomainView<'a>(&'a DomainRules);

impl<'a> DomainView<'a> {
    /// The rule for one descriptor's entries, if any. `scratch` is reused between calls
    /// to build the `key_value` lookup string without allocating per entry.
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
        if level.key_only {
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

    /// Upstream's `/rlconfig` dump: one line per rule, sorted by key.
    pub fn dump(&self) -> String {
        let mut lines: Vec<String> = self
            .rules
            .iter()
            .map(|r| {
                format!(
                    "{}: unit={} requests_per_unit={}, shadow_mode: {}, quota_mode: {}\n",
                    r.full_key,
                    r.unit.map_or("UNKNOWN", Unit::name),
                    if r.unlimited { 0 } else { r.requests_per_unit },
                    r.shadow_mode,
                    r.quota_mode
                )
            })
            .collect();
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

struct Compiler<'a> {
    doc: &'a Document,
    stats: &'a Stats,
    rules: &'a mut Vec<Arc<Rule>>,
    /// The path from the root to the level being compiled.
    levels: Vec<(String, Option<String>, bool)>,
}

impl Compiler<'_> {
    fn err(&self, kind: ConfigErrorKind, path: &str, msg: impl Into<String>) -> ConfigError {
        ConfigError::new(kind, &self.doc.name, path, msg)
    }

    fn level(
        &mut self,
        children: &mut Children,
        descriptors: &[DescriptorConfig],
        parent_key: &str,
        path: &str,
    ) -> Result<(), ConfigError> {
        for (i, dc) in descriptors.iter().enumerate() {
            let path = format!("{path}[{i}]");
            if dc.key.is_empty() {
                return Err(self.err(ConfigErrorKind::EmptyKey, &path, "descriptor has empty key"));
            }
            let mut final_key = dc.key.clone();
            if !dc.value.is_empty() {
                final_key.push('_');
                final_key.push_str(&dc.value);
            }
            let full_key = format!("{parent_key}{final_key}");
            if children.by_key.contains_key(final_key.as_str()) {
                return Err(self.err(
                    ConfigErrorKind::DuplicateCompositeKey,
                    &path,
                    format!("duplicate descriptor composite key '{full_key}'"),
                ));
            }
            let wildcard = dc.value.contains('*');
            if dc.share_threshold && !wildcard {
                return Err(self.err(
                    ConfigErrorKind::ShareThresholdWithoutWildcard,
                    &path,
                    format!(
                        "share_threshold can only be used with wildcard values (containing '*'), but found key '{final_key}'"
                    ),
                ));
            }
            self.levels.push((
                final_key.clone(),
                dc.share_threshold.then(|| dc.value.clone()),
                dc.value_to_metric,
            ));
            let mut node = Node::default();
            if let Some(rl) = &dc.rate_limit {
                node.rule = Some(self.rule(dc, rl, &full_key, &path)?);
            }
            self.level(
                &mut node.children,
                &dc.descriptors,
                &format!("{full_key}."),
                &format!("{path}.descriptors"),
            )?;
            self.levels.pop();
            if wildcard {
                children.wildcards.push(final_key.clone().into_boxed_str());
            }
            children.by_key.insert(final_key.into_boxed_str(), node);
        }
        children.key_only =
            children.wildcards.is_empty() && children.by_key.keys().all(|k| !k.contains('_'));
        Ok(())
    }

    fn rule(
        &mut self,
        dc: &DescriptorConfig,
        rl: &crate::config::RateLimitConfig,
        full_key: &str,
        path: &str,
    ) -> Result<Arc<Rule>, ConfigError> {
        let rl_path = format!("{path}.rate_limit");
        let unit = Unit::parse(&rl.unit);
        if rl.unlimited {
            if unit.is_some() {
                return Err(self.err(
                    ConfigErrorKind::UnitWhenUnlimited,
                    &rl_path,
                    "should not specify rate limit unit when unlimited",
                ));
            }
        } else if unit.is_none() {
            return Err(self.err(
                ConfigErrorKind::InvalidUnit,
                &rl_path,
                format!("invalid rate limit unit '{}'", rl.unit),
            ));
        }
        for (j, r) in rl.replaces.iter().enumerate() {
            let p = format!("{rl_path}.replaces[{j}]");
            if r.is_empty() {
                return Err(self.err(
                    ConfigErrorKind::EmptyReplaces,
                    &p,
                    "should not have an empty replaces entry",
                ));
            }
            if *r == rl.name {
                return Err(self.err(
                    ConfigErrorKind::ReplacesSelf,
                    &p,
                    "replaces should not contain name of same descriptor",
                ));
            }
        }
        let levels: Vec<Level> = self
            .levels
            .iter()
            .map(|(part, shared, v2m)| Level {
                config_part: part.clone(),
                shared_value: shared.clone(),
                value_to_metric: *v2m,
            })
            .collect();
        let dynamic_stats = dc.detailed_metric
            || levels
                .iter()
                .any(|l| l.value_to_metric && l.shared_value.is_none());
        let shares = levels.iter().any(|l| l.shared_value.is_some());
        let stats_key = sanitize_stat_name(full_key);
        let rule = Arc::new(Rule {
            stats: self.stats.rule(&stats_key),
            full_key: full_key.to_owned(),
            requests_per_unit: rl.requests_per_unit,
            unit: if rl.unlimited { None } else { unit },
            unlimited: rl.unlimited,
            shadow_mode: dc.shadow_mode,
            quota_mode: dc.quota_mode,
            detailed_metric: dc.detailed_metric,
            name: rl.name.clone(),
            replaces: rl.replaces.clone(),
            metadata: dc.metadata.clone(),
            levels,
            dynamic_stats,
            shares,
        });
        self.rules.push(rule.clone());
        Ok(rule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(wildcard_match("k_foo*", "k_foobar"));
        assert!(wildcard_match("k_foo*", "k_foo"));
        assert!(!wildcard_match("k_foo*", "k_fo"));
        assert!(wildcard_match("k_*bar", "k_foobar"));
        assert!(wildcard_match("k_a*b*c", "k_aXXbYYc"));
        assert!(!wildcard_match("k_a*b*c", "k_aXXcYYb"));
        assert!(wildcard_match("k_*", "k_"));
        assert!(!wildcard_match("k_ab*ba", "k_aba"));
        assert!(wildcard_match("k_ab*ba", "k_abba"));
        assert!(wildcard_match("k_x", "k_x"));
    }

    fn rules(yaml: &str) -> RuleSet {
        RuleSet::from_yaml([("t.yaml", yaml)], false, &Stats::default()).unwrap()
    }

    fn entries(pairs: &[(&str, &str)]) -> Vec<Entry> {
        pairs.iter().map(|(k, v)| Entry::new(*k, *v)).collect()
    }

    fn matched(r: &RuleSet, pairs: &[(&str, &str)]) -> Option<String> {
        match r.find("d", &entries(pairs), &mut String::new()) {
            Match::Rule(rule) => Some(rule.full_key.clone()),
            Match::NoRule | Match::UnknownDomain => None,
        }
    }

    /// Upstream looks up `key + "_" + value` first, so a key-only rule whose name holds a
    /// `_` matches an entry split elsewhere. Such a level must not take the shortcut that
    /// skips that lookup.
    #[test]
    fn key_value_lookup_still_reaches_names_with_underscores() {
        let r = rules(
            "domain: d\ndescriptors:\n  - key: a_b\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: c\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
        );
        assert_eq!(matched(&r, &[("a", "b")]).as_deref(), Some("d.a_b"));
        assert_eq!(matched(&r, &[("a_b", "x")]).as_deref(), Some("d.a_b"));
        assert_eq!(matched(&r, &[("c", "anything")]).as_deref(), Some("d.c"));
        assert_eq!(matched(&r, &[("a", "c")]), None);
    }

    /// Levels switch from comparing names in a row to a hash index above 8 names; both
    /// find every name, and duplicates are refused on either side of the switch.
    #[test]
    fn wide_levels_find_every_name() {
        let mut yaml = String::from("domain: d\ndescriptors:\n");
        for i in 0..20 {
            yaml.push_str(&format!(
                "  - key: k{i}\n    rate_limit: {{unit: second, requests_per_unit: {}}}\n",
                i + 1
            ));
        }
        let r = rules(&yaml);
        for i in 0..20 {
            let key = format!("k{i}");
            assert_eq!(matched(&r, &[(&key, "v")]), Some(format!("d.{key}")));
        }
        assert_eq!(matched(&r, &[("k20", "v")]), None);
        for dup in [3, 15] {
            let text = format!(
                "{yaml}  - key: k{dup}\n    rate_limit: {{unit: second, requests_per_unit: 1}}\n"
            );
            let e = RuleSet::from_yaml([("t.yaml", text.as_str())], false, &Stats::default())
                .unwrap_err();
            assert!(
                e.to_string().contains("duplicate descriptor composite key"),
                "{e}"
            );
        }
    }

    /// Domains live in the same kind of map: many of them, each found.
    #[test]
    fn many_domains_each_found() {
        let docs: Vec<(String, String)> = (0..12)
            .map(|i| {
                (
                    format!("d{i}.yaml"),
                    format!("domain: dom{i}\ndescriptors:\n  - key: k\n    rate_limit: {{unit: second, requests_per_unit: 1}}\n"),
                )
            })
            .collect();
        let r = RuleSet::from_yaml(
            docs.iter().map(|(n, t)| (n.as_str(), t.as_str())),
            false,
            &Stats::default(),
        )
        .unwrap();
        for i in 0..12 {
            let m = r.find(
                &format!("dom{i}"),
                &entries(&[("k", "v")]),
                &mut String::new(),
            );
            assert!(matches!(m, Match::Rule(_)), "dom{i}");
        }
        assert!(matches!(
            r.find("dom12", &entries(&[("k", "v")]), &mut String::new()),
            Match::UnknownDomain
        ));
    }
}
