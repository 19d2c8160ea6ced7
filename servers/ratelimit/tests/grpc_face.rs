//! The gRPC face with a client built from our protos.

use std::time::Duration;

use ratelimit_core::{Code, Descriptor, Request, Unit, json};
use ratelimit_server::convert;
use ratelimit_server::pb::rls::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::common::{post_json, start, start_in, temp_dir};

pub const RULES: &str = "domain: rl\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: hour, requests_per_unit: 2}\n  - key: free\n    rate_limit: {unlimited: true}\n  - key: route\n    descriptors:\n      - key: method\n        rate_limit: {unit: hour, requests_per_unit: 3}\n";

pub use crate::common::channel;

pub fn req(domain: &str, pairs: &[(&str, &str)]) -> Request {
    Request::new(domain, vec![Descriptor::new(pairs.iter().copied())])
}

pub async fn call(ch: &Channel, r: &Request) -> Result<ratelimit_core::Response, tonic::Status> {
    let mut c = RateLimitServiceClient::new(ch.clone());
    c.should_rate_limit(convert::request_to_pb(r))
        .await
        .map(|resp| convert::response_from_pb(resp.get_ref()))
}

#[tokio::test]
async fn should_rate_limit_over_grpc_counts_and_denies() {
    let srv = start(&[("rl.yaml", RULES)], &[]);
    let ch = channel(&srv.grpc).await;
    let r = req("rl", &[("api_key", "alice")]);
    let codes: Vec<Code> = [
        call(&ch, &r).await.unwrap(),
        call(&ch, &r).await.unwrap(),
        call(&ch, &r).await.unwrap(),
    ]
    .iter()
    .map(|x| x.overall_code)
    .collect();
    assert_eq!(codes, [Code::Ok, Code::Ok, Code::OverLimit]);
    let last = call(&ch, &r).await.unwrap();
    let st = &last.statuses[0];
    assert_eq!(st.current_limit.as_ref().unwrap().unit, Unit::Hour);
    assert!(
        st.duration_until_reset
            .is_some_and(|d| (1..=3600).contains(&d))
    );
    let unl = call(&ch, &req("rl", &[("free", "x")])).await.unwrap();
    assert_eq!(unl.statuses[0].limit_remaining, u32::MAX);
}

#[tokio::test]
async fn errors_carry_upstreams_messages() {
    let srv = start(&[("rl.yaml", RULES)], &[]);
    let ch = channel(&srv.grpc).await;
    let e = call(&ch, &req("", &[("a", "b")])).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unknown);
    assert_eq!(e.message(), "rate limit domain must not be empty");
    let e = call(&ch, &Request::new("rl", vec![])).await.unwrap_err();
    assert_eq!(e.message(), "rate limit descriptor list must not be empty");

    // An override whose unit is UNKNOWN is refused instead of crashing.
    let mut pb = convert::request_to_pb(&Request::new(
        "rl",
        vec![Descriptor::new([("api_key", "x")]).with_limit(1, Unit::Second)],
    ));
    pb.descriptors[0].limit.as_mut().unwrap().unit = 0;
    let e = RateLimitServiceClient::new(ch.clone())
        .should_rate_limit(pb)
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);

    // Raw bytes that are not a RateLimitRequest: a clean error, and the server lives on.
    let e = raw_call(&srv.grpc, SHOULD_RATE_LIMIT, b"\xff\xff\xff\xff\x0f").await;
    assert_ne!(e, tonic::Code::Ok);
    assert!(call(&ch, &req("rl", &[("free", "x")])).await.is_ok());
}

pub(crate) const SHOULD_RATE_LIMIT: &str =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

