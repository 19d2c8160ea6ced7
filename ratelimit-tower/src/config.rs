//! The layer's settings as a YAML (or any serde) document, with Envoy's action names, so
//! that the descriptors of an Envoy route and of a Rust service read alike:
//!
//! ```yaml
//! domain: api
//! rate_limits:                       # one descriptor per entry
//!   - actions:
//!       - remote_address: {}
//!   - actions:
//!       - generic_key: {descriptor_value: search}
//!       - request_headers: {header_name: x-api-key, descriptor_key: api_key}
//!   - actions:
//!       - header_value_match:
//!           descriptor_value: admin
//!           headers: [{name: ":path", prefix_match: /admin}]
//! xff_num_trusted_hops: 1            # optional, default 0
//! trusted_proxies: [10.0.0.0/8]      # optional
//! headers: ietf                      # none | ietf | draft03 | x_ratelimit
//! failure_mode: open                 # open | closed
//! shadow_mode: false
//! ```

use std::sync::Arc;

use http::StatusCode;
use ratelimit_core::{Clock, CounterStore, Limiter};
use serde::Deserialize;

use crate::actions::Action;
use crate::headers::HeaderStyle;
use crate::layer::{LayerBuilder, RateLimitLayer};
use crate::matcher::{HeaderMatcher, HeaderSource, ValueMatch};
use crate::settings::{BuildError, FailureMode};

/// A layer's settings, as a document.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerConfig {
    /// The rules' domain.
    pub domain: String,
    /// One descriptor per entry.
    pub rate_limits: Vec<RateLimitConfig>,
    /// Envoy's `xff_num_trusted_hops`.
    #[serde(default)]
    pub xff_num_trusted_hops: u32,
    /// Networks whose `X-Forwarded-For` is believed (empty: any peer's).
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// Which rate limit headers responses carry.
    #[serde(default)]
    pub headers: HeaderStyle,
    /// What happens when the limiter cannot decide.
    #[serde(default)]
    pub failure_mode: FailureMode,
    /// The status of a request refused in closed failure mode (default 500).
    #[serde(default)]
    pub status_on_error: Option<u16>,
    /// Decide and count, never deny.
    #[serde(default)]
    pub shadow_mode: bool,
}

/// One descriptor: Envoy's `RateLimit` of a route.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// One entry each.
    pub actions: Vec<ActionConfig>,
}

/// One action; exactly one field is set. Each is the Envoy action of the same name
/// (`method` and `path` are ours); [`Action`] says what each produces.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionConfig {
    /// A header's value: [`Action::RequestHeader`].
    pub request_headers: Option<RequestHeadersConfig>,
    /// The client address: [`Action::RemoteAddress`].
    pub remote_address: Option<Empty>,
    /// The client's network: [`Action::MaskedRemoteAddress`].
    pub masked_remote_address: Option<MaskedConfig>,
    /// A constant: [`Action::GenericKey`].
    pub generic_key: Option<GenericKeyConfig>,
    /// A constant when headers match: [`Action::HeaderValueMatch`].
    pub header_value_match: Option<HeaderValueMatchConfig>,
    /// The method: [`Action::Method`].
    pub method: Option<KeyOnly>,
    /// The path: [`Action::Path`].
    pub path: Option<KeyOnly>,
}

/// An action without settings (`remote_address: {}`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `request_headers`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestHeadersConfig {
    /// The header, or `:method`, `:path`, `:authority`, `:scheme`.
    pub header_name: String,
    /// The entry's key.
    pub descriptor_key: String,
    /// When the header is absent, leave out the entry, not the descriptor.
    #[serde(default)]
    pub skip_if_absent: bool,
}

/// `masked_remote_address`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaskedConfig {
    /// Bits of an IPv4 address kept (default 32).
    pub v4_prefix_mask_len: Option<u8>,
    /// Bits of an IPv6 address kept (default 128).
    pub v6_prefix_mask_len: Option<u8>,
}

/// `generic_key`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenericKeyConfig {
    /// The entry's value.
    pub descriptor_value: String,
    /// The entry's key (default `generic_key`).
    pub descriptor_key: Option<String>,
}

