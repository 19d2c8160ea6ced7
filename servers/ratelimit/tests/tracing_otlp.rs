//! Spans reach an OTLP/HTTP receiver written here: one per decision, with the domain, and
//! a child for the store call.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message;

use crate::common::{post_json, start};

/// Accepts OTLP/HTTP protobuf posts and forwards the decoded requests.
fn receiver() -> (u16, mpsc::Receiver<(String, ExportTraceServiceRequest)>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(conn) = conn else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                conn.set_read_timeout(Some(Duration::from_secs(10))).ok();
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut w = conn;
                loop {
                    let mut start = String::new();
                    if r.read_line(&mut start).unwrap_or(0) == 0 {
                        return;
                    }
                    let path = start.split_whitespace().nth(1).unwrap_or("").to_owned();
                    let mut len = 0usize;
                    loop {
                        let mut h = String::new();
                        r.read_line(&mut h).unwrap();
                        if h == "\r\n" || h.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = h.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            len = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0u8; len];
                    r.read_exact(&mut body).unwrap();
                    if let Ok(req) = ExportTraceServiceRequest::decode(body.as_slice()) {
                        let _ = tx.send((path, req));
                    }
                    let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n");
                }
            });
        }
    });
    (port, rx)
}

#[test]
fn a_span_per_decision_with_a_store_child() {
    let (port, rx) = receiver();
    let endpoint = format!("http://127.0.0.1:{port}");
    let srv = start(
        &[(
            "rl.yaml",
            "domain: rl\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 5}\n",
        )],
        &[
            ("TRACING_ENABLED", "true"),
            ("TRACING_SERVICE_NAME", "rl-under-test"),
            ("TRACING_SERVICE_NAMESPACE", "tests"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let r = post_json(
        srv.http,
        r#"{"domain":"rl","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}"#,
    );
    assert_eq!(r.status, 200);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut spans = Vec::new();
    let mut service = String::new();
    while !(spans
        .iter()
        .any(|(n, _, _, _): &(String, Vec<u8>, Vec<u8>, String)| n == "json")
        && spans.iter().any(|(n, _, _, _)| n == "store.increment"))
    {
        let left = deadline.saturating_duration_since(Instant::now());
        let (path, req) = rx.recv_timeout(left).expect("spans exported");
        assert_eq!(path, "/v1/traces");
        for rs in req.resource_spans {
            for kv in rs.resource.map(|r| r.attributes).unwrap_or_default() {
                if kv.key == "service.name"
                    && let Some(Value::StringValue(s)) = kv.value.and_then(|v| v.value)
                {
                    service = s;
                }
            }
            for ss in rs.scope_spans {
                for s in ss.spans {
                    let domain = s
                        .attributes
                        .iter()
                        .find(|kv| kv.key == "ratelimit.domain")
                        .and_then(|kv| kv.value.clone())
                        .and_then(|v| v.value)
                        .map(|v| match v {
                            Value::StringValue(s) => s,
                            other => format!("{other:?}"),
                        })
                        .unwrap_or_default();
                    spans.push((s.name, s.trace_id, s.parent_span_id, domain));
                }
            }
        }
    }
    assert_eq!(service, "rl-under-test");
    let decision = spans.iter().find(|s| s.0 == "json").unwrap();
    assert_eq!(decision.3, "rl");
    let store = spans.iter().find(|s| s.0 == "store.increment").unwrap();
    assert_eq!(store.1, decision.1, "same trace");
    assert!(!store.2.is_empty(), "the store span has a parent");
}
