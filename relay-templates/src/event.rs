//! The relay's event model: what an admission review or an Alertmanager notification
//! becomes, and the data layout templates see.
//!
//! Layout (as the original relay hands it to templates, after a JSON round trip, so
//! numbers are floats):
//!
//! ```text
//! {"time": "<now in the time layout>", "timeNano": <float>, "channel": "<path without />",
//!  "type": "K8sEvent" | "AlertmanagerEvent", "data": {...}}
//! ```
//!
//! * `K8sEvent` data: `kind`, `location` (`name` for Namespace/Node, else
//!   `namespace.name`), `operation` (`Create`, `Update`, `Delete`, `Connect`), `object`
//!   (absent when the request carries none, as for DELETE) and `user` `{id, name}`. Only
//!   the 14 kinds the original handles produce an event; others are accepted silently.
//! * `AlertmanagerEvent` data: one alert `{status, labels, annotations, startsAt, endsAt,
//!   generatorURL, fingerprint}`; one event per alert, group fields are not passed on.
//!
//! Inputs are checked the way Go's typed decoding would reject them (a number where a
//! string belongs, a list where an object belongs), with the JSON path in the message.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value as Json, json};

use crate::golayout::{self, GoTime};
use crate::relay::DEFAULT_TIME_FORMAT;
use crate::value::Value;

/// Why a request body is not a usable input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The body is empty.
    #[error("empty body")]
    Empty,
    /// The body is not JSON.
    #[error("invalid JSON: {0}")]
    Json(String),
    /// The JSON does not have the expected shape.
    #[error("{0}")]
    Shape(String),
}

/// The kind of an event, printed by templates as `.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventType {
    /// From an admission review.
    K8s,
    /// One alert of an Alertmanager notification.
    Alertmanager,
}

impl EventType {
    /// The name templates compare against (`eq .type "K8sEvent"`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::K8s => "K8sEvent",
            EventType::Alertmanager => "AlertmanagerEvent",
        }
    }
}

/// When and where an input arrived; supplied by the caller so this crate reads no clock.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// Channel: the request path without its leading `/` (e.g. `k8s`).
    pub channel: String,
    /// Receive time.
    pub now: DateTime<Utc>,
    /// Go layout for the `time` field (`EVENTS_TEMPLATE_TIME_FORMAT`).
    pub time_format: String,
}

impl Arrival {
    /// An arrival on `path` at `now` with the default time layout.
    pub fn new(path: &str, now: DateTime<Utc>) -> Arrival {
        Arrival {
            channel: path.trim_start_matches('/').to_string(),
            now,
            time_format: DEFAULT_TIME_FORMAT.to_string(),
        }
    }
}

/// One event to render and send.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Event type.
    pub kind: EventType,
    /// The whole template data (`time`, `timeNano`, `channel`, `type`, `data`).
    pub json: Json,
}

impl Event {
    fn new(kind: EventType, arrival: &Arrival, data: Json) -> Event {
        let time = golayout::format(&GoTime::utc(arrival.now), &arrival.time_format);
        let nanos = arrival.now.timestamp_nanos_opt().unwrap_or(0);
        Event {
            kind,
            json: json!({
                "time": time,
                "timeNano": nanos,
                "channel": arrival.channel,
                "type": kind.as_str(),
                "data": data,
            }),
        }
    }

    /// The template data (numbers as floats, as Go sees them).
    pub fn to_value(&self) -> Value {
        Value::from_json(&self.json)
    }
}

/// A decoded admission review: what the HTTP answer echoes, plus the event (if the kind
/// is one the relay reports).
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    /// `apiVersion` of the review (echoed in the answer).
    pub api_version: String,
    /// `kind` of the review (echoed in the answer).
    pub kind: String,
    /// `request.uid` (echoed in the answer).
    pub uid: String,
    /// `request.dryRun`.
    pub dry_run: bool,
    /// The event, or `None` for kinds the relay does not report.
    pub event: Option<Event>,
}

