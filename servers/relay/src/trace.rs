//! OTLP traces over HTTP with the JSON encoding (`POST <endpoint>/v1/traces`,
//! `application/json`), which every OpenTelemetry collector accepts. One span per event
//! (from arrival to the end of rendering) and a child per output delivery.
//!
//! Hand-written on purpose: the OpenTelemetry SDK with its OTLP exporter would bring a
//! second HTTP stack and protobuf code for what is a small JSON document here.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::Method;
use serde_json::{Value as Json, json};

use crate::client::HttpClient;
use crate::settings::TraceSettings;

/// Identifies a span so children can point at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanContext {
    /// 16 bytes, lowercase hex.
    pub trace_id: String,
    /// 8 bytes, lowercase hex.
    pub span_id: String,
}

/// Spans finished and not yet exported, at most this many (older ones are dropped when a
/// collector is unreachable, so memory stays bounded).
pub const MAX_PENDING: usize = 4096;

/// Collects finished spans and exports them in batches.
pub struct Tracer {
    settings: TraceSettings,
    pending: Mutex<Vec<Json>>,
    seq: AtomicU64,
    seed: u64,
}

fn mix(mut x: u64) -> u64 {
    // splitmix64: ids need to be unique, not secret.
    x = x.wrapping_add(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

fn nanos(t: DateTime<Utc>) -> String {
    t.timestamp_nanos_opt().unwrap_or(0).to_string()
}

fn attributes(attrs: &[(&str, &str)]) -> Json {
    Json::Array(
        attrs
            .iter()
            .map(|(k, v)| json!({"key": k, "value": {"stringValue": v}}))
            .collect(),
    )
}

impl Tracer {
    /// A tracer for `settings`.
    pub fn new(settings: TraceSettings) -> Tracer {
        let seed =
            crate::now().timestamp_nanos_opt().unwrap_or(0) as u64 ^ u64::from(std::process::id());
        Tracer {
            settings,
            pending: Mutex::new(Vec::new()),
            seq: AtomicU64::new(0),
            seed,
        }
    }

    fn id(&self) -> u64 {
        mix(self.seed ^ mix(self.seq.fetch_add(1, Ordering::Relaxed)))
    }

    /// A new trace's root span context; `trace_id` comes from the request's trace header
    /// when it is 32 hex digits.
    pub fn root(&self, trace_id: Option<&str>) -> SpanContext {
        let trace_id = match trace_id {
            Some(t) if t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()) => {
                t.to_ascii_lowercase()
            }
            _ => format!("{:016x}{:016x}", self.id(), self.id()),
        };
        SpanContext {
            trace_id,
            span_id: format!("{:016x}", self.id()),
        }
    }

    fn push(&self, span: Json) {
        if let Ok(mut p) = self.pending.lock() {
            if p.len() >= MAX_PENDING {
                p.remove(0);
            }
            p.push(span);
        }
    }

    /// Records the finished span `ctx` (a root: no parent).
    pub fn finish(
        &self,
        ctx: &SpanContext,
        name: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        attrs: &[(&str, &str)],
    ) {
        self.push(json!({
            "traceId": ctx.trace_id,
            "spanId": ctx.span_id,
            "name": name,
            "kind": 2,
            "startTimeUnixNano": nanos(start),
            "endTimeUnixNano": nanos(end),
            "attributes": attributes(attrs),
            "status": {"code": 1},
        }));
    }

    /// Records a finished child of `parent`; `error` marks it failed.
    pub fn child(
        &self,
        parent: &SpanContext,
        name: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        attrs: &[(&str, &str)],
        error: Option<&str>,
    ) {
        let status = match error {
            None => json!({"code": 1}),
            Some(e) => json!({"code": 2, "message": e}),
        };
        self.push(json!({
            "traceId": parent.trace_id,
            "spanId": format!("{:016x}", self.id()),
            "parentSpanId": parent.span_id,
            "name": name,
            "kind": 3,
            "startTimeUnixNano": nanos(start),
            "endTimeUnixNano": nanos(end),
            "attributes": attributes(attrs),
            "status": status,
        }));
    }

    /// The export document for `spans`.
    pub fn document(&self, spans: Vec<Json>) -> Json {
        json!({"resourceSpans": [{
            "resource": {"attributes": attributes(&[("service.name", &self.settings.service_name)])},
            "scopeSpans": [{"scope": {"name": "event-relay", "version": env!("CARGO_PKG_VERSION")}, "spans": spans}],
        }]})
    }

    /// Sends what is pending; on failure the batch is dropped (traces are best effort).
    pub async fn flush(&self, client: &HttpClient) -> Result<usize, String> {
        let spans = match self.pending.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(_) => return Err("span buffer poisoned".into()),
        };
        if spans.is_empty() {
            return Ok(0);
        }
        let n = spans.len();
        let body = Bytes::from(self.document(spans).to_string());
        let url = format!("{}/v1/traces", self.settings.endpoint.trim_end_matches('/'));
        let r = client
            .send(
                Method::POST,
                &url,
                &[("content-type", "application/json".into())],
                body,
                Duration::from_secs(10),
            )
            .await
            .map_err(|e| e.to_string())?;
        if r.status.is_success() {
            Ok(n)
        } else {
            Err(format!("HTTP {}", r.status.as_u16()))
        }
    }

    /// How often [`Tracer::flush`] should run.
    pub fn interval(&self) -> Duration {
        self.settings.flush.max(Duration::from_millis(10))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hex_and_children_point_at_parents() {
        let t = Tracer::new(TraceSettings {
            endpoint: "http://127.0.0.1:1".into(),
            service_name: "events".into(),
            flush: Duration::from_secs(1),
        });
        let root = t.root(None);
        assert_eq!(root.trace_id.len(), 32);
        assert_eq!(root.span_id.len(), 16);
        assert_ne!(t.root(None), root);
        let given = t.root(Some("4BF92F3577B34DA6A3CE929D0E0E4736"));
        assert_eq!(given.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        let now = crate::now();
        t.finish(&root, "event", now, now, &[]);
        t.child(
            &root,
            "send telegram",
            now,
            now,
            &[("output", "telegram")],
            Some("HTTP 400"),
        );
        let spans = std::mem::take(&mut *t.pending.lock().unwrap());
        assert_eq!(spans[1]["parentSpanId"], Json::String(root.span_id.clone()));
        assert_eq!(spans[1]["status"]["code"], 2);
        let doc = t.document(spans);
        assert_eq!(
            doc["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"],
            "events"
        );
    }
}
