//! Pass two of parsing a document: typed reads of the validated YAML tree, with errors
//! that carry the path of the offending field.

use serde_yaml::Value;

use super::*;

/// Pass two: typed reads with path-carrying errors.
pub(super) struct Reader<'a> {
    pub(super) file: &'a str,
}

impl Reader<'_> {
    fn type_error(&self, path: &str, field: &str, expected: &str, found: &Value) -> ConfigError {
        let mut p = path.to_owned();
        push_key(&mut p, field);
        ConfigError::new(
            ConfigErrorKind::Load,
            self.file,
            &p,
            format!(
                "error loading config file: cannot read {field}: expected {expected}, found {}",
                describe(found)
            ),
        )
    }

    pub(super) fn string(
        &self,
        m: &serde_yaml::Mapping,
        field: &str,
        path: &str,
    ) -> Result<String, ConfigError> {
        match m.get(field) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            // Go's YAML decoder stores any scalar's text in a string field.
            Some(v @ (Value::Bool(_) | Value::Number(_))) => Ok(scalar_text(v)),
            Some(other) => Err(self.type_error(path, field, "a string", other)),
        }
    }

    fn boolean(
        &self,
        m: &serde_yaml::Mapping,
        field: &str,
        path: &str,
    ) -> Result<bool, ConfigError> {
        match m.get(field) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(self.type_error(path, field, "true or false", other)),
        }
    }

    pub(super) fn descriptors(
        &self,
        m: &serde_yaml::Mapping,
        path: &str,
    ) -> Result<Vec<DescriptorConfig>, ConfigError> {
        let items = match m.get("descriptors") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Sequence(items)) => items,
            Some(other) => return Err(self.type_error(path, "descriptors", "a list", other)),
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let mut p = path.to_owned();
            push_key(&mut p, "descriptors");
            p.push_str(&format!("[{i}]"));
            // Pass one guarantees every element is a mapping.
            let Value::Mapping(dm) = item else {
                return Err(self.type_error(path, "descriptors", "a list of mappings", item));
            };
            out.push(self.descriptor(dm, &p)?);
        }
        Ok(out)
    }

    fn descriptor(
        &self,
        m: &serde_yaml::Mapping,
        path: &str,
    ) -> Result<DescriptorConfig, ConfigError> {
        let rate_limit = match m.get("rate_limit") {
            None | Some(Value::Null) => None,
            Some(Value::Mapping(rl)) => {
                let mut p = path.to_owned();
                push_key(&mut p, "rate_limit");
                Some(self.rate_limit(rl, &p)?)
            }
            Some(other) => return Err(self.type_error(path, "rate_limit", "a mapping", other)),
        };
        let rate_limits = match m.get("rate_limits") {
            None | Some(Value::Null) => None,
            Some(Value::Sequence(items)) => {
                let mut limits = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let mut p = path.to_owned();
                    push_key(&mut p, &format!("rate_limits[{i}]"));
                    let Value::Mapping(rl) = item else {
                        return Err(self.type_error(
                            path,
                            "rate_limits",
                            "a list of mappings",
                            item,
                        ));
                    };
                    limits.push(self.rate_limit(rl, &p)?);
                }
                Some(limits)
            }
            Some(other) => return Err(self.type_error(path, "rate_limits", "a list", other)),
        };
        let metadata = match m.get("metadata") {
            None | Some(Value::Null) => None,
            Some(v) => {
                let mut p = path.to_owned();
                push_key(&mut p, "metadata");
                match yaml_to_json(v) {
                    Ok(serde_json::Value::Object(o)) => Some(o),
                    Ok(_) => {
                        return Err(ConfigError::new(
                            ConfigErrorKind::Metadata,
                            self.file,
                            &p,
                            "error parsing metadata: metadata must be a mapping",
                        ));
                    }
                    Err(e) => {
                        return Err(ConfigError::new(
                            ConfigErrorKind::Metadata,
                            self.file,
                            &p,
                            format!("error parsing metadata: {e}"),
                        ));
                    }
                }
            }
        };
        Ok(DescriptorConfig {
            key: self.string(m, "key", path)?,
            value: self.string(m, "value", path)?,
            rate_limit,
            rate_limits,
            descriptors: self.descriptors(m, path)?,
            shadow_mode: self.boolean(m, "shadow_mode", path)?,
            quota_mode: self.boolean(m, "quota_mode", path)?,
            detailed_metric: self.boolean(m, "detailed_metric", path)?,
            value_to_metric: self.boolean(m, "value_to_metric", path)?,
            share_threshold: self.boolean(m, "share_threshold", path)?,
            metadata,
        })
    }

    fn rate_limit(
        &self,
        m: &serde_yaml::Mapping,
        path: &str,
    ) -> Result<RateLimitConfig, ConfigError> {
        let requests_per_unit = self.u32_field(m, "requests_per_unit", path)?.unwrap_or(0);
        let replaces = match m.get("replaces") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Sequence(items)) => {
                let mut names = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let mut p = path.to_owned();
                    push_key(&mut p, &format!("replaces[{i}]"));
                    match item {
                        Value::Mapping(r) => names.push(self.string(r, "name", &p)?),
                        other => {
                            return Err(self.type_error(
                                path,
                                "replaces",
                                "a list of mappings",
                                other,
                            ));
                        }
                    }
                }
                names
            }
            Some(other) => return Err(self.type_error(path, "replaces", "a list", other)),
        };
        Ok(RateLimitConfig {
            unit: self.string(m, "unit", path)?,
            requests_per_unit,
            unlimited: self.boolean(m, "unlimited", path)?,
            name: self.string(m, "name", path)?,
            replaces,
            unit_multiplier: self.u32_field(m, "unit_multiplier", path)?,
            algorithm: self.string(m, "algorithm", path)?,
            burst: self.u32_field(m, "burst", path)?,
        })
    }

    /// An optional unsigned 32-bit field.
    fn u32_field(
        &self,
        m: &serde_yaml::Mapping,
        field: &str,
        path: &str,
    ) -> Result<Option<u32>, ConfigError> {
        match m.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64().and_then(|v| u32::try_from(v).ok()) {
                Some(v) => Ok(Some(v)),
                None => Err(self.type_error(
                    path,
                    field,
                    "an unsigned 32-bit integer",
                    &Value::Number(n.clone()),
                )),
            },
            Some(other) => Err(self.type_error(path, field, "an unsigned 32-bit integer", other)),
        }
    }
}