#[tokio::test]
async fn unknown_services_and_methods_are_unimplemented() {
    let srv = start(&[("rl.yaml", RULES)], &[]);
    // A valid, empty RateLimitRequest: only the path can make these fail.
    for path in [
        "/envoy.service.ratelimit.v3.RateLimitService/Nope",
        "/envoy.service.ratelimit.v3.RateLimitServiceX/ShouldRateLimit",
        "/envoy.service.ratelimit.v3.RateLimitService",
        "/envoy.service.ratelimit.v2.RateLimitService/ShouldRateLimit",
        "/grpc.health.v1.Health/Nope",
        "/",
    ] {
        assert_eq!(
            raw_call(&srv.grpc, path, b"").await,
            tonic::Code::Unimplemented,
            "{path}"
        );
    }
    // The service's own path still decides (an empty request is refused by the limiter,
    // not by the router).
    assert_eq!(
        raw_call(&srv.grpc, SHOULD_RATE_LIMIT, b"").await,
        tonic::Code::Unknown
    );
}

/// Sends `body` as the protobuf payload of a call to `path` and returns the status.
pub(crate) async fn raw_call(addr: &str, path: &str, body: &[u8]) -> tonic::Code {
    use http_body_util::{BodyExt, Full};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
    framed.extend_from_slice(body);
    let req = http::Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(bytes::Bytes::from(framed)))
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let collected = body.collect().await.unwrap();
    let status = parts
        .headers
        .get("grpc-status")
        .or_else(|| collected.trailers().and_then(|t| t.get("grpc-status")))
        .map(|v| v.to_str().unwrap().parse::<i32>().unwrap())
        .unwrap();
    tonic::Code::from_i32(status)
}

#[tokio::test]
async fn json_and_grpc_decide_identically() {
    let srv = start(
        &[("rl.yaml", RULES)],
        &[
            ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
            ("RESPONSE_DYNAMIC_METADATA", "true"),
        ],
    );
    let ch = channel(&srv.grpc).await;
    // The same request shapes on separate counters: one set through /json, one through gRPC.
    let shapes: Vec<Vec<Vec<(&str, &str)>>> = vec![
        vec![vec![("api_key", "K")]],
        vec![vec![("api_key", "K")], vec![("free", "K")]],
        vec![vec![("route", "K"), ("method", "GET")]],
        vec![
            vec![("api_key", "K")],
            vec![("route", "K"), ("method", "GET")],
        ],
        vec![vec![("nothing", "K")]],
        vec![vec![("api_key", "K")]],
        vec![
            vec![("route", "K"), ("method", "GET")],
            vec![("route", "K"), ("method", "GET")],
        ],
    ];
    for (i, shape) in shapes.iter().enumerate() {
        let build = |tag: &str| {
            Request::new(
                "rl",
                shape
                    .iter()
                    .map(|d| Descriptor::new(d.iter().map(|(k, v)| (*k, v.replace('K', tag)))))
                    .collect(),
            )
        };
        let via_grpc = call(&ch, &build("g")).await.unwrap();
        let body = request_json(&build("j"));
        let http = post_json(srv.http, &body);
        let via_json: serde_json::Value = http.json();
        let mut grpc_json: serde_json::Value =
            serde_json::from_str(&json::write_response(&via_grpc)).unwrap();
        let mut via_json = via_json;
        assert_eq!(grpc_json["dynamicMetadata"]["domain"], "rl", "request {i}");
        for v in [&mut grpc_json, &mut via_json] {
            strip_durations(v);
        }
        assert_eq!(grpc_json, via_json, "request {i}");
        let expected_status = if via_grpc.overall_code == Code::OverLimit {
            429
        } else {
            200
        };
        assert_eq!(http.status, expected_status, "request {i}");
    }
}

fn request_json(r: &Request) -> String {
    let descriptors: Vec<serde_json::Value> = r
        .descriptors
        .iter()
        .map(|d| {
            serde_json::json!({"entries": d.entries.iter().map(|e| serde_json::json!({"key": e.key, "value": e.value})).collect::<Vec<_>>()})
        })
        .collect();
    serde_json::json!({"domain": r.domain, "descriptors": descriptors}).to_string()
}

