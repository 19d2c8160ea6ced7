//! Compiling one document's descriptor tree into the rule set's matching tree and rules.

use std::sync::Arc;

use super::*;
use crate::algorithm::{Algorithm, AlgorithmName, Bucket};
use crate::config::RateLimitConfig;
use crate::key_id::KeyIdState;

/// Walks a document's descriptors level by level, building the matching tree.
pub(super) struct Compiler<'a> {
    pub(super) doc: &'a Document,
    pub(super) stats: &'a Stats,
    pub(super) rules: &'a mut Vec<Arc<Rule>>,
    /// The path from the root to the level being compiled.
    pub(super) levels: Vec<(String, Option<String>, bool)>,
    /// The descriptor key of the root level on that path.
    pub(super) root_key: String,
}

impl Compiler<'_> {
    fn err(&self, kind: ConfigErrorKind, path: &str, msg: impl Into<String>) -> ConfigError {
        ConfigError::new(kind, &self.doc.name, path, msg)
    }

    pub(super) fn level(
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
            if self.levels.is_empty() {
                self.root_key.clone_from(&dc.key);
            }
            self.levels.push((
                final_key.clone(),
                dc.share_threshold.then(|| dc.value.clone()),
                dc.value_to_metric,
            ));
            let mut node = Node::default();
            match (&dc.rate_limit, &dc.rate_limits) {
                (Some(_), Some(_)) => {
                    return Err(self.err(
                        ConfigErrorKind::RateLimitAndRateLimits,
                        &path,
                        "rate_limit and rate_limits cannot both be set",
                    ));
                }
                (Some(rl), None) => {
                    let rl_path = format!("{path}.rate_limit");
                    node.rule =
                        Some(self.rule(dc, std::slice::from_ref(rl), &[rl_path], &full_key)?);
                }
                (None, Some(list)) => {
                    let paths: Vec<String> = (0..list.len())
                        .map(|j| format!("{path}.rate_limits[{j}]"))
                        .collect();
                    if list.is_empty() {
                        return Err(self.err(
                            ConfigErrorKind::InvalidRateLimits,
                            &format!("{path}.rate_limits"),
                            "rate_limits must have at least one entry",
                        ));
                    }
                    node.rule = Some(self.rule(dc, list, &paths, &full_key)?);
                }
                (None, None) => {}
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
        children.index_value_keys();
        Ok(())
    }

    /// The rule of a descriptor entry with `limits` (its `rate_limit`, or its
    /// `rate_limits` list), each at the matching entry of `paths`.
    fn rule(
        &mut self,
        dc: &DescriptorConfig,
        limits: &[RateLimitConfig],
        paths: &[String],
        full_key: &str,
    ) -> Result<Arc<Rule>, ConfigError> {
        let joint = dc.rate_limits.is_some() && limits.len() > 1;
        let mut compiled = Vec::with_capacity(limits.len());
        let mut replaces = Vec::new();
        let mut unlimited = false;
        for (j, (rl, rl_path)) in limits.iter().zip(paths).enumerate() {
            if dc.rate_limits.is_some() && rl.unlimited {
                return Err(self.err(
                    ConfigErrorKind::InvalidRateLimits,
                    rl_path,
                    "unlimited cannot be an entry of rate_limits; use rate_limit: {unlimited: true}",
                ));
            }
            if dc.rate_limits.is_some()
                && !rl.name.is_empty()
                && limits[..j].iter().any(|o| o.name == rl.name)
            {
                return Err(self.err(
                    ConfigErrorKind::DuplicateLimitName,
                    rl_path,
                    format!(
                        "rate limit name '{}' is used twice in one rate_limits list",
                        rl.name
                    ),
                ));
            }
            self.check_replaces(rl, rl_path)?;
            replaces.extend(rl.replaces.iter().cloned());
            unlimited = rl.unlimited;
            if let Some(l) = self.limit(rl, rl_path)? {
                compiled.push(l);
            }
        }
        if joint
            || compiled
                .iter()
                .any(|l| l.algorithm.name() != AlgorithmName::FixedWindow)
        {
            tag_keys(&mut compiled, joint);
        }
        for l in &mut compiled {
            let window = l.algorithm.fixed_window_seconds();
            let depth = self.levels.len();
            let mut head =
                KeyIdState::key_parts(l.joint, window, depth, &self.doc.domain, &l.key_tag);
            head.bytes(self.root_key.as_bytes());
            l.id_head = Some(head);
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
            name: limits.first().map(|l| l.name.clone()).unwrap_or_default(),
            limits: compiled.into_boxed_slice(),
            unlimited,
            shadow_mode: dc.shadow_mode,
            quota_mode: dc.quota_mode,
            detailed_metric: dc.detailed_metric,
            replaces,
            metadata: dc.metadata.clone(),
            levels,
            dynamic_stats,
            shares,
            stem_head: format!("{}_{}_", self.doc.domain, self.root_key).into_boxed_str(),
            head_key: self.root_key.as_str().into(),
            unlimited_requests: match limits.first() {
                Some(l) if unlimited => l.requests_per_unit,
                _ => 0,
            },
        });
        self.rules.push(rule.clone());
        Ok(rule)
    }

    /// Upstream's checks of a `replaces` list.
    fn check_replaces(&self, rl: &RateLimitConfig, rl_path: &str) -> Result<(), ConfigError> {
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
        Ok(())
    }

    /// One limit, checked; `None` for an unlimited one.
    fn limit(&self, rl: &RateLimitConfig, rl_path: &str) -> Result<Option<Limit>, ConfigError> {
        let unit = Unit::parse(&rl.unit);
        if rl.unlimited {
            if unit.is_some() {
                return Err(self.err(
                    ConfigErrorKind::UnitWhenUnlimited,
                    rl_path,
                    "should not specify rate limit unit when unlimited",
                ));
            }
            return Ok(None);
        }
        let Some(unit) = unit else {
            return Err(self.err(
                ConfigErrorKind::InvalidUnit,
                rl_path,
                format!("invalid rate limit unit '{}'", rl.unit),
            ));
        };
        let name = if rl.algorithm.is_empty() {
            AlgorithmName::FixedWindow
        } else {
            AlgorithmName::parse(&rl.algorithm).ok_or_else(|| {
                self.err(
                    ConfigErrorKind::UnknownAlgorithm,
                    &format!("{rl_path}.algorithm"),
                    format!(
                        "unknown rate limit algorithm '{}' (expected fixed_window, sliding_window or token_bucket)",
                        rl.algorithm
                    ),
                )
            })?
        };
        for (field, value) in [("unit_multiplier", rl.unit_multiplier), ("burst", rl.burst)] {
            if value == Some(0) {
                return Err(self.err(
                    ConfigErrorKind::ZeroLimitField,
                    &format!("{rl_path}.{field}"),
                    format!("{field} must be at least 1"),
                ));
            }
        }
        if rl.burst.is_some() && name != AlgorithmName::TokenBucket {
            return Err(self.err(
                ConfigErrorKind::BurstWithoutTokenBucket,
                &format!("{rl_path}.burst"),
                "burst is only valid with algorithm token_bucket",
            ));
        }
        let multiplier = rl.unit_multiplier.unwrap_or(1);
        let seconds = unit.seconds().saturating_mul(u64::from(multiplier));
        let algorithm = match name {
            AlgorithmName::FixedWindow => Algorithm::FixedWindow { seconds },
            AlgorithmName::SlidingWindow => Algorithm::SlidingWindow { seconds },
            AlgorithmName::TokenBucket => Algorithm::TokenBucket(Bucket::new(
                rl.requests_per_unit,
                seconds,
                rl.burst.unwrap_or(rl.requests_per_unit),
            )),
        };
        Ok(Some(Limit {
            requests_per_unit: rl.requests_per_unit,
            unit,
            unit_multiplier: multiplier,
            burst: rl.burst,
            algorithm,
            name: rl.name.clone(),
            key_tag: String::new(),
            joint: false,
            id_head: None,
        }))
    }
}

/// Gives each limit of a rule its key tag: the algorithm and the window length, and the
/// limit's position when two would otherwise share one. A lone fixed window keeps
/// upstream's key (no tag).
fn tag_keys(limits: &mut [Limit], joint: bool) {
    let tags: Vec<String> = limits
        .iter()
        .map(|l| {
            let short = match l.algorithm.name() {
                AlgorithmName::FixedWindow => "fw",
                AlgorithmName::SlidingWindow => "sw",
                AlgorithmName::TokenBucket => "tb",
            };
            format!(
                "{short}{}",
                l.unit
                    .seconds()
                    .saturating_mul(u64::from(l.unit_multiplier))
            )
        })
        .collect();
    for (i, l) in limits.iter_mut().enumerate() {
        let mut tag = tags[i].clone();
        if tags.iter().filter(|t| **t == tags[i]).count() > 1 {
            tag = format!("{tag}.{i}");
        }
        // A window's start follows the tag: a separator keeps the two apart.
        if l.algorithm.name() == AlgorithmName::FixedWindow {
            tag.push('_');
        }
        l.key_tag = tag;
        l.joint = joint;
    }
}
