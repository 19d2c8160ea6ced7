//! Translation between the generated protobuf types and `ratelimit-core`'s plain types.
//! No decisions here: only field-by-field mapping.

use prost_types::{ListValue, Struct, Value, value::Kind};
use ratelimit_core::{Code, Descriptor, Entry, LimitOverride, Request, Response, Unit};

use crate::pb::envoy::config::core::v3::HeaderValue;
use crate::pb::{descriptor as d, rls};

/// A request the core cannot take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRequest(pub String);

/// Converts a gRPC request. Only a request override with unit `UNKNOWN` (or a number that is
/// no unit) is refused: upstream would crash on it.
pub fn request_from_pb(req: rls::RateLimitRequest) -> Result<Request, BadRequest> {
    let descriptors = req
        .descriptors
        .into_iter()
        .map(|pd| {
            let limit = match pd.limit {
                None => None,
                Some(o) => Some(LimitOverride {
                    requests_per_unit: o.requests_per_unit,
                    unit: Unit::from_proto_number(o.unit).ok_or_else(|| {
                        BadRequest(format!(
                            "rate limit override has no valid unit ({})",
                            o.unit
                        ))
                    })?,
                }),
            };
            Ok(Descriptor {
                entries: pd
                    .entries
                    .into_iter()
                    .map(|e| Entry {
                        key: e.key,
                        value: e.value,
                    })
                    .collect(),
                limit,
                hits_addend: pd.hits_addend,
            })
        })
        .collect::<Result<Vec<_>, BadRequest>>()?;
    Ok(Request {
        domain: req.domain,
        descriptors,
        hits_addend: req.hits_addend,
    })
}

/// Converts a core request to its protobuf form (used by clients and tests).
pub fn request_to_pb(req: &Request) -> rls::RateLimitRequest {
    rls::RateLimitRequest {
        domain: req.domain.clone(),
        hits_addend: req.hits_addend,
        descriptors: req
            .descriptors
            .iter()
            .map(|x| d::RateLimitDescriptor {
                entries: x
                    .entries
                    .iter()
                    .map(|e| d::rate_limit_descriptor::Entry {
                        key: e.key.clone(),
                        value: e.value.clone(),
                    })
                    .collect(),
                limit: x
                    .limit
                    .map(|o| d::rate_limit_descriptor::RateLimitOverride {
                        requests_per_unit: o.requests_per_unit,
                        unit: o.unit.proto_number(),
                    }),
                hits_addend: x.hits_addend,
                is_negative_hits: false,
            })
            .collect(),
    }
}

fn code(c: Code) -> i32 {
    c.proto_number()
}

/// Converts a decision to the wire response.
pub fn response_to_pb(resp: &Response) -> rls::RateLimitResponse {
    rls::RateLimitResponse {
        overall_code: code(resp.overall_code),
        statuses: resp
            .statuses
            .iter()
            .map(|s| rls::rate_limit_response::DescriptorStatus {
                code: code(s.code),
                current_limit: s.current_limit.as_ref().map(|l| {
                    rls::rate_limit_response::RateLimit {
                        name: l.name.clone(),
                        requests_per_unit: l.requests_per_unit,
                        unit: l.unit.proto_number(),
                    }
                }),
                limit_remaining: s.limit_remaining,
                duration_until_reset: s.duration_until_reset.map(|secs| prost_types::Duration {
                    seconds: i64::try_from(secs).unwrap_or(i64::MAX),
                    nanos: 0,
                }),
                quota: None,
            })
            .collect(),
        response_headers_to_add: resp
            .response_headers_to_add
            .iter()
            .map(|h| HeaderValue {
                key: h.key.clone(),
                value: h.value.clone(),
                raw_value: Vec::new(),
            })
            .collect(),
        request_headers_to_add: Vec::new(),
        raw_body: Vec::new(),
        dynamic_metadata: resp.dynamic_metadata.as_deref().map(json_to_struct),
        quota: None,
    }
}

