//! Spans reach an OTLP/HTTP receiver written here: one per decision, with the domain, and
//! a child for the store call; a decision's span continues the caller's trace.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message;

use ratelimit_server::convert;
use ratelimit_server::pb::rls::rate_limit_service_client::RateLimitServiceClient;

use crate::common::{Server, post_json, request_with, start};
use crate::grpc_face::{channel, req};

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
    let (srv, rx) = traced_server(&[
        ("TRACING_SERVICE_NAME", "rl-under-test"),
        ("TRACING_SERVICE_NAMESPACE", "tests"),
    ]);
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

/// A decision's span as exported: its trace, its parent and the trace state it carries.
#[derive(Debug)]
struct Exported {
    trace_id: String,
    parent_span_id: String,
    trace_state: String,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// A server exporting to a receiver of this test, quickly, with `extra` settings.
fn traced_server(
    extra: &[(&str, &str)],
) -> (Server, mpsc::Receiver<(String, ExportTraceServiceRequest)>) {
    let (port, rx) = receiver();
    let endpoint = format!("http://127.0.0.1:{port}");
    let mut env = vec![
        ("TRACING_ENABLED", "true"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    env.extend_from_slice(extra);
    let srv = start(
        &[(
            "rl.yaml",
            "domain: rl\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 5}\n",
        )],
        &env,
    );
    (srv, rx)
}

/// Waits for the decision spans (named `name`) of every domain in `domains`; each call of
/// a test uses a domain of its own, so that its span can be told apart.
fn decision_spans(
    rx: &mpsc::Receiver<(String, ExportTraceServiceRequest)>,
    name: &str,
    domains: &[&str],
) -> std::collections::HashMap<String, Exported> {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut found = std::collections::HashMap::new();
    while !domains.iter().all(|d| found.contains_key(*d)) {
        let left = deadline.saturating_duration_since(Instant::now());
        let (_, req) = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("spans of {domains:?} exported; got {found:?}"));
        for s in req
            .resource_spans
            .into_iter()
            .flat_map(|rs| rs.scope_spans)
            .flat_map(|ss| ss.spans)
            .filter(|s| s.name == name)
        {
            let domain = s
                .attributes
                .iter()
                .find(|kv| kv.key == "ratelimit.domain")
                .and_then(|kv| kv.value.clone())
                .and_then(|v| v.value);
            if let Some(Value::StringValue(d)) = domain {
                found.insert(
                    d,
                    Exported {
                        trace_id: hex(&s.trace_id),
                        parent_span_id: hex(&s.parent_span_id),
                        trace_state: s.trace_state,
                    },
                );
            }
        }
    }
    found
}

/// One gRPC decision for `domain` with `metadata`; it must succeed.
async fn grpc_call(
    ch: &tonic::transport::Channel,
    domain: &str,
    metadata: &[(&'static str, &str)],
) {
    let mut r = tonic::Request::new(convert::request_to_pb(&req(domain, &[("k", "v")])));
    for (k, v) in metadata {
        r.metadata_mut().insert(*k, v.parse().unwrap());
    }
    let mut c = RateLimitServiceClient::new(ch.clone());
    c.should_rate_limit(r)
        .await
        .unwrap_or_else(|e| panic!("{domain}: {e}"));
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

#[tokio::test]
async fn grpc_decision_continues_a_w3c_trace() {
    let (srv, rx) = traced_server(&[]);
    let ch = channel(&srv.grpc).await;
    grpc_call(
        &ch,
        "w3c",
        &[
            ("traceparent", &format!("00-{TRACE}-{PARENT}-01")),
            ("tracestate", "vendor=opaque,other=2"),
            ("baggage", "user=alice"),
        ],
    )
    .await;
    let spans = decision_spans(&rx, "ShouldRateLimit", &["w3c"]);
    let s = &spans["w3c"];
    assert_eq!(s.trace_id, TRACE);
    assert_eq!(s.parent_span_id, PARENT);
    assert_eq!(s.trace_state, "vendor=opaque,other=2");
}

#[tokio::test]
async fn grpc_decision_continues_a_b3_trace() {
    let (srv, rx) = traced_server(&[]);
    let ch = channel(&srv.grpc).await;
    let single_trace = "80f198ee56343ba864fe8b2a57d3eff7";
    let single_span = "e457b5a2e4d86bd1";
    grpc_call(
        &ch,
        "b3-single",
        &[(
            "b3",
            &format!("{single_trace}-{single_span}-1-05e3ac9a4f6e3b90"),
        )],
    )
    .await;
    // No sampling state: deferred to this server, which samples everything by default.
    grpc_call(
        &ch,
        "b3-multi",
        &[
            ("x-b3-traceid", "463ac35c9f6413ad"),
            ("x-b3-spanid", "a2fb4a1d1a96d312"),
        ],
    )
    .await;
    // B3 wins over W3C when both come, as upstream's propagator order makes it.
    grpc_call(
        &ch,
        "b3-over-w3c",
        &[
            ("traceparent", &format!("00-{TRACE}-{PARENT}-01")),
            ("x-b3-traceid", single_trace),
            ("x-b3-spanid", single_span),
            ("x-b3-sampled", "1"),
        ],
    )
    .await;
    let spans = decision_spans(
        &rx,
        "ShouldRateLimit",
        &["b3-single", "b3-multi", "b3-over-w3c"],
    );
    assert_eq!(spans["b3-single"].trace_id, single_trace);
    assert_eq!(spans["b3-single"].parent_span_id, single_span);
    assert_eq!(
        spans["b3-multi"].trace_id,
        "0000000000000000463ac35c9f6413ad"
    );
    assert_eq!(spans["b3-multi"].parent_span_id, "a2fb4a1d1a96d312");
    assert_eq!(spans["b3-over-w3c"].trace_id, single_trace);
    assert_eq!(spans["b3-over-w3c"].parent_span_id, single_span);
}

#[tokio::test]
async fn malformed_trace_headers_give_a_root_span_and_the_call_succeeds() {
    let (srv, rx) = traced_server(&[]);
    let ch = channel(&srv.grpc).await;
    grpc_call(&ch, "bad-w3c", &[("traceparent", "00-not-a-trace-id-01")]).await;
    grpc_call(
        &ch,
        "bad-b3",
        &[("b3", &format!("{}-{PARENT}-1", TRACE.to_uppercase()))],
    )
    .await;
    let spans = decision_spans(&rx, "ShouldRateLimit", &["bad-w3c", "bad-b3"]);
    for (domain, s) in &spans {
        assert_eq!(s.parent_span_id, "", "{domain}: a root span, {s:?}");
        assert_ne!(s.trace_id, TRACE, "{domain}");
    }
}

#[test]
fn json_decision_continues_the_callers_trace() {
    let (srv, rx) = traced_server(&[]);
    let r = request_with(
        srv.http,
        "POST",
        "/json",
        &[("traceparent", &format!("00-{TRACE}-{PARENT}-01"))],
        br#"{"domain":"json-w3c","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}"#,
    );
    assert_eq!(r.status, 200);
    let spans = decision_spans(&rx, "json", &["json-w3c"]);
    assert_eq!(spans["json-w3c"].trace_id, TRACE);
    assert_eq!(spans["json-w3c"].parent_span_id, PARENT);
}
