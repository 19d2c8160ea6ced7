//! Pass two of parsing a document: typed reads of the validated YAML tree, with errors
//! that carry the path of the offending field.

use serde_yaml::Value;

use super::raw::{RawDescriptor, RawLimit, nth};
use super::*;

/// Pass two: typed reads with path-carrying errors.
pub(super) struct Reader<'a> {
    file: &'a str,
    /// Whether a string field took a resolved scalar's text for want of the written one.
    resolved_text: std::cell::Cell<bool>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(file: &'a str) -> Self {
        Reader {
            file,
            resolved_text: std::cell::Cell::new(false),
        }
    }

    /// Whether a string field held a number or a boolean whose written text was not given.
    pub(super) fn resolved_text_used(&self) -> bool {
        self.resolved_text.get()
    }

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

    /// A string field; `written` is its text in the document, when the mirror has it.
    pub(super) fn string(
        &self,
        m: &serde_yaml::Mapping,
        field: &str,
        path: &str,
        written: Option<&str>,
    ) -> Result<String, ConfigError> {
        match m.get(field) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            // Go's YAML decoder stores any scalar's text, as written, in a string field.
            Some(v @ (Value::Bool(_) | Value::Number(_))) => Ok(match written {
                Some(text) => text.to_owned(),
                None => {
                    self.resolved_text.set(true);
                    scalar_text(v)
                }
            }),
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
            Some(Value::String(s)) if yaml11_bool(s).is_some() => Ok(yaml11_bool(s) == Some(true)),
            Some(other) => Err(self.type_error(path, field, "true or false", other)),
        }
    }

    pub(super) fn descriptors(
        &self,
        m: &serde_yaml::Mapping,
        path: &str,
        written: Option<&Vec<RawDescriptor>>,
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
            out.push(self.descriptor(dm, &p, nth(written, i))?);
        }
        Ok(out)
    }

    fn descriptor(
        &self,
        m: &serde_yaml::Mapping,
        path: &str,
        written: Option<&RawDescriptor>,
    ) -> Result<DescriptorConfig, ConfigError> {
        let rate_limit = match m.get("rate_limit") {
            None | Some(Value::Null) => None,
            Some(Value::Mapping(rl)) => {
                let mut p = path.to_owned();
                push_key(&mut p, "rate_limit");
                let written = written.and_then(|w| w.rate_limit.as_ref());
                Some(self.rate_limit(rl, &p, written)?)
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
                    let listed = written.and_then(|w| nth(w.rate_limits.as_ref(), i));
                    limits.push(self.rate_limit(rl, &p, listed)?);
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
            key: self.string(m, "key", path, written.and_then(|w| w.key.as_deref()))?,
            value: self.string(m, "value", path, written.and_then(|w| w.value.as_deref()))?,
            rate_limit,
            rate_limits,
            descriptors: self.descriptors(m, path, written.and_then(|w| w.descriptors.as_ref()))?,
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
        written: Option<&RawLimit>,
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
                        Value::Mapping(r) => {
                            let listed = written.and_then(|w| nth(w.replaces.as_ref(), i));
                            let name = listed.and_then(|r| r.name.as_deref());
                            names.push(self.string(r, "name", &p, name)?);
                        }
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
        let text = |f: fn(&RawLimit) -> &Option<String>| written.and_then(|w| f(w).as_deref());
        Ok(RateLimitConfig {
            unit: self.string(m, "unit", path, text(|w| &w.unit))?,
            requests_per_unit,
            unlimited: self.boolean(m, "unlimited", path)?,
            name: self.string(m, "name", path, text(|w| &w.name))?,
            replaces,
            unit_multiplier: self.u32_field(m, "unit_multiplier", path)?,
            algorithm: self.string(m, "algorithm", path, text(|w| &w.algorithm))?,
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
            // yaml.v2 reads `1_000` and `010` (octal) as integers; serde_yaml leaves them text.
            Some(Value::String(s)) if go_int(s).is_some() => {
                match go_int(s).and_then(|v| u32::try_from(v).ok()) {
                    Some(v) => Ok(Some(v)),
                    None => Err(self.type_error(
                        path,
                        field,
                        "an unsigned 32-bit integer",
                        &Value::String(s.clone()),
                    )),
                }
            }
            Some(other) => Err(self.type_error(path, field, "an unsigned 32-bit integer", other)),
        }
    }
}

/// A plain scalar yaml.v2 resolves to a boolean (YAML 1.1's spellings) and serde_yaml
/// (YAML 1.2) leaves text.
fn yaml11_bool(s: &str) -> Option<bool> {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

/// An integer as yaml.v2 resolves one: a sign or digit first, `_` dropped, then Go's
/// `strconv.ParseInt(s, 0, 64)`: `0x`, `0o`, `0b` prefixes, and a leading `0` for octal.
fn go_int(s: &str) -> Option<i128> {
    if !s.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-') {
        return None;
    }
    let plain: String = s.chars().filter(|&c| c != '_').collect();
    let (negative, digits) = match plain.as_bytes().first()? {
        b'-' => (true, &plain[1..]),
        b'+' => (false, &plain[1..]),
        _ => (false, &plain[..]),
    };
    let lower = digits.to_ascii_lowercase();
    let (radix, body) = if let Some(b) = lower.strip_prefix("0x") {
        (16, b)
    } else if let Some(b) = lower.strip_prefix("0o") {
        (8, b)
    } else if let Some(b) = lower.strip_prefix("0b") {
        (2, b)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, &lower[..])
    };
    if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(body, radix).ok()?;
    Some(if negative { -magnitude } else { magnitude })
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
