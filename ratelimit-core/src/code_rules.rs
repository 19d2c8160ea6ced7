//! Rules written in Rust instead of YAML, for services that keep their limits in code.
//!
//! [`Rules`] builds the same [`Document`] a YAML file parses into, so a rule written here
//! is checked, matched, keyed and counted exactly as the same rule in a file: it shares
//! counters with `ratelimit` servers that load the file [`Rules::to_yaml`] writes.
//!
//! ```
//! use ratelimit_core::code_rules::{RateLimit, Rules};
//! use ratelimit_core::{Code, Descriptor, Limiter, ManualClock, Request};
//! use ratelimit_backends::MemoryStore;
//!
//! let rules = Rules::new("api")
//!     // Ten a second per client address, in bursts of up to twenty (a token bucket).
//!     .limit(["remote_address"], RateLimit::per_second(10).burst(20))
//!     // Logins: five a minute and twenty a day per address, decided together.
//!     .limits(
//!         [("path", "/login"), ("remote_address", "")],
//!         [RateLimit::per_minute(5).sliding_window(), RateLimit::per_day(20)],
//!     );
//! assert!(rules.to_yaml().contains("burst: 20"));
//! let limiter = Limiter::builder(MemoryStore::new(), ManualClock::new(1_700_000_000))
//!     .rules(rules)
//!     .build()
//!     .expect("valid rules");
//! let req = Request::new("api", vec![Descriptor::new([("remote_address", "10.0.0.1")])]);
//! let resp = limiter.should_rate_limit_now(&req).unwrap().unwrap();
//! assert_eq!((resp.overall_code, resp.statuses[0].limit_remaining), (Code::Ok, 19));
//! ```
//!
//! What it deliberately does not do: validate on its own. Errors (a `burst` of 0, a path
//! given twice) surface when the limiter compiles the document, with the same
//! [`crate::ConfigError`] a file would get.

use std::fmt::Write as _;

use crate::algorithm::AlgorithmName;
use crate::config::{DescriptorConfig, Document, RateLimitConfig};
use crate::unit::Unit;

/// One limit of a rule, the `rate_limit` block of a file: a fixed window unless an
/// algorithm is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    config: RateLimitConfig,
    shadow_mode: bool,
    quota_mode: bool,
}

impl RateLimit {
    /// `requests` per `unit` (a fixed window, upstream's counting).
    pub fn per(requests: u32, unit: Unit) -> RateLimit {
        RateLimit {
            config: RateLimitConfig {
                unit: unit.name().to_ascii_lowercase(),
                requests_per_unit: requests,
                ..RateLimitConfig::default()
            },
            shadow_mode: false,
            quota_mode: false,
        }
    }

    /// `requests` a second.
    pub fn per_second(requests: u32) -> RateLimit {
        RateLimit::per(requests, Unit::Second)
    }

    /// `requests` a minute.
    pub fn per_minute(requests: u32) -> RateLimit {
        RateLimit::per(requests, Unit::Minute)
    }

    /// `requests` an hour.
    pub fn per_hour(requests: u32) -> RateLimit {
        RateLimit::per(requests, Unit::Hour)
    }

    /// `requests` a day.
    pub fn per_day(requests: u32) -> RateLimit {
        RateLimit::per(requests, Unit::Day)
    }

    /// No limit: matching requests are answered OK without counting (a whitelist entry).
    pub fn unlimited() -> RateLimit {
        RateLimit {
            config: RateLimitConfig {
                unlimited: true,
                ..RateLimitConfig::default()
            },
            shadow_mode: false,
            quota_mode: false,
        }
    }

    /// A token bucket holding up to `burst` tokens, refilled at the rate: the usual
    /// "10 a second, bursts of 20".
    pub fn burst(mut self, burst: u32) -> RateLimit {
        self.config.burst = Some(burst);
        self.algorithm(AlgorithmName::TokenBucket)
    }

    /// A token bucket whose burst is the rate itself.
    pub fn token_bucket(self) -> RateLimit {
        self.algorithm(AlgorithmName::TokenBucket)
    }