/// The two calls may straddle a second, and use different values (g, j); everything else
/// must be equal.
fn strip_durations(v: &mut serde_json::Value) {
    if let Some(ds) = v.pointer_mut("/dynamicMetadata/descriptors") {
        *ds = serde_json::Value::String(ds.to_string().replace("=g", "=X").replace("=j", "=X"));
    }
    if let Some(sts) = v.get_mut("statuses").and_then(|s| s.as_array_mut()) {
        for s in sts {
            if let Some(o) = s.as_object_mut() {
                o.remove("durationUntilReset");
            }
        }
    }
    if let Some(hs) = v
        .get_mut("responseHeadersToAdd")
        .and_then(|s| s.as_array_mut())
    {
        hs.retain(|h| h["key"] != "RateLimit-Reset");
    }
}

#[tokio::test]
async fn health_service_reports_ratelimit() {
    let srv = start(&[("rl.yaml", RULES)], &[]);
    let ch = channel(&srv.grpc).await;
    let mut h = HealthClient::new(ch);
    for name in ["ratelimit", ""] {
        let r = h
            .check(HealthCheckRequest {
                service: name.into(),
            })
            .await
            .unwrap();
        assert_eq!(r.get_ref().status(), ServingStatus::Serving, "{name:?}");
    }
    let e = h
        .check(HealthCheckRequest {
            service: "other".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn health_is_not_serving_without_config_when_required() {
    let srv = start(
        &[("empty.yaml", "domain: other\n")],
        &[("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")],
    );
    // A domain was loaded: healthy.
    let ch = channel(&srv.grpc).await;
    let r = HealthClient::new(ch)
        .check(HealthCheckRequest {
            service: "ratelimit".into(),
        })
        .await
        .unwrap();
    assert_eq!(r.get_ref().status(), ServingStatus::Serving);

    // No rule file at all: no domain, so unhealthy on both faces.
    let srv = start(&[], &[("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")]);
    let ch = channel(&srv.grpc).await;
    let r = HealthClient::new(ch)
        .check(HealthCheckRequest {
            service: "ratelimit".into(),
        })
        .await
        .unwrap();
    assert_eq!(r.get_ref().status(), ServingStatus::NotServing);
    let r = crate::common::request(srv.http, "GET", "/healthcheck", b"");
    assert_eq!(r.status, 500);
}

#[tokio::test]
async fn unix_domain_socket() {
    let dir = temp_dir("uds");
    let sock = dir.join("rl.sock");
    let srv = start_in(
        dir.clone(),
        &[("rl.yaml", RULES)],
        &[("GRPC_UDS", sock.to_str().unwrap())],
    );
    assert_eq!(srv.grpc, format!("unix:{}", sock.display()));
    let path = sock.clone();
    let ch = Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_| {
            let p = path.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(p).await?,
                ))
            }
        }))
        .await
        .unwrap();
    let r = call(&ch, &req("rl", &[("api_key", "uds")])).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok);
    assert_eq!(r.statuses[0].limit_remaining, 1);

    // RLQS on the same socket: the bucket of the same entries gets a token bucket.
    use ratelimit_server::pb::envoy::r#type::v3::rate_limit_strategy::Strategy;
    use ratelimit_server::pb::rlqs::rate_limit_quota_response::bucket_action::BucketAction;
    use ratelimit_server::pb::rlqs::rate_limit_quota_service_client::RateLimitQuotaServiceClient as Rlqs;
    use ratelimit_server::pb::rlqs::rate_limit_quota_usage_reports::BucketQuotaUsage;
    use ratelimit_server::pb::rlqs::{BucketId, RateLimitQuotaUsageReports};
    let report = RateLimitQuotaUsageReports {
        domain: "rl".into(),
        bucket_quota_usages: vec![BucketQuotaUsage {
            bucket_id: Some(BucketId {
                bucket: [("api_key".to_owned(), "uds".to_owned())].into(),
            }),
            num_requests_allowed: 1,
            ..Default::default()
        }],
    };
    let mut actions = Rlqs::new(ch)
        .stream_rate_limit_quotas(tokio_stream::iter(vec![report]))
        .await
        .unwrap()
        .into_inner();
    let msg = actions.message().await.unwrap().unwrap();
    let Some(BucketAction::QuotaAssignmentAction(q)) = &msg.bucket_action[0].bucket_action else {
        panic!("{msg:?}")
    };
    let strategy = q.rate_limit_strategy.as_ref().unwrap().strategy.as_ref();
    assert!(
        matches!(strategy, Some(Strategy::TokenBucket(_))),
        "{msg:?}"
    );
}

