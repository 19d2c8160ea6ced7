//! One limit, three processes: two copies of the axum example (the layer) and a
//! `ratelimit` server, all on one Redis with the same rule file. A request through a
//! layer and a `ShouldRateLimit` call to the server count against the same key.

use ratelimit_core::{Code, Descriptor, Request};
use ratelimit_server::convert;
use ratelimit_server::pb::rls::rate_limit_service_client::RateLimitServiceClient;
use test_support::stores;

use crate::common::{away_from_window_edge, example, get, ratelimit_server, window_start};

const RULES: &str = "domain: api
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: header_match
    value: admin
    rate_limit: {unit: hour, requests_per_unit: 60, algorithm: token_bucket, burst: 3}
";

async fn grpc(
    client: &mut RateLimitServiceClient<tonic::transport::Channel>,
    key: &str,
    value: &str,
) -> Code {
    let req = Request::new("api", vec![Descriptor::new([(key, value)])]);
    let resp = client
        .should_rate_limit(convert::request_to_pb(&req))
        .await
        .expect("a decision");
    convert::response_from_pb(resp.get_ref()).overall_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layers_and_the_server_count_against_one_key() {
    let redis = stores::redis();
    let dir = test_support::net::temp_dir("rl-tower", "shared");
    let rules = dir.join("api.yaml");
    std::fs::write(&rules, RULES).unwrap();
    let url = format!("127.0.0.1:{}", redis.port);
    let env = [("REDIS", url.as_str()), ("RULES", rules.to_str().unwrap())];
    let (one, two) = (example("axum", &env), example("axum", &env));
    let server = ratelimit_server(redis.port, RULES);
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.grpc))
        .unwrap()
        .connect()
        .await
        .expect("connect");
    let mut client = RateLimitServiceClient::new(channel);
    // The blocking HTTP client off the runtime's threads.
    let http = |ex: &crate::common::Example, path: &'static str, key: Option<&'static str>| {
        let addr = ex.addr;
        async move {
            tokio::task::spawn_blocking(move || {
                let headers: Vec<(&str, &str)> =
                    key.map(|k| ("x-api-key", k)).into_iter().collect();
                get(addr, path, &headers).status
            })
            .await
            .unwrap()
        }
    };

    // A fixed window (upstream's key): 4 a minute for the key, whoever asks.
    away_from_window_edge(60);
    let key = Some("shared");
    assert_eq!(http(&one, "/", key).await, 200);
    assert_eq!(grpc(&mut client, "api_key", "shared").await, Code::Ok);
    assert_eq!(http(&two, "/", key).await, 200);
    assert_eq!(grpc(&mut client, "api_key", "shared").await, Code::Ok);
    assert_eq!(http(&one, "/", key).await, 429);
    assert_eq!(http(&two, "/", key).await, 429);
    assert_eq!(
        grpc(&mut client, "api_key", "shared").await,
        Code::OverLimit
    );
    // Upstream's key, byte for byte, holding every hit (a fixed window counts denials).
    let redis_key = format!("api_api_key_shared_{}", window_start(60));
    assert_eq!(
        stores::redis_cli(redis.port, &["GET", &redis_key]),
        "7",
        "{redis_key}"
    );

    // A token bucket of 3 for `/admin` (the layers' `header_value_match`), shared alike.
    assert_eq!(http(&one, "/admin", None).await, 200);
    assert_eq!(grpc(&mut client, "header_match", "admin").await, Code::Ok);
    assert_eq!(http(&two, "/admin", None).await, 200);
    assert_eq!(
        grpc(&mut client, "header_match", "admin").await,
        Code::OverLimit
    );
    assert_eq!(http(&one, "/admin", None).await, 429);
    let _ = std::fs::remove_dir_all(&dir);
}
