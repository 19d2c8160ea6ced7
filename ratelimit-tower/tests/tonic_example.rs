//! The tonic example as a process: gRPC calls over the limit fail with
//! `RESOURCE_EXHAUSTED`, the wait in their metadata.

use std::time::Duration;

use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use crate::common::{away_from_window_edge, example};

#[tokio::test]
async fn calls_over_the_limit_are_resource_exhausted() {
    away_from_window_edge(60);
    let ex = example("tonic", &[]);
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", ex.addr))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("connect");
    let mut client = HealthClient::new(channel);
    for left in [2, 1, 0] {
        let ok = client
            .check(HealthCheckRequest::default())
            .await
            .expect("allowed");
        let rl = ok.metadata().get("ratelimit").unwrap().to_str().unwrap();
        assert!(
            rl.starts_with(&format!("\"per_client_method\";r={left};t=")),
            "{rl}"
        );
    }
    let denied = client
        .check(HealthCheckRequest::default())
        .await
        .expect_err("over the limit");
    assert_eq!(denied.code(), tonic::Code::ResourceExhausted, "{denied:?}");
    assert_eq!(denied.message(), "rate limited");
    let wait: u64 = denied
        .metadata()
        .get("retry-after")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    assert_eq!(
        denied.metadata().get("ratelimit-policy").unwrap(),
        "\"per_client_method\";q=3;w=60"
    );
}
