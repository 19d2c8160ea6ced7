//! The proto3 JSON mapping of `RateLimitRequest` and `RateLimitResponse`, as served on
//! `POST /json`.
//!
//! Parsing is as strict as upstream's (protojson): unknown fields, wrong types and
//! duplicate fields are errors. Both the JSON names (`hitsAddend`) and the proto field
//! names (`hits_addend`) are accepted, 64-bit integers may be strings, enums may be names
//! or numbers, and `null` means "not set".

use std::fmt::Write as _;

use serde::Deserialize;
use serde::de::{self, Deserializer};

use crate::types::{Code, Descriptor, Entry, LimitOverride, Request, Response};
use crate::unit::Unit;

/// Why a `/json` body was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid request body: {0}")]
pub struct JsonError(pub String);

/// Accepts only a JSON object for `T`: serde's derived structs would also take an array
/// (as a tuple), which protojson rejects.
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> de::Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData)).map(Obj)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    #[serde(default, deserialize_with = "opt_string")]
    domain: Option<String>,
    #[serde(default, deserialize_with = "opt_list")]
    descriptors: Option<Vec<Obj<RawDescriptor>>>,
    #[serde(
        default,
        rename = "hitsAddend",
        alias = "hits_addend",
        deserialize_with = "opt_u32"
    )]
    hits_addend: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDescriptor {
    #[serde(default, deserialize_with = "opt_list")]
    entries: Option<Vec<Obj<RawEntry>>>,
    #[serde(default)]
    limit: Option<Obj<RawOverride>>,
    #[serde(
        default,
        rename = "hitsAddend",
        alias = "hits_addend",
        deserialize_with = "opt_u64"
    )]
    hits_addend: Option<u64>,
    // Newer Envoy sends this; upstream's server ignores it and so do we.
    #[serde(default, rename = "isNegativeHits", alias = "is_negative_hits")]
    _is_negative_hits: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    #[serde(default, deserialize_with = "opt_string")]
    key: Option<String>,
    #[serde(default, deserialize_with = "opt_string")]
    value: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOverride {
    #[serde(
        default,
        rename = "requestsPerUnit",
        alias = "requests_per_unit",
        deserialize_with = "opt_u32"
    )]
    requests_per_unit: Option<u32>,
    #[serde(default, deserialize_with = "opt_unit")]
    unit: Option<i64>,
}

fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d)
}

fn opt_list<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Vec<T>>, D::Error> {
    Option::<Vec<T>>::deserialize(d)
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrStr {
    Num(serde_json::Number),
    Str(String),
}

fn int_from<E: de::Error>(v: NumOrStr, max: u64) -> Result<u64, E> {
    let n = match v {
        NumOrStr::Num(n) => {
            if let Some(u) = n.as_u64() {
                u
            } else if let Some(f) = n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= max as f64)
            {
                f as u64
            } else {
                return Err(E::custom(format!("invalid unsigned integer {n}")));
            }
        }
        NumOrStr::Str(s) => s
            .parse::<u64>()
            .map_err(|_| E::custom(format!("invalid unsigned integer {s:?}")))?,
    };
    if n > max {
        return Err(E::custom(format!("integer {n} out of range")));
    }
    Ok(n)
}

fn opt_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    Option::<NumOrStr>::deserialize(d)?
        .map(|v| int_from::<D::Error>(v, u64::from(u32::MAX)).map(|n| n as u32))
        .transpose()
}

fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<NumOrStr>::deserialize(d)?
        .map(|v| int_from::<D::Error>(v, u64::MAX))
        .transpose()
}

fn opt_unit<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match Option::<NumOrStr>::deserialize(d)? {
        None => Ok(None),
        Some(NumOrStr::Num(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| de::Error::custom(format!("invalid unit {n}"))),
        Some(NumOrStr::Str(s)) => {
            if s == "UNKNOWN" {
                return Ok(Some(0));
            }
            // Enum names are case-sensitive in proto3 JSON.
            Unit::ALL
                .into_iter()
                .find(|u| u.name() == s)
                .map(|u| Some(i64::from(u.proto_number())))
                .ok_or_else(|| de::Error::custom(format!("invalid unit {s:?}")))
        }
    }
}

/// Parses a `/json` request body.
pub fn parse_request(body: &[u8]) -> Result<Request, JsonError> {
    let Obj(raw): Obj<RawRequest> =
        serde_json::from_slice(body).map_err(|e| JsonError(e.to_string()))?;
    let descriptors = raw
        .descriptors
        .unwrap_or_default()
        .into_iter()
        .map(|Obj(d)| {
            let limit = match d.limit {
                None => None,
                Some(Obj(o)) => {
                    let n = o.unit.unwrap_or(0);
                    let unit = i32::try_from(n)
                        .ok()
                        .and_then(Unit::from_proto_number)
                        .ok_or_else(|| JsonError(format!("limit.unit {n} is not a valid unit")))?;
                    Some(LimitOverride {
                        requests_per_unit: o.requests_per_unit.unwrap_or(0),
                        unit,
                    })
                }
            };
            Ok(Descriptor {
                entries: d
                    .entries
                    .unwrap_or_default()
                    .into_iter()
                    .map(|Obj(e)| Entry {
                        key: e.key.unwrap_or_default(),
                        value: e.value.unwrap_or_default(),
                    })
                    .collect(),
                limit,
                hits_addend: d.hits_addend,
            })
        })
        .collect::<Result<Vec<_>, JsonError>>()?;
    Ok(Request {
        domain: raw.domain.unwrap_or_default(),
        descriptors,
        hits_addend: raw.hits_addend.unwrap_or(0),
    })
}

