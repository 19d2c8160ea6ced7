//! Any bytes as an HTTP request through `ratelimit-tower`'s layer, with every Envoy action
//! the layer offers configured: the layer answers 200 or 429, never a panic or an error
//! status. Shared by the cargo-fuzz target and the stable corpus replay test
//! (`ratelimit-tower/tests/fuzz_corpus.rs`), which include this file by path.
//!
//! The input is read as text lines (bytes that are not valid in a place are kept out, so
//! that most inputs become some request): the first line is `METHOD TARGET`, then one
//! `name: value` header per line; a header named `peer` is the peer's address instead.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, OnceLock};

use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode, Uri};
use ratelimit_backends::MemoryStore;
use ratelimit_core::{Limiter, ManualClock};
use ratelimit_tower::{LayerConfig, PeerAddr};
use tower::{Layer, ServiceExt};

const LAYER: &str = r#"
domain: fuzz
rate_limits:
  - actions:
      - remote_address: {}
  - actions:
      - generic_key: {descriptor_value: search}
      - request_headers: {header_name: x-api-key, descriptor_key: api_key}
  - actions:
      - header_value_match:
          descriptor_value: admin
          headers:
            - {name: ":path", prefix_match: /admin}
            - {name: x-role, string_match: {exact: ADMIN, ignore_case: true}, invert_match: true}
            - {name: ":authority", safe_regex_match: {regex: "[a-z.]+"}}
            - {name: x-present, present_match: true}
      - masked_remote_address: {v4_prefix_mask_len: 24, v6_prefix_mask_len: 64}
      - method: {}
      - path: {descriptor_key: route}
  - actions:
      - request_headers: {header_name: ":scheme", descriptor_key: scheme, skip_if_absent: true}
      - request_headers: {header_name: ":authority", descriptor_key: host}
xff_num_trusted_hops: 2
trusted_proxies: [10.0.0.0/8, "::1"]
headers: ietf
"#;

const RULES: &str = r#"
domain: fuzz
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: generic_key
    value: search
    descriptors:
      - key: api_key
        rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 3}
  - key: header_match
    value: admin
    descriptors:
      - key: masked_remote_address
        descriptors:
          - key: method
            descriptors:
              - key: route
                rate_limits:
                  - {unit: second, requests_per_unit: 1, algorithm: sliding_window}
                  - {unit: hour, requests_per_unit: 100}
  - key: scheme
    descriptors:
      - key: host
        rate_limit: {unit: minute, requests_per_unit: 1, unit_multiplier: 5}
"#;

type Svc = tower::util::BoxCloneSyncService<Request<()>, Response<()>, Infallible>;

/// The layer, and the clock its limiter reads: one second passes per request, so that
/// windows end and the store's sweeps keep its memory bounded over millions of inputs.
fn service() -> &'static (Svc, Arc<ManualClock>) {
    static SVC: OnceLock<(Svc, Arc<ManualClock>)> = OnceLock::new();
    SVC.get_or_init(|| {
        let clock = Arc::new(ManualClock::new(1_700_000_000));
        let limiter = Limiter::builder(MemoryStore::new(), clock.clone())
            .yaml("fuzz.yaml", RULES)
            .build()
            .expect("the rules load");
        let layer = LayerConfig::from_yaml(LAYER)
            .expect("the layer config reads")
            .layer(Arc::new(limiter))
            .expect("the layer builds");
        let inner =
            tower::service_fn(|_req: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
        (
            tower::util::BoxCloneSyncService::new(layer.layer(inner)),
            clock,
        )
    })
}

/// The request the input describes.
fn request(data: &[u8]) -> Request<()> {
    let mut lines = data.split(|&b| b == b'\n');
    let mut req = Request::new(());
    let mut peer = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));
    if let Some(first) = lines.next() {
        let mut parts = first.splitn(2, |&b| b == b' ');
        if let Some(m) = parts.next().and_then(|m| Method::from_bytes(m).ok()) {
            *req.method_mut() = m;
        }
        if let Some(u) = parts.next().and_then(|u| Uri::try_from(u).ok()) {
            *req.uri_mut() = u;
        }
    }
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name == b"peer" {
            if let Some(ip) = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
                peer = ip;
            }
            continue;
        }
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            req.headers_mut().append(n, v);
        }
    }
    req.extensions_mut()
        .insert(PeerAddr(SocketAddr::new(peer, 4000)));
    req
}

/// Returns whether the request was let through (the replay test counts both kinds).
pub fn run(data: &[u8]) -> bool {
    let req = request(data);
    let shown = format!("{} {} {:?}", req.method(), req.uri(), req.headers());
    let (svc, clock) = service();
    clock.advance(1);
    let resp = futures_executor::block_on(svc.clone().oneshot(req)).expect("infallible");
    let status = resp.status();
    assert!(
        status == StatusCode::OK || status == StatusCode::TOO_MANY_REQUESTS,
        "{status} for {shown}"
    );
    status == StatusCode::OK
}
