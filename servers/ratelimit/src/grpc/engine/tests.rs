use std::sync::atomic::AtomicUsize;

use futures_util::stream::FuturesUnordered;
use tokio::sync::mpsc;

use tokio::sync::Notify;
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use super::connection::{StreamFuture, drive};
use super::*;
use crate::conn::Activity;
use crate::pb::rls::rate_limit_service_client::RateLimitServiceClient;
use crate::pb::rls::rate_limit_service_server::RateLimitService;
use crate::settings::{BackendType, Settings};

/// Answers domain "hold" only once `release` is notified, every other domain at once.
struct Held {
    release: Arc<Notify>,
    held: Arc<Notify>,
}

#[tonic::async_trait]
impl RateLimitService for Held {
    async fn should_rate_limit(
        &self,
        request: Request<rls::RateLimitRequest>,
    ) -> Result<Response<rls::RateLimitResponse>, Status> {
        if request.get_ref().domain == "hold" {
            self.held.notify_one();
            self.release.notified().await;
        }
        // Which thread served it, for the test of how connections are spread.
        let thread = std::thread::current().name().unwrap_or("").to_owned();
        Ok(Response::new(rls::RateLimitResponse {
            overall_code: rls::rate_limit_response::Code::Ok as i32,
            raw_body: thread.into_bytes(),
            ..Default::default()
        }))
    }
}

/// The test service on `threads` connection threads (0: on the test's runtime).
async fn start(
    threads: usize,
) -> (
    RateLimitServiceClient<tonic::transport::Channel>,
    Arc<Notify>,
    Arc<Notify>,
    watch::Sender<bool>,
    String,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (release, held) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let service = Held {
        release: release.clone(),
        held: held.clone(),
    };
    let routes = GrpcRoutes::new(service, Routes::default());
    let (stop, stopped) = watch::channel(false);
    let settings = Settings::from_lookup(|_| None).unwrap();
    let mut conns = Connections::from_settings(&settings, threads);
    conns.ageing.grace = Duration::from_secs(5);
    tokio::spawn(serve_grpc(
        GrpcListener::Tcp(listener),
        routes,
        None,
        conns,
        stopped,
        Duration::from_secs(5),
    ));
    // One channel is one HTTP/2 connection: every call below shares it.
    let client = RateLimitServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    (client, release, held, stop, format!("http://{addr}"))
}

