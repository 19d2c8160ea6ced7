//! The YAML rule document: parsing, upstream-compatible validation, and the typed model.
//!
//! Validation runs in the same two passes as upstream, so the same documents are accepted
//! and rejected: first every mapping key anywhere in the document is checked against the
//! list of known keys (catching typos such as `unlimied`), then the typed fields are read.
//! Every error names the file and, unlike upstream, the path of the offending node.

use std::fmt;

use serde_yaml::Value;

use crate::prescan::{self, Limits};

/// Keys accepted anywhere in a document (upstream checks them without regard to position).
const VALID_KEYS: [&str; 16] = [
    "domain",
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "unit",
    "requests_per_unit",
    "unlimited",
    "shadow_mode",
    "quota_mode",
    "name",
    "replaces",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];

/// The family of a configuration error; one per upstream error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// YAML syntax error or a value of the wrong type.
    Load,
    /// A mapping key that is not a string.
    KeyNotString,
    /// A key outside the known list (a typo).
    UnknownKey,
    /// A list whose elements are not mappings.
    ListOfNonMaps,
    /// A value of an unsupported type, such as a float.
    CheckingConfig,
    /// `domain` missing or empty.
    EmptyDomain,
    /// The same domain in two files without `MERGE_DOMAIN_CONFIG`.
    DuplicateDomain,
    /// A descriptor without `key`.
    EmptyKey,
    /// The same `key` or `key_value` twice at one level.
    DuplicateCompositeKey,
    /// `unlimited: true` together with a valid unit.
    UnitWhenUnlimited,
    /// A missing or unknown unit on a limited rule.
    InvalidUnit,
    /// A `replaces` entry with an empty name.
    EmptyReplaces,
    /// A rule that replaces itself.
    ReplacesSelf,
    /// `share_threshold` on a value without `*`.
    ShareThresholdWithoutWildcard,
    /// `metadata` that cannot be represented as a JSON-like struct.
    Metadata,
    /// A document larger or more deeply nested than its [`Limits`], refused unparsed.
    Limits,
}

/// Why a rule document was rejected.
///
/// `Display` gives upstream's text, `"<file>: <message>"`, followed by the path of the
/// offending node when there is one, e.g.
/// `config.app.yaml: config error, unknown key 'unlimied' (at descriptors[0].rate_limit)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The error family.
    pub kind: ConfigErrorKind,
    /// The document name (for files, upstream's runtime key such as `config.app.yaml`).
    pub file: String,
    /// Where in the document, e.g. `descriptors[1].rate_limit.unit`; empty for the whole file.
    pub path: String,
    /// Upstream's message text.
    pub message: String,
    /// 1-based line, when the YAML parser reported one.
    pub line: Option<usize>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.message)?;
        if !self.path.is_empty() {
            write!(f, " (at {})", self.path)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    pub(crate) fn new(
        kind: ConfigErrorKind,
        file: &str,
        path: &str,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            kind,
            file: file.to_owned(),
            path: path.to_owned(),
            message: message.into(),
            line: None,
        }
    }
}

/// One parsed rule document (one file, or one xDS resource).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Document {
    /// Name used in error messages.
    pub name: String,
    /// The domain the descriptors belong to.
    pub domain: String,
    /// Top-level descriptor entries.
    pub descriptors: Vec<DescriptorConfig>,
}

/// A descriptor entry of a rule document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DescriptorConfig {
    /// The key; must not be empty.
    pub key: String,
    /// The value; empty matches any value. `*` makes it a wildcard.
    pub value: String,
    /// The limit; `None` whitelists a leaf, or makes an inner node a placeholder.
    pub rate_limit: Option<RateLimitConfig>,
    /// Nested entries.
    pub descriptors: Vec<DescriptorConfig>,
    /// Count but never block.
    pub shadow_mode: bool,
    /// Only block when all quota descriptors of the request are over their limits.
    pub quota_mode: bool,
    /// Stats keyed by the runtime values of every level.
    pub detailed_metric: bool,
    /// Stats keyed by this level's runtime value.
    pub value_to_metric: bool,
    /// All values matching the wildcard share one counter.
    pub share_threshold: bool,
    /// Free-form data returned in `dynamic_metadata`.
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The `rate_limit` block of a descriptor entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RateLimitConfig {
    /// Unit name as written (validated case-insensitively when compiled).
    pub unit: String,
    /// Allowed hits per window; 0 blocks every request.
    pub requests_per_unit: u32,
    /// No limit: answered without touching the store.
    pub unlimited: bool,
    /// A name other rules may replace.
    pub name: String,
    /// Names of the rules this one supersedes.
    pub replaces: Vec<String>,
}

