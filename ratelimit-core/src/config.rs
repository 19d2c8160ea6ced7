//! The YAML rule document: parsing, upstream-compatible validation, and the typed model.
//!
//! Validation runs in the same two passes as upstream, so the same documents are accepted
//! and rejected: first every mapping key anywhere in the document is checked against the
//! list of known keys (catching typos such as `unlimied`), then the typed fields are read.
//! Every error names the file and, unlike upstream, the path of the offending node.

use std::fmt;

use serde_yaml::Value;

use crate::prescan::{self, Limits};

mod raw;
mod reader;
mod tree;

use reader::Reader;

/// Keys accepted anywhere in a document (upstream checks them without regard to position).
const VALID_KEYS: [&str; 20] = [
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
    // Extensions of upstream's format (file-only): see docs/algorithms.md.
    "rate_limits",
    "unit_multiplier",
    "algorithm",
    "burst",
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
    /// An `algorithm` that is not one of ours.
    UnknownAlgorithm,
    /// `burst` on a limit that is not a token bucket.
    BurstWithoutTokenBucket,
    /// `burst` or `unit_multiplier` of 0.
    ZeroLimitField,
    /// `rate_limit` and `rate_limits` on one descriptor.
    RateLimitAndRateLimits,
    /// `rate_limits` without an entry, or with an `unlimited` one.
    InvalidRateLimits,
    /// The same `name` twice in one `rate_limits` list.
    DuplicateLimitName,
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
    /// Several limits instead of `rate_limit` (an extension): `None` when absent.
    pub rate_limits: Option<Vec<RateLimitConfig>>,
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
    /// The window is this many units (an extension; `None`: 1).
    pub unit_multiplier: Option<u32>,
    /// The algorithm's name as written (an extension; empty: `fixed_window`).
    pub algorithm: String,
    /// A token bucket's capacity (an extension; `None`: `requests_per_unit`).
    pub burst: Option<u32>,
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
    // Like yaml.v2, only the first document is read: a trailing `---` is no error.
    let first = serde_yaml::Deserializer::from_str(yaml).next();
    let parsed = match first {
        Some(doc) => <tree::LastWins as serde::Deserialize>::deserialize(doc).map(|t| t.0),
        None => Ok(Value::Null),
    };
    let mut root: Value = parsed.map_err(|e: serde_yaml::Error| {
        let mut err = ConfigError::new(
            ConfigErrorKind::Load,
            name,
            "",
            format!("error loading config file: {e}"),
        );
        err.line = e.location().map(|l| l.line());
        err
    })?;
    // yaml.v2 applies `<<` merge keys while it decodes.
    root.apply_merge().map_err(|e| {
        ConfigError::new(
            ConfigErrorKind::Load,
            name,
            "",
            format!("error loading config file: {e}"),
        )
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
        let r = Reader::new(name);
        let read = |text: Option<&raw::RawRoot>| -> Result<_, ConfigError> {
            let domain = r.string(m, "domain", "", text.and_then(|t| t.domain.as_deref()))?;
            let descriptors = r.descriptors(m, "", text.and_then(|t| t.descriptors.as_ref()))?;
            Ok((domain, descriptors))
        };
        let (mut domain, mut descriptors) = read(None)?;
        // A string field held a number or a boolean: read again with the text as written
        // (parsing the mirror costs about half as much again, so only then).
        if r.resolved_text_used() {
            (domain, descriptors) = read(raw::read(yaml).as_ref())?;
        }
        doc.domain = domain;
        doc.descriptors = descriptors;
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
