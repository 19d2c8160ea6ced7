//! The rate limit headers of a response, from the decision's binding status.
//!
//! One limit is reported, the one that binds: the first descriptor over its limit, else
//! the one with the fewest hits left (the core's choice for its own `RateLimit-*`
//! headers). Its capacity is the burst of a token bucket, and its window the time an
//! empty bucket takes to fill, so that `remaining` never exceeds the advertised quota.

use std::cell::RefCell;

use http::{HeaderMap, HeaderName, HeaderValue};
use ratelimit_core::{Code, CurrentLimit, DescriptorStatus, Response};
use serde::Deserialize;

/// Which rate limit headers responses carry. Denied responses always carry
/// `Retry-After`; the style adds its headers to denied and allowed responses alike.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderStyle {
    /// Only `Retry-After`, on denied responses.
    #[default]
    None,
    /// The IETF httpapi draft's latest fields: `RateLimit-Policy: "name";q=10;w=60` and
    /// `RateLimit: "name";r=3;t=42` (the policy named after the limit's `name`, else
    /// `default`).
    Ietf,
    /// draft-ietf-httpapi-ratelimit-headers-03's trio: `RateLimit-Limit`,
    /// `RateLimit-Remaining`, `RateLimit-Reset` (seconds).
    Draft03,
    /// `tower_governor`'s: `x-ratelimit-limit`, `x-ratelimit-remaining`, and
    /// `x-ratelimit-after` on denied responses, for clients written against it.
    XRatelimit,
}

/// The status whose limit binds: the first over its limit, else the fewest remaining.
pub fn binding(resp: &Response) -> Option<(&DescriptorStatus, &CurrentLimit)> {
    let mut chosen: Option<(&DescriptorStatus, &CurrentLimit)> = None;
    for s in resp.statuses.iter() {
        let Some(limit) = &s.current_limit else {
            continue;
        };
        if s.code == Code::OverLimit {
            return Some((s, limit));
        }
        if chosen.is_none_or(|(c, _)| s.limit_remaining < c.limit_remaining) {
            chosen = Some((s, limit));
        }
    }
    chosen
}

/// Seconds a denied client should wait: the binding status's reset, at least 1.
pub fn retry_after(status: &DescriptorStatus) -> u64 {
    status.duration_until_reset.unwrap_or(1).max(1)
}

/// Adds `style`'s headers for `status` to `headers`; `denied` adds the denial's own.
pub fn write(
    style: HeaderStyle,
    status: &DescriptorStatus,
    limit: &CurrentLimit,
    denied: bool,
    headers: &mut HeaderMap,
) {
    let reset = status.duration_until_reset.unwrap_or(0);
    let remaining = if denied { 0 } else { status.limit_remaining };
    if denied {
        headers.insert(http::header::RETRY_AFTER, retry_after(status).into());
    }
    match style {
        HeaderStyle::None => {}
        HeaderStyle::Ietf => LAST_POLICY.with_borrow_mut(|last| {
            let policy = match last {
                Some(p) if p.is(limit) => p,
                _ => last.insert(Policy::of(limit)),
            };
            headers.insert(RATELIMIT_POLICY, policy.header.clone());
            let mut v = Vec::with_capacity(policy.quoted.len() + 32);
            v.extend_from_slice(&policy.quoted);
            v.extend_from_slice(b";r=");
            v.extend_from_slice(itoa::Buffer::new().format(remaining).as_bytes());
            v.extend_from_slice(b";t=");
            v.extend_from_slice(itoa::Buffer::new().format(reset).as_bytes());
            headers.insert(RATELIMIT, value(v));
        }),
        HeaderStyle::Draft03 => {
            headers.insert(RATELIMIT_LIMIT, limit.capacity.into());
            headers.insert(RATELIMIT_REMAINING, remaining.into());
            headers.insert(RATELIMIT_RESET, reset.into());
        }
        HeaderStyle::XRatelimit => {
            headers.insert(X_LIMIT, limit.capacity.into());
            headers.insert(X_REMAINING, remaining.into());
            if denied {
                headers.insert(X_AFTER, retry_after(status).into());
            }
        }
    }
}

const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
const RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
const RATELIMIT_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");
const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_AFTER: HeaderName = HeaderName::from_static("x-ratelimit-after");

fn value(v: Vec<u8>) -> HeaderValue {
    HeaderValue::from_maybe_shared(bytes::Bytes::from(v)).expect("only printable ASCII is written")
}

/// A limit's `RateLimit-Policy` value and quoted name, kept per thread for the last limit
/// reported: a service reports the same few limits over and over, and the policy changes
/// only with the rules.
struct Policy {
    name: String,
    capacity: u32,
    window_seconds: u64,
    quoted: Vec<u8>,
    header: HeaderValue,
}

thread_local! {
    static LAST_POLICY: RefCell<Option<Policy>> = const { RefCell::new(None) };
}