#[test]
fn command_line_client_exit_codes() {
    let srv = start(&[("rl.yaml", RULES)], &[]);
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ratelimit-client"))
            .args(args)
            .output()
            .unwrap()
    };
    let args = [
        "-dial_string",
        &srv.grpc,
        "-domain",
        "rl",
        "-descriptors",
        "api_key=cli",
    ];
    let out = run(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("overall: OK"), "{text}");
    assert!(
        text.contains("api_key=cli: OK limit=2/HOUR remaining=1"),
        "{text}"
    );
    assert_eq!(run(&args).status.code(), Some(0));
    let out = run(&args);
    assert_eq!(
        out.status.code(),
        Some(3),
        "OVER_LIMIT has its own exit code"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("overall: OVER_LIMIT"));

    // Two descriptors, one nested, with -flag=value syntax.
    let dial = format!("-dial_string={}", srv.grpc);
    let out = run(&[
        &dial,
        "-domain=rl",
        "-descriptors=route=/a,method=GET",
        "-descriptors",
        "free=1",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("route=/a,method=GET: OK limit=3/HOUR remaining=2"),
        "{text}"
    );
    assert!(text.contains("free=1: OK remaining=4294967295"), "{text}");

    // Service errors and connection errors exit 1, bad flags 2.
    let out = run(&[
        "-dial_string",
        &srv.grpc,
        "-domain",
        "rl",
        "-descriptors",
        "=x",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&[
        "-dial_string",
        "127.0.0.1:1",
        "-domain",
        "rl",
        "-descriptors",
        "a=b",
        "-timeout",
        "2s",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot connect"));
    assert_eq!(run(&["-domain", "rl"]).status.code(), Some(2));
    assert_eq!(run(&["-bogus", "1"]).status.code(), Some(2));
}

#[tokio::test]
async fn sigterm_turns_health_not_serving_before_draining() {
    use tokio_stream::StreamExt;
    let srv = start(&[("rl.yaml", RULES)], &[]);
    let ch = channel(&srv.grpc).await;
    let mut watch = HealthClient::new(ch.clone())
        .watch(HealthCheckRequest {
            service: "ratelimit".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let first = watch.next().await.unwrap().unwrap();
    assert_eq!(first.status(), ServingStatus::Serving);
    assert!(srv.proc.signal("TERM"));
    let next = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("a health update after SIGTERM")
        .unwrap()
        .unwrap();
    assert_eq!(next.status(), ServingStatus::NotServing);
}

#[tokio::test]
async fn connections_are_aged_out_and_clients_reconnect() {
    let srv = start(
        &[("rl.yaml", RULES)],
        &[
            ("GRPC_MAX_CONNECTION_AGE", "1s"),
            ("GRPC_MAX_CONNECTION_AGE_GRACE", "1s"),
        ],
    );
    // A raw HTTP/2 connection: its driver ends when the server sends GOAWAY and closes.
    let stream = tokio::net::TcpStream::connect(&srv.grpc).await.unwrap();
    let (_send, conn) =
        hyper::client::conn::http2::handshake::<_, _, http_body_util::Full<bytes::Bytes>>(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await
        .unwrap();
    let t = std::time::Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(10), conn).await;
    assert!(ended.is_ok(), "the connection was never aged out");
    let age = t.elapsed();
    assert!(
        age >= Duration::from_millis(850),
        "closed too early: {age:?}"
    );
    // A channel keeps working across the server-initiated reconnects.
    let ch = channel(&srv.grpc).await;
    for _ in 0..3 {
        assert!(call(&ch, &req("rl", &[("free", "x")])).await.is_ok());
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
}