/// Converts YAML metadata to JSON values, which is what `google.protobuf.Struct` can hold.
fn yaml_to_json(v: &Value) -> Result<serde_json::Value, String> {
    Ok(match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        // Integers stay integers so that they print as `1`, as protojson does for Struct.
        Value::Number(n) if n.is_i64() => serde_json::Value::from(n.as_i64().unwrap_or_default()),
        Value::Number(n) if n.is_u64() => serde_json::Value::from(n.as_u64().unwrap_or_default()),
        Value::Number(n) => {
            let f = n
                .as_f64()
                .ok_or_else(|| format!("unsupported number {n}"))?;
            if !f.is_finite() {
                return Err(format!("unsupported number {n}"));
            }
            serde_json::Number::from_f64(f)
                .map(serde_json::Value::Number)
                .ok_or_else(|| format!("unsupported number {n}"))?
        }
        Value::String(s) => serde_json::Value::String(s.clone()),
        Value::Sequence(items) => {
            serde_json::Value::Array(items.iter().map(yaml_to_json).collect::<Result<_, _>>()?)
        }
        Value::Mapping(m) => {
            let mut o = serde_json::Map::new();
            for (k, v) in m {
                let Value::String(k) = k else {
                    return Err(format!("key is not a string: {}", scalar_text(k)));
                };
                o.insert(k.clone(), yaml_to_json(v)?);
            }
            serde_json::Value::Object(o)
        }
        Value::Tagged(t) => return Err(format!("unsupported tag {}", t.tag)),
    })
}
