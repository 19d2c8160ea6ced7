//! An axum app behind the rate limit layer.
//!
//! - every client address: 2 a second in bursts of 10 (a token bucket);
//! - every API key (`x-api-key`): 3 a minute (a fixed window, upstream's keys);
//! - `/admin`: 1 a second for everyone together.
//!
//! The descriptors are Envoy's actions, read from YAML below; the rules are written in
//! code, or read from the file `RULES` names (reloaded when it changes) so that they can
//! be the files of the `ratelimit` servers. Environment:
//!
//! - `LISTEN`: address to listen on (default `127.0.0.1:3000`);
//! - `RULES`: a rule file instead of the rules in code;
//! - `REDIS`: `host:port` of a Redis the counters live in, shared with `ratelimit`
//!   servers using it (default: this process's memory);
//! - `XFF_TRUSTED_HOPS`: proxies in front that append to `X-Forwarded-For` (default 0);
//! - `TRUSTED_PROXIES`: networks (comma-separated) whose `X-Forwarded-For` is believed;
//! - `HEADERS`: `ietf` (default), `draft03`, `x_ratelimit` or `none`.
//!
//! It prints `listening on ADDR` when it accepts connections.
//!
//! ```sh
//! cargo run -p ratelimit-tower --features axum,redis --example axum
//! for i in $(seq 12); do curl -si localhost:3000/ | head -1; done
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ratelimit_backends::redis::{RedisSettings, StartupBackoff};
use ratelimit_backends::{MemoryStore, RedisStore, SystemClock};
use ratelimit_core::{Clock, CounterStore};
use ratelimit_tower::{HeaderStyle, LayerConfig, Limiter, RateLimit, Rules, reload};

/// The descriptors each request makes, as an Envoy route's `rate_limits` would say.
const LAYER: &str = r#"
domain: api
rate_limits:
  - actions:
      - remote_address: {}
  - actions:
      - request_headers: {header_name: x-api-key, descriptor_key: api_key}
  - actions:
      - header_value_match:
          descriptor_value: admin
          headers: [{name: ":path", prefix_match: /admin}]
headers: ietf
"#;

/// The rules when no file is given.
fn rules() -> Rules {
    Rules::new("api")
        .limit(
            ["remote_address"],
            RateLimit::per_second(2).burst(10).name("per_ip"),
        )
        .limit(["api_key"], RateLimit::per_minute(3).name("per_key"))
        .limit([("header_match", "admin")], RateLimit::per_second(1))
}

fn app<S: CounterStore + 'static, C: Clock + 'static>(limiter: Arc<Limiter<S, C>>) -> Router {
    let mut config = LayerConfig::from_yaml(LAYER).expect("the layer's settings");
    if let Ok(hops) = std::env::var("XFF_TRUSTED_HOPS") {
        config.xff_num_trusted_hops = hops.parse().expect("XFF_TRUSTED_HOPS: a number");
    }
    if let Ok(nets) = std::env::var("TRUSTED_PROXIES") {
        config.trusted_proxies = nets.split(',').map(str::to_owned).collect();
    }
    if let Ok(style) = std::env::var("HEADERS") {
        config.headers = serde_yaml::from_str::<HeaderStyle>(&style).expect("HEADERS: a style");
    }
    let layer = config
        .builder(limiter)
        .expect("valid settings")
        .on_error(|e| eprintln!("rate limit: {e}"))
        .build()
        .expect("a layer");
    Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/admin", get(|| async { "admin\n" }))
        .layer(layer)
}

/// A limiter over `store` with the rules of `RULES`, watched, or those in code.
fn limiter<S: CounterStore + 'static>(store: S) -> Arc<Limiter<S, SystemClock>> {
    let builder = Limiter::builder(store, SystemClock);
    let Ok(path) = std::env::var("RULES") else {
        return Arc::new(builder.rules(rules()).build().expect("valid rules"));
    };
    let paths = vec![PathBuf::from(path)];
    let files = reload::read_files(&paths).expect("readable rules");
    let limiter = files
        .iter()
        .fold(builder, |b, (name, text)| b.yaml(name, text))
        .build()
        .expect("valid rules");
    let limiter = Arc::new(limiter);
    reload::watch(limiter.clone(), paths, Duration::from_secs(1), |e| {
        eprintln!("rules not reloaded: {e}")
    });
    limiter
}

#[tokio::main]
async fn main() {
    let addr = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let app = match std::env::var("REDIS") {
        Ok(url) => {
            let settings = RedisSettings {
                url,
                pool_size: 4,
                timeout: Duration::from_secs(2),
                ..RedisSettings::default()
            };
            let store = RedisStore::connect(settings, None, StartupBackoff::default(), &|e| {
                eprintln!("redis: {e}")
            })
            .await
            .expect("redis");
            app(limiter(store))
        }
        Err(_) => app(limiter(MemoryStore::new())),
    };
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    println!("listening on {}", listener.local_addr().expect("bound"));
    // The peer address reaches the layer as axum's `ConnectInfo`.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
    .expect("serve");
}