fn request(domain: &str) -> rls::RateLimitRequest {
    rls::RateLimitRequest {
        domain: domain.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_waiting_stream_does_not_hold_up_the_others_on_its_connection() {
    for threads in [0, 2] {
        a_waiting_stream_does_not_hold_up_the_others(threads).await;
    }
}

async fn a_waiting_stream_does_not_hold_up_the_others(threads: usize) {
    let (client, release, held, _stop, _) = start(threads).await;
    let waiting = tokio::spawn({
        let mut client = client.clone();
        async move { client.should_rate_limit(request("hold")).await }
    });
    held.notified().await;
    for _ in 0..3 {
        let answer = tokio::time::timeout(
            Duration::from_secs(5),
            client.clone().should_rate_limit(request("other")),
        )
        .await
        .expect("a stream behind a waiting one was not answered");
        assert!(answer.is_ok());
    }
    assert!(!waiting.is_finished());
    release.notify_one();
    let held_answer = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the held stream was not answered once released");
    assert!(held_answer.unwrap().is_ok());
}

#[tokio::test]
async fn shutdown_lets_a_stream_in_flight_finish() {
    for threads in [0, 2] {
        shutdown_lets_a_stream_finish(threads).await;
    }
}

async fn shutdown_lets_a_stream_finish(threads: usize) {
    let (mut client, release, held, stop, _) = start(threads).await;
    let waiting = tokio::spawn(async move { client.should_rate_limit(request("hold")).await });
    held.notified().await;
    stop.send(true).unwrap();
    // Past the moment shutdown was seen, the stream is still being served.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished());
    release.notify_one();
    let answer = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the in-flight stream was dropped or never answered");
    let answer = answer.unwrap().expect("the in-flight stream failed");
    assert_eq!(
        answer.get_ref().overall_code,
        rls::rate_limit_response::Code::Ok as i32
    );
}

#[tokio::test]
async fn connections_are_spread_over_the_connection_threads() {
    let (mut first, _release, _held, _stop, addr) = start(2).await;
    let mut second = RateLimitServiceClient::connect(addr).await.unwrap();
    let thread =
        |r: Response<rls::RateLimitResponse>| String::from_utf8(r.into_inner().raw_body).unwrap();
    let a = thread(first.should_rate_limit(request("x")).await.unwrap());
    let b = thread(second.should_rate_limit(request("x")).await.unwrap());
    assert!(a.starts_with("grpc-conn-"), "served on {a:?}");
    assert!(b.starts_with("grpc-conn-"), "served on {b:?}");
    // While the first connection lives, the second goes to the other thread.
    assert_ne!(a, b);
    // And a connection stays on its thread.
    assert_eq!(
        thread(first.should_rate_limit(request("x")).await.unwrap()),
        a
    );
}

#[test]
fn memcached_serves_on_the_shared_runtime_and_the_others_on_connection_threads() {
    let mut settings = Settings::from_lookup(|_| None).unwrap();
    settings.backend_type = BackendType::Memcache;
    assert_eq!(conn_threads_for(&settings), 0);
    for backend in [BackendType::Memory, BackendType::Redis] {
        settings.backend_type = backend;
        assert_eq!(conn_threads_for(&settings), settings.worker_threads);
        assert!(conn_threads_for(&settings) >= 1);
    }
}

/// Counts its wake-ups.
#[derive(Default)]
struct Wakes(AtomicUsize);

impl std::task::Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Relaxed);
    }
}

/// Polls `drive` `polls` times over a connection with nothing to say and `n` streams
/// already started, each of which waits for ever (on the store, say) when `wait`, or
/// ends at once. After each poll: how many streams have begun, and how many times the
/// task was woken so far.
fn passes(n: usize, wait: bool, polls: usize) -> Vec<(usize, usize)> {
    let begun = Arc::new(AtomicUsize::new(0));
    let (tx, mut started) = mpsc::unbounded_channel();
    for _ in 0..n {
        let begun = begun.clone();
        let stream: StreamFuture = Box::pin(async move {
            begun.fetch_add(1, Relaxed);
            if wait {
                std::future::pending::<()>().await;
            }
        });
        tx.send(stream).unwrap();
    }
    let mut streams = FuturesUnordered::new();
    let mut conn = std::pin::pin!(std::future::pending::<()>());
    let activity = Activity::default();
    let mut pass = std::pin::pin!(drive(conn.as_mut(), &mut started, &mut streams, &activity));
    let wakes = Arc::new(Wakes::default());
    let waker = std::task::Waker::from(wakes.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    (0..polls)
        .map(|_| {
            assert!(pass.as_mut().poll(&mut cx).is_pending());
            (begun.load(Relaxed), wakes.0.load(Relaxed))
        })
        .collect()
}

#[test]
fn waiting_streams_are_started_in_passes_that_let_the_thread_run_others() {
    let seen = passes(40, true, 4);
    let begun: Vec<_> = seen.iter().map(|s| s.0).collect();
    let woken: Vec<_> = seen.iter().map(|s| s.1).collect();
    assert_eq!(begun, [16, 32, 40, 40]);
    // A full pass asks to be polled again (`FuturesUnordered` may ask too); the last,
    // partial one waits for news.
    assert!(woken[0] >= 1 && woken[1] > woken[0], "{seen:?}");
    assert!(woken[2] == woken[1] && woken[3] == woken[2], "{seen:?}");
}

#[test]
fn streams_that_end_at_once_are_all_run_in_one_pass() {
    assert_eq!(passes(40, false, 1), [(40, 0)]);
}