/// Reads a wire response back into core types (clients and tests compare with `/json`).
pub fn response_from_pb(resp: &rls::RateLimitResponse) -> Response {
    let code = |n: i32| match n {
        1 => Code::Ok,
        2 => Code::OverLimit,
        _ => Code::Unknown,
    };
    Response {
        overall_code: code(resp.overall_code),
        statuses: resp
            .statuses
            .iter()
            .map(|s| ratelimit_core::DescriptorStatus {
                code: code(s.code),
                current_limit: s.current_limit.as_ref().and_then(|l| {
                    Some(ratelimit_core::CurrentLimit::fixed(
                        l.requests_per_unit,
                        Unit::from_proto_number(l.unit)?,
                        l.name.clone(),
                    ))
                }),
                limit_remaining: s.limit_remaining,
                duration_until_reset: s
                    .duration_until_reset
                    .as_ref()
                    .map(|d| u64::try_from(d.seconds).unwrap_or(0)),
            })
            .collect(),
        response_headers_to_add: resp
            .response_headers_to_add
            .iter()
            .map(|h| ratelimit_core::Header {
                key: h.key.clone(),
                value: h.value.clone(),
            })
            .collect(),
        dynamic_metadata: resp
            .dynamic_metadata
            .as_ref()
            .map(|s| Box::new(struct_to_json(s))),
    }
}

/// JSON object to `google.protobuf.Struct` (numbers become doubles, as Struct requires).
pub fn json_to_struct(m: &serde_json::Map<String, serde_json::Value>) -> Struct {
    Struct {
        fields: m
            .iter()
            .map(|(k, v)| (k.clone(), json_to_value(v)))
            .collect(),
    }
}

fn json_to_value(v: &serde_json::Value) -> Value {
    let kind = match v {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(*b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Kind::StringValue(s.clone()),
        serde_json::Value::Array(a) => Kind::ListValue(ListValue {
            values: a.iter().map(json_to_value).collect(),
        }),
        serde_json::Value::Object(o) => Kind::StructValue(json_to_struct(o)),
    };
    Value { kind: Some(kind) }
}

/// `google.protobuf.Struct` to JSON; whole doubles become integers, as protojson prints them.
pub fn struct_to_json(s: &Struct) -> serde_json::Map<String, serde_json::Value> {
    s.fields
        .iter()
        .map(|(k, v)| (k.clone(), value_to_json(v)))
        .collect()
}

fn value_to_json(v: &Value) -> serde_json::Value {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => serde_json::Value::Bool(*b),
        Some(Kind::NumberValue(n)) => {
            if n.fract() == 0.0 && n.abs() < 9.0e15 {
                serde_json::Value::from(*n as i64)
            } else {
                serde_json::Number::from_f64(*n)
                    .map_or(serde_json::Value::Null, serde_json::Value::Number)
            }
        }
        Some(Kind::StringValue(s)) => serde_json::Value::String(s.clone()),
        Some(Kind::ListValue(l)) => {
            serde_json::Value::Array(l.values.iter().map(value_to_json).collect())
        }
        Some(Kind::StructValue(s)) => serde_json::Value::Object(struct_to_json(s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trip_and_week_override() {
        let mut r = Request::new(
            "d",
            vec![
                Descriptor::new([("k", "v")])
                    .with_limit(3, Unit::Week)
                    .with_hits(0),
            ],
        );
        r.hits_addend = 4;
        let pb = request_to_pb(&r);
        assert_eq!(pb.descriptors[0].limit.unwrap().unit, 7);
        assert_eq!(request_from_pb(pb).unwrap(), r);
    }

    #[test]
    fn unknown_override_unit_is_refused() {
        let mut pb = request_to_pb(&Request::new(
            "d",
            vec![Descriptor::new([("k", "v")]).with_limit(1, Unit::Second)],
        ));
        pb.descriptors[0].limit.as_mut().unwrap().unit = 0;
        assert!(request_from_pb(pb.clone()).is_err());
        pb.descriptors[0].limit.as_mut().unwrap().unit = 99;
        assert!(request_from_pb(pb).is_err());
    }

    #[test]
    fn metadata_round_trips() {
        let v: serde_json::Value =
            serde_json::json!({"a": 1, "b": [true, "x", 1.5], "c": {"d": null}});
        let m = v.as_object().unwrap();
        assert_eq!(&struct_to_json(&json_to_struct(m)), m);
    }
}
