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

/// One action; exactly one field is set.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Envoy's action names; `Action` documents each.
pub struct ActionConfig {
    pub request_headers: Option<RequestHeadersConfig>,
    pub remote_address: Option<Empty>,
    pub masked_remote_address: Option<MaskedConfig>,
    pub generic_key: Option<GenericKeyConfig>,
    pub header_value_match: Option<HeaderValueMatchConfig>,
    pub method: Option<KeyOnly>,
    pub path: Option<KeyOnly>,
}

/// An action without settings (`remote_address: {}`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct RequestHeadersConfig {
    pub header_name: String,
    pub descriptor_key: String,
    #[serde(default)]
    pub skip_if_absent: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct MaskedConfig {
    pub v4_prefix_mask_len: Option<u8>,
    pub v6_prefix_mask_len: Option<u8>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct GenericKeyConfig {
    pub descriptor_value: String,
    pub descriptor_key: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct HeaderValueMatchConfig {
    pub descriptor_value: String,
    pub descriptor_key: Option<String>,
    pub expect_match: Option<bool>,
    pub headers: Vec<HeaderMatcherConfig>,
}

/// `method: {}` or `path: {descriptor_key: route}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct KeyOnly {
    pub descriptor_key: Option<String>,
}

/// Envoy's `HeaderMatcher`: a name and one test.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct HeaderMatcherConfig {
    pub name: String,
    pub exact_match: Option<String>,
    pub prefix_match: Option<String>,
    pub suffix_match: Option<String>,
    pub contains_match: Option<String>,
    pub present_match: Option<bool>,
    pub safe_regex_match: Option<RegexConfig>,
    pub string_match: Option<StringMatchConfig>,
    #[serde(default)]
    pub invert_match: bool,
}

/// `{regex: ...}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct RegexConfig {
    pub regex: String,
}

/// Envoy's `StringMatcher`: one test, optionally case-insensitive.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct StringMatchConfig {
    pub exact: Option<String>,
    pub prefix: Option<String>,
    pub suffix: Option<String>,
    pub contains: Option<String>,
    pub safe_regex: Option<RegexConfig>,
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