/// Parses one YAML rule document within [`Limits::DEFAULT`]. `name` is used in error
/// messages.
pub fn parse_document(name: &str, yaml: &str) -> Result<Document, ConfigError> {
    parse_document_with(name, yaml, &Limits::DEFAULT)
}

/// Parses one YAML rule document, refusing it before parsing when it is larger or nested
/// deeper than `limits` (parsing time would otherwise grow with the square of the depth).
pub fn parse_document_with(
    name: &str,
    yaml: &str,
    limits: &Limits,
) -> Result<Document, ConfigError> {
    prescan::check(yaml, limits).map_err(|e| {
        let mut err = ConfigError::new(
            ConfigErrorKind::Limits,
            name,
            "",
            format!("error loading config file: {e}"),
        );
        if let prescan::Exceeded::Depth { line, .. } = e {
            err.line = Some(line);
        }
        err
    })?;
    let root: Value = serde_yaml::from_str(yaml).map_err(|e| {
        let mut err = ConfigError::new(
            ConfigErrorKind::Load,
            name,
            "",
            format!("error loading config file: {e}"),
        );
        err.line = e.location().map(|l| l.line());
        err
    })?;
    match &root {
        Value::Null => {}
        Value::Mapping(m) => validate_keys(name, m, &mut String::new())?,
        other => {
            return Err(ConfigError::new(
                ConfigErrorKind::Load,
                name,
                "",
                format!(
                    "error loading config file: the document must be a mapping, found {}",
                    describe(other)
                ),
            ));
        }
    }
    let mut doc = Document {
        name: name.to_owned(),
        ..Document::default()
    };
    if let Value::Mapping(m) = &root {
        let r = Reader { file: name };
        doc.domain = r.string(m, "domain", "")?;
        doc.descriptors = r.descriptors(m, "")?;
    }
    Ok(doc)
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {s:?}"),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(t) => format!("tagged value {}", t.tag),
    }
}

/// Scalar text the way Go's YAML decoder shows it in messages.
fn scalar_text(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Sequence(_) => "[...]".into(),
        Value::Mapping(_) => "map[...]".into(),
        Value::Tagged(t) => t.tag.to_string(),
    }
}

fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

/// Pass one: every key known, every list a list of mappings, no unsupported scalar types.
fn validate_keys(
    file: &str,
    map: &serde_yaml::Mapping,
    path: &mut String,
) -> Result<(), ConfigError> {
    for (k, v) in map {
        let Value::String(key) = k else {
            return Err(ConfigError::new(
                ConfigErrorKind::KeyNotString,
                file,
                path,
                format!(
                    "config error, key is not of type string: {}",
                    scalar_text(k)
                ),
            ));
        };
        if !VALID_KEYS.contains(&key.as_str()) {
            return Err(ConfigError::new(
                ConfigErrorKind::UnknownKey,
                file,
                path,
                format!("config error, unknown key '{key}'"),
            ));
        }
        if key == "metadata" {
            continue;
        }
        let len = path.len();
        push_key(path, key);
        match v {
            Value::Sequence(items) => {
                for (i, item) in items.iter().enumerate() {
                    let Value::Mapping(m) = item else {
                        return Err(ConfigError::new(
                            ConfigErrorKind::ListOfNonMaps,
                            file,
                            path,
                            format!(
                                "config error, yaml file contains list of type other than map: {}",
                                scalar_text(item)
                            ),
                        ));
                    };
                    let len2 = path.len();
                    path.push_str(&format!("[{i}]"));
                    validate_keys(file, m, path)?;
                    path.truncate(len2);
                }
            }
            Value::Mapping(m) => validate_keys(file, m, path)?,
            Value::String(_) | Value::Bool(_) | Value::Null => {}
            Value::Number(n) if n.is_i64() || n.is_u64() => {}
            _ => {
                return Err(ConfigError::new(
                    ConfigErrorKind::CheckingConfig,
                    file,
                    path,
                    "error checking config",
                ));
            }
        }
        path.truncate(len);
    }
    Ok(())
}

/// Pass two: typed reads with path-carrying errors.
struct Reader<'a> {
    file: &'a str,
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

    fn string(
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

    fn descriptors(
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
        let requests_per_unit = match m.get("requests_per_unit") {
            None | Some(Value::Null) => 0,
            Some(Value::Number(n)) => match n.as_u64().and_then(|v| u32::try_from(v).ok()) {
                Some(v) => v,
                None => {
                    return Err(self.type_error(
                        path,
                        "requests_per_unit",
                        "an unsigned 32-bit integer",
                        &Value::Number(n.clone()),
                    ));
                }
            },
            Some(other) => {
                return Err(self.type_error(
                    path,
                    "requests_per_unit",
                    "an unsigned 32-bit integer",
                    other,
                ));
            }
        };
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
        })
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