/// `header_value_match`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderValueMatchConfig {
    /// The entry's value.
    pub descriptor_value: String,
    /// The entry's key (default `header_match`).
    pub descriptor_key: Option<String>,
    /// Produce the entry when all headers match (default), or when not all do.
    pub expect_match: Option<bool>,
    /// The tests, all of which must pass.
    pub headers: Vec<HeaderMatcherConfig>,
}

/// `method: {}` or `path: {descriptor_key: route}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyOnly {
    /// The entry's key (default: the action's name).
    pub descriptor_key: Option<String>,
}

/// Envoy's `HeaderMatcher`: a name and exactly one test.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderMatcherConfig {
    /// The header, or a pseudo-header.
    pub name: String,
    /// The value equals this.
    pub exact_match: Option<String>,
    /// The value starts with this.
    pub prefix_match: Option<String>,
    /// The value ends with this.
    pub suffix_match: Option<String>,
    /// The value contains this.
    pub contains_match: Option<String>,
    /// The header is present (`true`) or absent (`false`).
    pub present_match: Option<bool>,
    /// The whole value matches this regular expression.
    pub safe_regex_match: Option<RegexConfig>,
    /// Envoy's newer form of the tests above, with `ignore_case`.
    pub string_match: Option<StringMatchConfig>,
    /// Invert the result.
    #[serde(default)]
    pub invert_match: bool,
}

/// `{regex: ...}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegexConfig {
    /// The expression (Rust's `regex` syntax; it must match the whole value).
    pub regex: String,
}

/// Envoy's `StringMatcher`: one test, optionally case-insensitive.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StringMatchConfig {
    /// Equals.
    pub exact: Option<String>,
    /// Starts with.
    pub prefix: Option<String>,
    /// Ends with.
    pub suffix: Option<String>,
    /// Contains.
    pub contains: Option<String>,
    /// Matches wholly.
    pub safe_regex: Option<RegexConfig>,
    /// Compare case-insensitively (not for `safe_regex`).
    #[serde(default)]
    pub ignore_case: bool,
}

impl LayerConfig {
    /// Reads a YAML document; errors name the line.
    pub fn from_yaml(text: &str) -> Result<LayerConfig, BuildError> {
        serde_yaml::from_str(text).map_err(|e| BuildError::new(format!("layer config: {e}")))
    }