impl Policy {
    fn of(limit: &CurrentLimit) -> Policy {
        let quoted = policy_name(&limit.name).into_bytes();
        let mut header = quoted.clone();
        header.extend_from_slice(b";q=");
        header.extend_from_slice(itoa::Buffer::new().format(limit.capacity).as_bytes());
        header.extend_from_slice(b";w=");
        header.extend_from_slice(itoa::Buffer::new().format(limit.window_seconds).as_bytes());
        Policy {
            name: limit.name.clone(),
            capacity: limit.capacity,
            window_seconds: limit.window_seconds,
            quoted,
            header: value(header),
        }
    }

    fn is(&self, limit: &CurrentLimit) -> bool {
        self.capacity == limit.capacity
            && self.window_seconds == limit.window_seconds
            && self.name == limit.name
    }
}

/// The policy's identifier as a structured-field string: the limit's name (printable
/// ASCII kept, `"` and `\` escaped), or `default`.
fn policy_name(name: &str) -> String {
    if name.is_empty() {
        return "\"default\"".into();
    }
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars().filter(|c| (' '..='~').contains(c)) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimit_core::Unit;

    fn status(code: Code, remaining: u32, reset: u64, name: &str) -> DescriptorStatus {
        let mut limit = CurrentLimit::fixed(10, Unit::Second, name);
        limit.capacity = 20;
        limit.window_seconds = 2;
        DescriptorStatus {
            code,
            current_limit: Some(limit),
            limit_remaining: remaining,
            duration_until_reset: Some(reset),
        }
    }

    fn written(style: HeaderStyle, s: &DescriptorStatus, denied: bool) -> Vec<(String, String)> {
        let mut h = HeaderMap::new();
        write(style, s, s.current_limit.as_ref().unwrap(), denied, &mut h);
        let mut v: Vec<(String, String)> = h
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        v.sort();
        v
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn writes_each_style() {
        let ok = status(Code::Ok, 7, 1, "");
        assert_eq!(
            written(HeaderStyle::Ietf, &ok, false),
            pairs(&[
                ("ratelimit", "\"default\";r=7;t=1"),
                ("ratelimit-policy", "\"default\";q=20;w=2")
            ])
        );
        let over = status(Code::OverLimit, 0, 3, "per \"ip\"");
        assert_eq!(
            written(HeaderStyle::Ietf, &over, true),
            pairs(&[
                ("ratelimit", "\"per \\\"ip\\\"\";r=0;t=3"),
                ("ratelimit-policy", "\"per \\\"ip\\\"\";q=20;w=2"),
                ("retry-after", "3"),
            ])
        );
        assert_eq!(
            written(HeaderStyle::Draft03, &ok, false),
            pairs(&[
                ("ratelimit-limit", "20"),
                ("ratelimit-remaining", "7"),
                ("ratelimit-reset", "1")
            ])
        );
        assert_eq!(
            written(HeaderStyle::XRatelimit, &over, true),
            pairs(&[
                ("retry-after", "3"),
                ("x-ratelimit-after", "3"),
                ("x-ratelimit-limit", "20"),
                ("x-ratelimit-remaining", "0"),
            ])
        );
        assert_eq!(written(HeaderStyle::None, &ok, false), []);
    }

    #[test]
    fn the_policy_follows_the_limit_reported() {
        let policy = |s: &DescriptorStatus| {
            written(HeaderStyle::Ietf, s, false)
                .into_iter()
                .find(|(k, _)| k == "ratelimit-policy")
                .unwrap()
                .1
        };
        let a = status(Code::Ok, 1, 1, "a");
        let mut wider = status(Code::Ok, 1, 1, "a");
        wider.current_limit.as_mut().unwrap().capacity = 30;
        assert_eq!(policy(&a), "\"a\";q=20;w=2");
        assert_eq!(policy(&wider), "\"a\";q=30;w=2");
        assert_eq!(policy(&status(Code::Ok, 1, 1, "b")), "\"b\";q=20;w=2");
        assert_eq!(policy(&a), "\"a\";q=20;w=2");
    }

    #[test]
    fn reports_the_binding_limit() {
        let resp = |s: Vec<DescriptorStatus>| Response {
            statuses: s.into(),
            ..Response::default()
        };
        let unmatched = DescriptorStatus::default();
        let r = resp(vec![
            unmatched.clone(),
            status(Code::Ok, 5, 1, "a"),
            status(Code::Ok, 2, 1, "b"),
        ]);
        assert_eq!(binding(&r).unwrap().1.name, "b");
        let r = resp(vec![
            status(Code::Ok, 0, 1, "a"),
            status(Code::OverLimit, 0, 1, "c"),
        ]);
        assert_eq!(binding(&r).unwrap().1.name, "c");
        assert!(binding(&resp(vec![unmatched])).is_none());
    }
}