    /// A sliding window: no double burst at a window's edge; denied hits do not count.
    pub fn sliding_window(self) -> RateLimit {
        self.algorithm(AlgorithmName::SlidingWindow)
    }

    /// A fixed window (the default), clearing any burst set before.
    pub fn fixed_window(mut self) -> RateLimit {
        self.config.burst = None;
        self.algorithm(AlgorithmName::FixedWindow)
    }

    /// Any algorithm by name.
    pub fn algorithm(mut self, algorithm: AlgorithmName) -> RateLimit {
        self.config.algorithm = algorithm.name().to_owned();
        self
    }

    /// Windows of `n` units ("30 per 5 minutes").
    pub fn unit_multiplier(mut self, n: u32) -> RateLimit {
        self.config.unit_multiplier = Some(n);
        self
    }

    /// The limit's `name`, which statuses report and other rules can replace.
    pub fn name(mut self, name: impl Into<String>) -> RateLimit {
        self.config.name = name.into();
        self
    }

    /// Supersedes the rule named `name` when both match one request.
    pub fn replaces(mut self, name: impl Into<String>) -> RateLimit {
        self.config.replaces.push(name.into());
        self
    }

    /// Counts but never denies. Set on any limit of a rule, it applies to the rule
    /// (as `shadow_mode` sits on the descriptor in a file).
    pub fn shadow_mode(mut self) -> RateLimit {
        self.shadow_mode = true;
        self
    }

    /// Denies only when every quota descriptor of the request is over (see `quota_mode`
    /// in the rule format); applies to the rule, as [`RateLimit::shadow_mode`] does.
    pub fn quota_mode(mut self) -> RateLimit {
        self.quota_mode = true;
        self
    }
}

/// One level of a rule's descriptor path: a key (any value), or a key and a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    key: String,
    value: String,
}

impl From<&str> for Key {
    fn from(key: &str) -> Key {
        Key {
            key: key.to_owned(),
            value: String::new(),
        }
    }
}

impl From<(&str, &str)> for Key {
    fn from((key, value): (&str, &str)) -> Key {
        Key {
            key: key.to_owned(),
            value: value.to_owned(),
        }
    }
}

impl From<(String, String)> for Key {
    fn from((key, value): (String, String)) -> Key {
        Key { key, value }
    }
}

/// The rules of one domain, built in code: what one YAML file holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    doc: Document,
}

impl Rules {
    /// No rules yet, for `domain`.
    pub fn new(domain: impl Into<String>) -> Rules {
        let domain = domain.into();
        Rules {
            doc: Document {
                name: format!("code:{domain}"),
                domain,
                descriptors: Vec::new(),
            },
        }
    }

    /// A rule with one limit for requests whose descriptor is `path` (outermost key
    /// first; a key without a value matches any value).
    pub fn limit<K: Into<Key>>(self, path: impl IntoIterator<Item = K>, limit: RateLimit) -> Rules {
        self.add(path, vec![limit], false)
    }

    /// A rule with several limits (`rate_limits`), decided together.
    pub fn limits<K: Into<Key>>(
        self,
        path: impl IntoIterator<Item = K>,
        limits: impl IntoIterator<Item = RateLimit>,
    ) -> Rules {
        self.add(path, limits.into_iter().collect(), true)
    }

    fn add<K: Into<Key>>(
        mut self,
        path: impl IntoIterator<Item = K>,
        limits: Vec<RateLimit>,
        list: bool,
    ) -> Rules {
        let path: Vec<Key> = path.into_iter().map(Into::into).collect();
        let Some((leaf, inner)) = path.split_last() else {
            // An empty path names no descriptor; compiling reports the empty key.
            self.doc.descriptors.push(DescriptorConfig::default());
            return self;
        };
        let mut level = &mut self.doc.descriptors;
        for k in inner {
            let i = match level
                .iter()
                .position(|d| d.key == k.key && d.value == k.value)
            {
                Some(i) => i,
                None => {
                    level.push(entry(k));
                    level.len() - 1
                }
            };
            level = &mut level[i].descriptors;
        }
        // A leaf that already has a limit gets a second entry, so that compiling reports
        // the duplicate as it would in a file; a placeholder node takes the limit.
        let free = level.iter().position(|d| {
            d.key == leaf.key
                && d.value == leaf.value
                && d.rate_limit.is_none()
                && d.rate_limits.is_none()
        });
        let d = match free {
            Some(i) => &mut level[i],
            None => {
                level.push(entry(leaf));
                level.last_mut().expect("just pushed")
            }
        };
        d.shadow_mode = limits.iter().any(|l| l.shadow_mode);
        d.quota_mode = limits.iter().any(|l| l.quota_mode);
        let mut configs: Vec<RateLimitConfig> = limits.into_iter().map(|l| l.config).collect();
        if list {
            d.rate_limits = Some(configs);
        } else {
            d.rate_limit = configs.pop();
        }
        self
    }