impl Admission {
    /// The answer the API server expects: always allowed, uid echoed, and the
    /// `apiVersion`/`kind` envelope that `admission.k8s.io/v1` requires.
    pub fn response(&self) -> Json {
        let api_version = if self.api_version.is_empty() {
            "admission.k8s.io/v1"
        } else {
            &self.api_version
        };
        json!({
            "apiVersion": api_version,
            "kind": if self.kind.is_empty() { "AdmissionReview" } else { &self.kind },
            "response": {"uid": self.uid, "allowed": true},
        })
    }
}

/// Kinds the original reports; `true` for cluster-scoped ones.
const KINDS: &[(&str, bool)] = &[
    ("Namespace", true),
    ("Node", true),
    ("ReplicaSet", false),
    ("StatefulSet", false),
    ("DaemonSet", false),
    ("Secret", false),
    ("Ingress", false),
    ("CronJob", false),
    ("Job", false),
    ("ConfigMap", false),
    ("Role", false),
    ("Deployment", false),
    ("Service", false),
    ("Pod", false),
];

fn decode(body: &[u8]) -> Result<Json, InputError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(InputError::Empty);
    }
    serde_json::from_slice(body).map_err(|e| InputError::Json(e.to_string()))
}

fn type_name(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

fn shape(path: &str, want: &str, got: &Json) -> InputError {
    InputError::Shape(format!("{path}: expected {want}, got {}", type_name(got)))
}

/// An optional object field (null counts as absent, as in Go).
fn obj<'a>(
    m: &'a Map<String, Json>,
    key: &str,
    path: &str,
) -> Result<Option<&'a Map<String, Json>>, InputError> {
    match m.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Object(o)) => Ok(Some(o)),
        Some(other) => Err(shape(&format!("{path}{key}"), "an object", other)),
    }
}

/// An optional string field; absent or null is "".
fn string<'a>(m: &'a Map<String, Json>, key: &str, path: &str) -> Result<&'a str, InputError> {
    match m.get(key) {
        None | Some(Json::Null) => Ok(""),
        Some(Json::String(s)) => Ok(s),
        Some(other) => Err(shape(&format!("{path}{key}"), "a string", other)),
    }
}

fn string_map(m: &Map<String, Json>, key: &str, path: &str) -> Result<Json, InputError> {
    match m.get(key) {
        None | Some(Json::Null) => Ok(Json::Null),
        Some(Json::Object(o)) => {
            for (k, v) in o {
                if !v.is_string() {
                    return Err(shape(&format!("{path}{key}.{k}"), "a string", v));
                }
            }
            Ok(Json::Object(o.clone()))
        }
        Some(other) => Err(shape(
            &format!("{path}{key}"),
            "an object of strings",
            other,
        )),
    }
}

