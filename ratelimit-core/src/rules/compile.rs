//! Compiling one document's descriptor tree into the rule set's matching tree and rules.

use std::sync::Arc;

use super::*;

/// Walks a document's descriptors level by level, building the matching tree.
pub(super) struct Compiler<'a> {
    pub(super) doc: &'a Document,
    pub(super) stats: &'a Stats,
    pub(super) rules: &'a mut Vec<Arc<Rule>>,
    /// The path from the root to the level being compiled.
    pub(super) levels: Vec<(String, Option<String>, bool)>,
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
