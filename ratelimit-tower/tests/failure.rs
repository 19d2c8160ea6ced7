//! When the limiter cannot decide: a real Redis stopped under the layer, in process so
//! that the test can stop it. Open lets requests through, closed refuses them (gRPC
//! callers with `UNAVAILABLE`); the hook hears of every error either way.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use http::{Request, Response};
use ratelimit_backends::redis::{RedisSettings, StartupBackoff};
use ratelimit_backends::{RedisStore, SystemClock};
use ratelimit_tower::{Action, FailureMode, Limiter, RateLimit, RateLimitLayer, Rules};
use tower::{Layer, ServiceExt};

type Store = RedisStore;

fn service(
    limiter: &Arc<Limiter<Store, SystemClock>>,
    mode: FailureMode,
    errors: &Arc<AtomicUsize>,
) -> impl tower::Service<Request<()>, Response = Response<String>, Error = Infallible> {
    let errors = errors.clone();
    RateLimitLayer::builder(limiter.clone(), "api")
        .descriptor([Action::generic_key("all")])
        .failure_mode(mode)
        .on_error(move |_| {
            errors.fetch_add(1, SeqCst);
        })
        .build()
        .unwrap()
        .layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new("served".to_owned()))
        }))
}

async fn status(
    svc: impl tower::Service<Request<()>, Response = Response<String>, Error = Infallible>,
    grpc: bool,
) -> Response<String> {
    let mut req = Request::new(());
    if grpc {
        req.headers_mut()
            .insert("content-type", "application/grpc".parse().unwrap());
    }
    tokio::time::timeout(Duration::from_secs(10), svc.oneshot(req))
        .await
        .expect("an answer in time, store down or not")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_store_follows_the_failure_mode_and_reaches_the_hook() {
    let mut redis = test_support::stores::redis();
    let settings = RedisSettings {
        url: format!("127.0.0.1:{}", redis.port),
        timeout: Duration::from_millis(500),
        pool_size: 1,
        ..RedisSettings::default()
    };
    let store = RedisStore::connect(settings, None, StartupBackoff::default(), &|_| {})
        .await
        .expect("redis");
    let rules = Rules::new("api").limit(["generic_key"], RateLimit::per_minute(1000));
    let limiter = Arc::new(
        Limiter::builder(store, SystemClock)
            .rules(rules)
            .build()
            .unwrap(),
    );
    let errors = Arc::new(AtomicUsize::new(0));

    let up = status(service(&limiter, FailureMode::Closed, &errors), false).await;
    assert_eq!((up.status().as_u16(), up.body().as_str()), (200, "served"));
    assert_eq!(errors.load(SeqCst), 0);

    redis.proc.kill();
    let open = status(service(&limiter, FailureMode::Open, &errors), false).await;
    assert_eq!(
        (open.status().as_u16(), open.body().as_str()),
        (200, "served")
    );
    let closed = status(service(&limiter, FailureMode::Closed, &errors), false).await;
    assert_eq!(
        (closed.status().as_u16(), closed.body().as_str()),
        (500, "")
    );
    let grpc = status(service(&limiter, FailureMode::Closed, &errors), true).await;
    assert_eq!(grpc.status().as_u16(), 200);
    assert_eq!(grpc.headers()["grpc-status"], "14");
    assert_eq!(errors.load(SeqCst), 3);
}

#[tokio::test]
async fn a_request_without_what_its_descriptor_needs_is_not_limited() {
    let limiter = Arc::new(
        ratelimit_tower::in_memory(
            Rules::new("api").limit(["remote_address"], RateLimit::per_minute(0)),
        )
        .unwrap(),
    );
    let errors = Arc::new(AtomicUsize::new(0));
    let e = errors.clone();
    let svc = RateLimitLayer::builder(limiter, "api")
        .descriptor([Action::remote_address()])
        .descriptor([Action::header("x-user", "user")])
        .on_error(move |_| {
            e.fetch_add(1, SeqCst);
        })
        .build()
        .unwrap()
        .layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    // No peer address and a header that is not text: no descriptor, so no decision.
    let mut req = Request::new(());
    req.headers_mut().insert(
        "x-other",
        http::HeaderValue::from_bytes(b"\xff\xfe").unwrap(),
    );
    assert_eq!(svc.clone().oneshot(req).await.unwrap().status(), 200);
    // A header that is not text is read as well as it can be, and counted.
    let mut req = Request::new(());
    req.headers_mut().insert(
        "x-user",
        http::HeaderValue::from_bytes(b"\xff\xfe").unwrap(),
    );
    assert_eq!(svc.oneshot(req).await.unwrap().status(), 200);
    assert_eq!(errors.load(SeqCst), 0);
}