/// Parses an admission review (`admission.k8s.io/v1` or `v1beta1`).
///
/// ```
/// use relay_templates::event::{parse_admission, Arrival};
/// let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
///   "request":{"uid":"u1","kind":{"kind":"Namespace"},"name":"shop","operation":"CREATE",
///   "userInfo":{"username":"alice"}}}"#;
/// let a = parse_admission(body, &Arrival::new("/k8s", chrono::DateTime::UNIX_EPOCH)).unwrap();
/// assert_eq!(a.uid, "u1");
/// let data = &a.event.unwrap().json["data"];
/// assert_eq!(data["location"], "shop");
/// assert_eq!(data["operation"], "Create");
/// ```
pub fn parse_admission(body: &[u8], arrival: &Arrival) -> Result<Admission, InputError> {
    let v = decode(body)?;
    let Json::Object(top) = &v else {
        return Err(shape("admission review", "an object", &v));
    };
    let api_version = string(top, "apiVersion", "")?.to_string();
    let kind = string(top, "kind", "")?.to_string();
    let Some(req) = obj(top, "request", "")? else {
        return Err(InputError::Shape("admission review has no request".into()));
    };
    let uid = string(req, "uid", "request.")?.to_string();
    let dry_run = match req.get("dryRun") {
        None | Some(Json::Null) => false,
        Some(Json::Bool(b)) => *b,
        Some(other) => return Err(shape("request.dryRun", "a boolean", other)),
    };
    let object_kind = match obj(req, "kind", "request.")? {
        Some(k) => string(k, "kind", "request.kind.")?,
        None => "",
    };
    let operation = string(req, "operation", "request.")?;
    let user = obj(req, "userInfo", "request.")?;
    let (user_name, user_id) = match user {
        Some(u) => (
            string(u, "username", "request.userInfo.")?,
            string(u, "uid", "request.userInfo.")?,
        ),
        None => ("", ""),
    };
    let object = match req.get("object") {
        None | Some(Json::Null) => None,
        Some(o @ Json::Object(_)) => Some(o),
        Some(other) => return Err(shape("request.object", "an object", other)),
    };
    if let Some(o) = req.get("oldObject") {
        if !(o.is_null() || o.is_object()) {
            return Err(shape("request.oldObject", "an object", o));
        }
    }
    let meta = match object {
        Some(Json::Object(o)) => obj(o, "metadata", "request.object.")?,
        _ => None,
    };
    let pick = |key: &str| -> Result<String, InputError> {
        let from_object = match meta {
            Some(m) => string(m, key, "request.object.metadata.")?,
            None => "",
        };
        if from_object.is_empty() {
            Ok(string(req, key, "request.")?.to_string())
        } else {
            Ok(from_object.to_string())
        }
    };
    let name = pick("name")?;
    let namespace = pick("namespace")?;
    let event = match KINDS.iter().find(|(k, _)| *k == object_kind) {
        None => None,
        Some((_, cluster_scoped)) => {
            let location = if *cluster_scoped {
                name
            } else {
                format!("{namespace}.{name}")
            };
            let mut data = Map::new();
            data.insert("kind".into(), json!(object_kind));
            data.insert("location".into(), json!(location));
            data.insert(
                "operation".into(),
                json!(crate::relay::go_title(&operation.to_lowercase())),
            );
            if let Some(o) = object {
                data.insert("object".into(), o.clone());
            }
            data.insert("user".into(), json!({"id": user_id, "name": user_name}));
            Some(Event::new(EventType::K8s, arrival, Json::Object(data)))
        }
    };
    Ok(Admission {
        api_version,
        kind,
        uid,
        dry_run,
        event,
    })
}

const RFC3339: &str = "2006-01-02T15:04:05Z07:00";
const RFC3339_NANO: &str = "2006-01-02T15:04:05.999999999Z07:00";

/// Go's `time.Time` JSON round trip: RFC 3339 in, RFC 3339 with trimmed nanoseconds out;
/// absent or null is the zero time.
fn alert_time(m: &Map<String, Json>, key: &str, path: &str) -> Result<String, InputError> {
    match m.get(key) {
        None | Some(Json::Null) => Ok("0001-01-01T00:00:00Z".to_string()),
        Some(Json::String(s)) => {
            let t = golayout::parse(RFC3339, s)
                .map_err(|e| InputError::Shape(format!("{path}{key}: {e}")))?;
            Ok(golayout::format(&t, RFC3339_NANO))
        }
        Some(other) => Err(shape(
            &format!("{path}{key}"),
            "an RFC 3339 time string",
            other,
        )),
    }
}