    /// The domain.
    pub fn domain(&self) -> &str {
        &self.doc.domain
    }

    /// The document, as a YAML file with these rules would parse into.
    pub fn document(&self) -> &Document {
        &self.doc
    }

    /// The document, owned.
    pub fn into_document(self) -> Document {
        self.doc
    }

    /// The rules as a YAML rule file, for `ratelimit` servers that share counters with
    /// this process.
    pub fn to_yaml(&self) -> String {
        let mut out = format!("domain: {}\ndescriptors:\n", quoted(&self.doc.domain));
        if self.doc.descriptors.is_empty() {
            out.truncate(out.len() - 1);
            out.push_str(" []\n");
        }
        write_descriptors(&mut out, &self.doc.descriptors, 1);
        out
    }
}

fn entry(k: &Key) -> DescriptorConfig {
    DescriptorConfig {
        key: k.key.clone(),
        value: k.value.clone(),
        ..DescriptorConfig::default()
    }
}

/// A YAML scalar for any string: JSON's quoting, which YAML's double quotes accept.
fn quoted(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn write_descriptors(out: &mut String, list: &[DescriptorConfig], depth: usize) {
    let pad = "  ".repeat(depth);
    for d in list {
        let _ = writeln!(out, "{pad}- key: {}", quoted(&d.key));
        if !d.value.is_empty() {
            let _ = writeln!(out, "{pad}  value: {}", quoted(&d.value));
        }
        if d.shadow_mode {
            let _ = writeln!(out, "{pad}  shadow_mode: true");
        }
        if d.quota_mode {
            let _ = writeln!(out, "{pad}  quota_mode: true");
        }
        if let Some(rl) = &d.rate_limit {
            let _ = writeln!(out, "{pad}  rate_limit: {}", limit_yaml(rl));
        }
        if let Some(list) = &d.rate_limits {
            let _ = writeln!(out, "{pad}  rate_limits:");
            for rl in list {
                let _ = writeln!(out, "{pad}    - {}", limit_yaml(rl));
            }
        }
        if !d.descriptors.is_empty() {
            let _ = writeln!(out, "{pad}  descriptors:");
            write_descriptors(out, &d.descriptors, depth + 2);
        }
    }
}

/// One `rate_limit` block in flow style.
fn limit_yaml(rl: &RateLimitConfig) -> String {
    let mut fields = Vec::new();
    if rl.unlimited {
        fields.push("unlimited: true".to_owned());
    } else {
        fields.push(format!("unit: {}", rl.unit));
        fields.push(format!("requests_per_unit: {}", rl.requests_per_unit));
    }
    if let Some(n) = rl.unit_multiplier {
        fields.push(format!("unit_multiplier: {n}"));
    }
    if !rl.algorithm.is_empty() {
        fields.push(format!("algorithm: {}", rl.algorithm));
    }
    if let Some(b) = rl.burst {
        fields.push(format!("burst: {b}"));
    }
    if !rl.name.is_empty() {
        fields.push(format!("name: {}", quoted(&rl.name)));
    }
    if !rl.replaces.is_empty() {
        let names: Vec<String> = rl
            .replaces
            .iter()
            .map(|n| format!("{{name: {}}}", quoted(n)))
            .collect();
        fields.push(format!("replaces: [{}]", names.join(", ")));
    }
    format!("{{{}}}", fields.join(", "))
}

#[cfg(test)]
mod tests;