    /// A builder with these settings, for hooks and custom actions to be added.
    pub fn builder<S: CounterStore + 'static, C: Clock + 'static>(
        &self,
        limiter: Arc<Limiter<S, C>>,
    ) -> Result<LayerBuilder<S, C>, BuildError> {
        let mut b = RateLimitLayer::builder(limiter, self.domain.clone())
            .xff_trusted_hops(self.xff_num_trusted_hops)
            .headers(self.headers)
            .shadow_mode(self.shadow_mode)
            .failure_mode(self.failure_mode);
        let nets = self
            .trusted_proxies
            .iter()
            .map(|n| parse_net(n))
            .collect::<Result<Vec<_>, _>>()?;
        b = b.trusted_proxies(nets);
        if let Some(code) = self.status_on_error {
            let status = StatusCode::from_u16(code)
                .map_err(|_| BuildError::new(format!("status_on_error: {code} is not a status")))?;
            b = b.status_on_error(status);
        }
        for (i, rl) in self.rate_limits.iter().enumerate() {
            let actions = rl
                .actions
                .iter()
                .enumerate()
                .map(|(j, a)| {
                    a.action()
                        .map_err(|e| BuildError::new(format!("rate_limits[{i}].actions[{j}]: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            b = b.descriptor(actions);
        }
        Ok(b)
    }

    /// The layer with these settings.
    pub fn layer<S: CounterStore + 'static, C: Clock + 'static>(
        &self,
        limiter: Arc<Limiter<S, C>>,
    ) -> Result<RateLimitLayer<S, C>, BuildError> {
        self.builder(limiter)?.build()
    }
}

/// A network (`10.0.0.0/8`) or one address (`10.0.0.1`).
fn parse_net(s: &str) -> Result<ipnet::IpNet, BuildError> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| BuildError::new(format!("trusted_proxies: {s:?} is not a network")))
}

impl ActionConfig {
    fn action(&self) -> Result<Action, BuildError> {
        let key =
            |k: &Option<String>, default: &str| k.clone().unwrap_or_else(|| default.to_owned());
        let mut found = Vec::new();
        if let Some(h) = &self.request_headers {
            found.push(Action::RequestHeader {
                header: HeaderSource::parse(&h.header_name)?,
                descriptor_key: h.descriptor_key.clone(),
                skip_if_absent: h.skip_if_absent,
            });
        }
        if self.remote_address.is_some() {
            found.push(Action::RemoteAddress);
        }
        if let Some(m) = &self.masked_remote_address {
            found.push(Action::MaskedRemoteAddress {
                v4_prefix_len: m.v4_prefix_mask_len.unwrap_or(32),
                v6_prefix_len: m.v6_prefix_mask_len.unwrap_or(128),
            });
        }
        if let Some(g) = &self.generic_key {
            found.push(Action::GenericKey {
                descriptor_key: key(&g.descriptor_key, "generic_key"),
                descriptor_value: g.descriptor_value.clone(),
            });
        }
        if let Some(h) = &self.header_value_match {
            found.push(Action::HeaderValueMatch {
                descriptor_key: key(&h.descriptor_key, "header_match"),
                descriptor_value: h.descriptor_value.clone(),
                expect_match: h.expect_match.unwrap_or(true),
                headers: h
                    .headers
                    .iter()
                    .map(HeaderMatcherConfig::matcher)
                    .collect::<Result<_, _>>()?,
            });
        }
        if let Some(m) = &self.method {
            found.push(Action::Method {
                descriptor_key: key(&m.descriptor_key, "method"),
            });
        }
        if let Some(p) = &self.path {
            found.push(Action::Path {
                descriptor_key: key(&p.descriptor_key, "path"),
            });
        }
        match found.len() {
            1 => Ok(found.pop().expect("one")),
            n => Err(BuildError::new(format!(
                "an action names exactly one of request_headers, remote_address, \
                 masked_remote_address, generic_key, header_value_match, method, path; \
                 this one names {n}"
            ))),
        }
    }
}

impl HeaderMatcherConfig {
    fn matcher(&self) -> Result<HeaderMatcher, BuildError> {
        let mut tests = Vec::new();
        let mut ignore_case = false;
        let mut add = |t: Option<ValueMatch>| tests.extend(t);
        add(self.exact_match.clone().map(ValueMatch::Exact));
        add(self.prefix_match.clone().map(ValueMatch::Prefix));
        add(self.suffix_match.clone().map(ValueMatch::Suffix));
        add(self.contains_match.clone().map(ValueMatch::Contains));
        add(self.present_match.map(ValueMatch::Present));
        if let Some(r) = &self.safe_regex_match {
            tests.push(HeaderMatcher::regex(&r.regex)?);
        }
        if let Some(s) = &self.string_match {
            ignore_case = s.ignore_case;
            tests.extend(s.exact.clone().map(ValueMatch::Exact));
            tests.extend(s.prefix.clone().map(ValueMatch::Prefix));
            tests.extend(s.suffix.clone().map(ValueMatch::Suffix));
            tests.extend(s.contains.clone().map(ValueMatch::Contains));
            if let Some(r) = &s.safe_regex {
                tests.push(HeaderMatcher::regex(&r.regex)?);
            }
        }
        if tests.len() != 1 {
            return Err(BuildError::new(format!(
                "header {:?}: a matcher has exactly one test (exact_match, prefix_match, \
                 suffix_match, contains_match, present_match, safe_regex_match or \
                 string_match), this one has {}",
                self.name,
                tests.len()
            )));
        }
        let mut m = HeaderMatcher::new(&self.name, tests.pop().expect("one"))?;
        m.ignore_case = ignore_case;
        m.invert = self.invert_match;
        Ok(m)
    }
}

#[cfg(test)]
mod tests;