fn push_json_str(out: &mut String, s: &str) {
    // serde_json's escaping cannot fail for a &str.
    out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
}

/// Writes a response in proto3 JSON (zero values omitted, enums by name, durations as
/// `"58s"`).
pub fn write_response(resp: &Response) -> String {
    let mut out = String::with_capacity(64 + 96 * resp.statuses.len());
    out.push('{');
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !first {
            out.push(',');
        }
        first = false;
    };
    if resp.overall_code != Code::Unknown {
        sep(&mut out);
        let _ = write!(out, "\"overallCode\":\"{}\"", resp.overall_code.name());
    }
    if !resp.statuses.is_empty() {
        sep(&mut out);
        out.push_str("\"statuses\":[");
        for (i, s) in resp.statuses.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('{');
            let mut parts: Vec<String> = Vec::with_capacity(4);
            if s.code != Code::Unknown {
                parts.push(format!("\"code\":\"{}\"", s.code.name()));
            }
            if let Some(l) = &s.current_limit {
                let mut cl = String::from("\"currentLimit\":{");
                let mut inner = Vec::with_capacity(3);
                if l.requests_per_unit != 0 {
                    inner.push(format!("\"requestsPerUnit\":{}", l.requests_per_unit));
                }
                inner.push(format!("\"unit\":\"{}\"", l.unit.name()));
                if !l.name.is_empty() {
                    let mut n = String::from("\"name\":");
                    push_json_str(&mut n, &l.name);
                    inner.push(n);
                }
                cl.push_str(&inner.join(","));
                cl.push('}');
                parts.push(cl);
            }
            if s.limit_remaining != 0 {
                parts.push(format!("\"limitRemaining\":{}", s.limit_remaining));
            }
            if let Some(d) = s.duration_until_reset {
                parts.push(format!("\"durationUntilReset\":\"{d}s\""));
            }
            out.push_str(&parts.join(","));
            out.push('}');
        }
        out.push(']');
    }
    if !resp.response_headers_to_add.is_empty() {
        sep(&mut out);
        out.push_str("\"responseHeadersToAdd\":[");
        for (i, h) in resp.response_headers_to_add.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"key\":");
            push_json_str(&mut out, &h.key);
            out.push_str(",\"value\":");
            push_json_str(&mut out, &h.value);
            out.push('}');
        }
        out.push(']');
    }
    if let Some(md) = &resp.dynamic_metadata {
        sep(&mut out);
        out.push_str("\"dynamicMetadata\":");
        out.push_str(&serde_json::to_string(md).unwrap_or_else(|_| "{}".into()));
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{CurrentLimit, DescriptorStatus};

    #[test]
    fn parses_both_spellings_and_string_integers() {
        let r = parse_request(
            br#"{"domain":"d","hits_addend":"3","descriptors":[{"entries":[{"key":"k","value":"v"}],
               "limit":{"requests_per_unit":5,"unit":"HOUR"},"hitsAddend":"0"}]}"#,
        )
        .unwrap();
        assert_eq!(r.hits_addend, 3);
        assert_eq!(r.descriptors[0].hits_addend, Some(0));
        assert_eq!(
            r.descriptors[0].limit,
            Some(LimitOverride {
                requests_per_unit: 5,
                unit: Unit::Hour
            })
        );
        let r = parse_request(br#"{"domain":"d","descriptors":[{"limit":{"unit":7}}]}"#).unwrap();
        assert_eq!(r.descriptors[0].limit.unwrap().unit, Unit::Week);
    }

    #[test]
    fn rejects_what_protojson_rejects() {
        for bad in [
            &b""[..],
            b"{",
            b"[]",
            b"{\"domian\":\"x\"}",
            b"{\"domain\":1}",
            b"{\"domain\":\"a\",\"domain\":\"b\"}",
            b"{\"hitsAddend\":-1}",
            b"{\"hitsAddend\":4294967296}",
            b"{\"descriptors\":[{\"limit\":{\"unit\":\"minute\"}}]}",
            b"{\"descriptors\":[{\"limit\":{\"unit\":\"UNKNOWN\"}}]}",
            b"{\"descriptors\":[{\"entries\":[{\"key\":\"k\",\"extra\":1}]}]}",
            b"\xff\xfe",
        ] {
            assert!(
                parse_request(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn writes_proto3_json() {
        let resp = Response {
            overall_code: Code::OverLimit,
            statuses: vec![
                DescriptorStatus {
                    code: Code::OverLimit,
                    current_limit: Some(CurrentLimit::fixed(1, Unit::Minute, "")),
                    limit_remaining: 0,
                    duration_until_reset: Some(23),
                },
                DescriptorStatus {
                    code: Code::Ok,
                    ..Default::default()
                },
            ]
            .into(),
            ..Default::default()
        };
        assert_eq!(
            write_response(&resp),
            r#"{"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"requestsPerUnit":1,"unit":"MINUTE"},"durationUntilReset":"23s"},{"code":"OK"}]}"#
        );
        assert_eq!(write_response(&Response::default()), "{}");
    }
}
