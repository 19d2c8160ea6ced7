//! Matching an RLQS bucket id (a map of names to values, unordered) against a domain's
//! descriptor tree.
//!
//! A request descriptor is an ordered list, a bucket id is not, so the tree chooses the
//! order: at each level, the map entries not used yet that lead somewhere from that level
//! are tried, each with RLS's lookup (`key_value`, then the wildcards in config order,
//! then the bare `key`). Candidates are tried by that precedence first (an exact value
//! before a wildcard before a key alone), then by name, and a path that dead-ends is
//! backed out of. A map of N entries matches only rules N levels deep, as a descriptor of
//! N entries does.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Children, DomainView, Match, Node, Rule, RuleSet, wildcard_match};

/// Bucket ids deeper than this match nothing (the search tries orders of the entries; a
/// descriptor tree is rarely more than a few levels deep).
pub const MAX_BUCKET_ENTRIES: usize = 8;

impl RuleSet {
    /// The rule for an RLQS bucket id in `domain`: see the module's documentation.
    pub fn find_bucket(&self, domain: &str, bucket: &BTreeMap<String, String>) -> Match<'_> {
        self.find_bucket_path(domain, bucket)
            .map_or(Match::UnknownDomain, |found| {
                found.map_or(Match::NoRule, |(rule, _)| Match::Rule(rule))
            })
    }

    /// The budget a bucket draws on: the bucket itself, unless its rule has
    /// `share_threshold` levels, whose values are replaced by the rule's pattern (every
    /// bucket matching the pattern shares one budget, as RLS shares one counter). `None`
    /// when no rule matches.
    pub fn bucket_pool(
        &self,
        domain: &str,
        bucket: &BTreeMap<String, String>,
    ) -> Option<BTreeMap<String, String>> {
        let (rule, path) = self.find_bucket_path(domain, bucket)??;
        let mut pool = bucket.clone();
        if rule.shares {
            let names: Vec<&String> = bucket.keys().collect();
            for (level, &i) in rule.levels.iter().zip(&path) {
                if let Some(pattern) = &level.shared_value {
                    pool.insert(names[i].clone(), pattern.clone());
                }
            }
        }
        Some(pool)
    }

    /// The matched rule and, per level from the root, the index (in name order) of the
    /// bucket entry used there. `None` for an unknown domain, `Some(None)` for no rule.
    #[allow(clippy::type_complexity)]
    fn find_bucket_path(
        &self,
        domain: &str,
        bucket: &BTreeMap<String, String>,
    ) -> Option<Option<(&Arc<Rule>, Vec<usize>)>> {
        let view = self.domain(domain)?;
        if bucket.is_empty() || bucket.len() > MAX_BUCKET_ENTRIES {
            return Some(None);
        }
        let entries: Vec<(&str, &str)> = bucket
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut used = vec![false; entries.len()];
        let mut path = Vec::with_capacity(entries.len());
        let mut scratch = String::new();
        let rule = search(&view.0.root, &entries, &mut used, &mut path, &mut scratch);
        Some(rule.map(|r| (r, path)))
    }
}

impl DomainView<'_> {
    /// How one entry is found at `level`, with RLS's precedence: 0 exact `key_value`,
    /// 1 wildcard, 2 bare key.
    fn child_ranked<'a>(
        level: &'a Children,
        key: &str,
        value: &str,
        scratch: &mut String,
    ) -> Option<(u8, &'a Node)> {
        if !level.bare_key_only(key) {
            scratch.clear();
            scratch.push_str(key);
            scratch.push('_');
            scratch.push_str(value);
            if let Some(n) = level.by_key.get(scratch.as_str()) {
                return Some((0, n));
            }
            if let Some(n) = level
                .wildcards
                .iter()
                .find(|p| wildcard_match(p, scratch))
                .and_then(|p| level.by_key.get(p))
            {
                return Some((1, n));
            }
        }
        level.by_key.get(key).map(|n| (2, n))
    }
}

/// Depth-first over the tree, using each entry once; `path` ends holding the entries'
/// indices in level order when a rule is found.
fn search<'a>(
    level: &'a Children,
    entries: &[(&str, &str)],
    used: &mut [bool],
    path: &mut Vec<usize>,
    scratch: &mut String,
) -> Option<&'a Arc<Rule>> {
    let left = entries.len() - path.len();
    // Entries are in name order already (a BTreeMap's), so a stable sort by rank keeps
    // names in order within a rank.
    let mut candidates: Vec<(u8, usize, &'a Node)> = entries
        .iter()
        .enumerate()
        .filter(|(i, _)| !used[*i])
        .filter_map(|(i, (k, v))| {
            DomainView::child_ranked(level, k, v, scratch).map(|(rank, n)| (rank, i, n))
        })
        .collect();
    candidates.sort_by_key(|c| c.0);
    for (_, i, node) in candidates {
        if left == 1 {
            if let Some(rule) = node.rule.as_ref() {
                path.push(i);
                return Some(rule);
            }
            continue;
        }
        if node.children.by_key.is_empty() {
            continue;
        }
        used[i] = true;
        path.push(i);
        let found = search(&node.children, entries, used, path, scratch);
        if found.is_some() {
            return found;
        }
        path.pop();
        used[i] = false;
    }
    None
}