/// Parses an Alertmanager webhook notification into one event per alert.
///
/// ```
/// use relay_templates::event::{parse_alertmanager, Arrival};
/// let body = br#"{"status":"firing","alerts":[{"status":"firing","labels":{"alertname":"A"},
///   "startsAt":"2024-03-18T10:00:00Z"}]}"#;
/// let events = parse_alertmanager(body, &Arrival::new("/alertmanager", chrono::DateTime::UNIX_EPOCH)).unwrap();
/// assert_eq!(events.len(), 1);
/// assert_eq!(events[0].json["data"]["labels"]["alertname"], "A");
/// assert_eq!(events[0].json["data"]["endsAt"], "0001-01-01T00:00:00Z");
/// ```
pub fn parse_alertmanager(body: &[u8], arrival: &Arrival) -> Result<Vec<Event>, InputError> {
    let v = decode(body)?;
    let Json::Object(top) = &v else {
        return Err(shape("alertmanager notification", "an object", &v));
    };
    for key in ["receiver", "status", "externalURL", "version", "groupKey"] {
        string(top, key, "")?;
    }
    for key in ["groupLabels", "commonLabels", "commonAnnotations"] {
        string_map(top, key, "")?;
    }
    if let Some(t) = top.get("truncatedAlerts") {
        if !(t.is_null() || t.is_u64()) {
            return Err(shape("truncatedAlerts", "a non-negative integer", t));
        }
    }
    let alerts = match top.get("alerts") {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Array(a)) => a,
        Some(other) => return Err(shape("alerts", "an array", other)),
    };
    let mut events = Vec::with_capacity(alerts.len());
    for (i, a) in alerts.iter().enumerate() {
        let path = format!("alerts[{i}].");
        let Json::Object(a) = a else {
            return Err(shape(&format!("alerts[{i}]"), "an object", a));
        };
        let data = json!({
            "status": string(a, "status", &path)?,
            "labels": string_map(a, "labels", &path)?,
            "annotations": string_map(a, "annotations", &path)?,
            "startsAt": alert_time(a, "startsAt", &path)?,
            "endsAt": alert_time(a, "endsAt", &path)?,
            "generatorURL": string(a, "generatorURL", &path)?,
            "fingerprint": string(a, "fingerprint", &path)?,
        });
        events.push(Event::new(EventType::Alertmanager, arrival, data));
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Arrival {
        Arrival::new("/k8s", DateTime::UNIX_EPOCH)
    }

    #[test]
    fn wrong_shapes_are_named() {
        let e = |b: &str| {
            parse_admission(b.as_bytes(), &at())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(e(""), "empty body");
        assert!(e("{").starts_with("invalid JSON"));
        assert_eq!(e("[]"), "admission review: expected an object, got array");
        assert_eq!(e("{}"), "admission review has no request");
        assert_eq!(
            e(r#"{"request":{"uid":5}}"#),
            "request.uid: expected a string, got number"
        );
        assert_eq!(
            e(r#"{"request":{"object":[1]}}"#),
            "request.object: expected an object, got array"
        );
        let a = |b: &str| {
            parse_alertmanager(b.as_bytes(), &at())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            a(r#"{"alerts":{}}"#),
            "alerts: expected an array, got object"
        );
        assert_eq!(
            a(r#"{"alerts":[{"labels":{"x":1}}]}"#),
            "alerts[0].labels.x: expected a string, got number"
        );
        assert!(
            a(r#"{"alerts":[{"startsAt":"yesterday"}]}"#)
                .starts_with("alerts[0].startsAt: parsing time")
        );
    }

    #[test]
    fn unknown_kinds_are_accepted_without_event() {
        let a =
            parse_admission(br#"{"request":{"uid":"x","kind":{"kind":"Lease"}}}"#, &at()).unwrap();
        assert!(a.event.is_none());
        assert_eq!(
            a.response()["response"],
            json!({"uid": "x", "allowed": true})
        );
        assert_eq!(a.response()["apiVersion"], "admission.k8s.io/v1");
    }

    #[test]
    fn event_time_uses_the_layout() {
        let now = DateTime::parse_from_rfc3339("2024-03-18T10:04:05.120Z")
            .unwrap()
            .to_utc();
        let ev = parse_alertmanager(br#"{"alerts":[{}]}"#, &Arrival::new("/am", now)).unwrap();
        assert_eq!(ev[0].json["time"], "2024-03-18T10:04:05.12Z");
        assert_eq!(ev[0].json["channel"], "am");
        assert_eq!(ev[0].json["timeNano"], 1710756245120000000i64);
        assert_eq!(ev[0].json["data"]["labels"], Json::Null);
    }
}
