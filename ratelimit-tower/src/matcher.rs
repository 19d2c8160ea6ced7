//! Where a value is read from a request (a header, or one of HTTP/2's pseudo-headers),
//! and the header matchers of Envoy's `header_value_match` action.

use http::{HeaderMap, HeaderName, Method, Uri};
use regex::Regex;

use crate::error::BuildError;

/// The parts of a request the actions read. Built once per request by the layer; custom
/// actions ([`crate::Action::custom`]) get it too.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    /// The method.
    pub method: &'a Method,
    /// The target.
    pub uri: &'a Uri,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// The extensions (peer address, anything a layer before put there).
    pub extensions: &'a http::Extensions,
    /// The client address, as the layer's `X-Forwarded-For` settings find it.
    pub client: Option<std::net::IpAddr>,
}

/// A request header, or one of the pseudo-headers Envoy's actions can name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderSource {
    /// A header by name.
    Named(HeaderName),
    /// `:method`.
    Method,
    /// `:path`: the path with its query, as Envoy reads it.
    Path,
    /// `:authority`: the target's authority, else the `Host` header.
    Authority,
    /// `:scheme`, when the request target carries one.
    Scheme,
}

impl HeaderSource {
    /// Parses a header name; `:method`, `:path`, `:authority` and `:scheme` name the
    /// pseudo-headers.
    pub fn parse(name: &str) -> Result<HeaderSource, BuildError> {
        Ok(match name {
            ":method" => HeaderSource::Method,
            ":path" => HeaderSource::Path,
            ":authority" => HeaderSource::Authority,
            ":scheme" => HeaderSource::Scheme,
            _ => HeaderSource::Named(
                HeaderName::try_from(name)
                    .map_err(|_| BuildError::new(format!("{name:?} is not a header name")))?,
            ),
        })
    }

    /// The value in `req`, if it has one. A header value that is not text is read
    /// lossily rather than treated as absent.
    pub fn read<'a>(&self, req: &RequestInfo<'a>) -> Option<std::borrow::Cow<'a, str>> {
        use std::borrow::Cow;
        match self {
            HeaderSource::Named(n) => req
                .headers
                .get(n)
                .map(|v| String::from_utf8_lossy(v.as_bytes())),
            HeaderSource::Method => Some(Cow::Borrowed(req.method.as_str())),
            HeaderSource::Path => req
                .uri
                .path_and_query()
                .map(|p| Cow::Borrowed(p.as_str()))
                .or(Some(Cow::Borrowed("/"))),
            HeaderSource::Authority => req
                .uri
                .authority()
                .map(|a| Cow::Borrowed(a.as_str()))
                .or_else(|| {
                    req.headers
                        .get(http::header::HOST)
                        .map(|v| String::from_utf8_lossy(v.as_bytes()))
                }),
            HeaderSource::Scheme => req.uri.scheme_str().map(Cow::Borrowed),
        }
    }
}

/// How a header's value is tested.
#[derive(Debug, Clone)]
pub enum ValueMatch {
    /// Equal to the string.
    Exact(String),
    /// Starts with it.
    Prefix(String),
    /// Ends with it.
    Suffix(String),
    /// Contains it.
    Contains(String),
    /// The whole value matches the regular expression.
    Regex(Regex),
    /// The header is present (`true`) or absent (`false`), whatever its value.
    Present(bool),
}

/// One header test of a `header_value_match` action (Envoy's `HeaderMatcher`).
#[derive(Debug, Clone)]
pub struct HeaderMatcher {
    /// The header tested.
    pub source: HeaderSource,
    /// The test.
    pub test: ValueMatch,
    /// Compare case-insensitively (not for regular expressions).
    pub ignore_case: bool,
    /// Invert the result.
    pub invert: bool,
}

impl HeaderMatcher {
    /// A matcher of `header` by `test`.
    pub fn new(header: &str, test: ValueMatch) -> Result<HeaderMatcher, BuildError> {
        Ok(HeaderMatcher {
            source: HeaderSource::parse(header)?,
            test,
            ignore_case: false,
            invert: false,
        })
    }

    /// Builds the regular expression test; the expression must match the whole value.
    pub fn regex(pattern: &str) -> Result<ValueMatch, BuildError> {
        Regex::new(&format!("^(?:{pattern})$"))
            .map(ValueMatch::Regex)
            .map_err(|e| BuildError::new(format!("bad regex {pattern:?}: {e}")))
    }

    /// Whether `req` passes. An absent header fails every test but `Present(false)`;
    /// inverting applies after that.
    pub fn matches(&self, req: &RequestInfo<'_>) -> bool {
        let value = self.source.read(req);
        let hit = match (&self.test, value.as_deref()) {
            (ValueMatch::Present(want), v) => v.is_some() == *want,
            (_, None) => false,
            (ValueMatch::Regex(r), Some(v)) => r.is_match(v),
            (ValueMatch::Exact(s), Some(v)) => self.cmp(v, s, |v, s| v == s),
            (ValueMatch::Prefix(s), Some(v)) => self.cmp(v, s, |v, s| v.starts_with(s)),
            (ValueMatch::Suffix(s), Some(v)) => self.cmp(v, s, |v, s| v.ends_with(s)),
            (ValueMatch::Contains(s), Some(v)) => self.cmp(v, s, |v, s| v.contains(s)),
        };
        hit != self.invert
    }

    fn cmp(&self, v: &str, s: &str, f: impl Fn(&str, &str) -> bool) -> bool {
        if self.ignore_case {
            f(&v.to_ascii_lowercase(), &s.to_ascii_lowercase())
        } else {
            f(v, s)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(m: &HeaderMatcher, headers: &[(&str, &str)], uri: &str) -> bool {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.append(HeaderName::try_from(*k).unwrap(), v.parse().unwrap());
        }
        let uri: Uri = uri.parse().unwrap();
        let ext = http::Extensions::new();
        m.matches(&RequestInfo {
            method: &Method::POST,
            uri: &uri,
            headers: &h,
            extensions: &ext,
            client: None,
        })
    }

    #[test]
    fn tests_values_and_presence() {
        let exact = HeaderMatcher::new("x-plan", ValueMatch::Exact("free".into())).unwrap();
        assert!(check(&exact, &[("x-plan", "free")], "/"));
        assert!(!check(&exact, &[("x-plan", "FREE")], "/"));
        assert!(!check(&exact, &[], "/"));
        let loose = HeaderMatcher {
            ignore_case: true,
            ..exact.clone()
        };
        assert!(check(&loose, &[("x-plan", "FREE")], "/"));
        let not = HeaderMatcher {
            invert: true,
            ..exact
        };
        assert!(check(&not, &[], "/") && !check(&not, &[("x-plan", "free")], "/"));
        let absent = HeaderMatcher::new("x-plan", ValueMatch::Present(false)).unwrap();
        assert!(check(&absent, &[], "/"));
        let path = HeaderMatcher::new(":path", HeaderMatcher::regex("/v[0-9]+/.*").unwrap());
        let path = path.unwrap();
        assert!(check(&path, &[], "/v2/items?x=1"));
        assert!(!check(&path, &[], "/a/v2/items"));
        let method = HeaderMatcher::new(":method", ValueMatch::Prefix("PO".into())).unwrap();
        assert!(check(&method, &[], "/"));
        assert!(HeaderSource::parse("bad header").is_err());
        assert!(HeaderMatcher::regex("(").is_err());
    }
}
