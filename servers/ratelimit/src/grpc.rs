//! The gRPC face: `envoy.service.ratelimit.v3.RateLimitService` and `grpc.health.v1.Health`
//! on one port (TCP, optionally TLS, or a unix socket), with upstream's connection ageing.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::Poll;
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::{Request, Response, Status};
use tonic_health::ServingStatus;

use crate::App;
use crate::conn::{Backoff, Gate, Readable};
use crate::convert;
use crate::limits::RequestLimits;
use crate::log::{self, Level};
use crate::pb::rls;
use crate::rls_call::{self, LimitedCodec};
use crate::tls::SharedConfig;

mod connection;
mod threads;

use connection::serve_conn;
use threads::{ConnThreads, LiveGuard};
pub use threads::{conn_thread_count, conn_threads_for};

/// The decision call. It only translates: everything is decided by the limiter.
pub struct RlsService {
    app: Arc<App>,
    total_requests: Arc<AtomicU64>,
}

impl RlsService {
    /// A service answering from `app`'s limiter.
    pub fn new(app: Arc<App>) -> Self {
        let total_requests = app
            .limiter
            .stats()
            .counter("ratelimit_server.ShouldRateLimit.total_requests");
        RlsService {
            app,
            total_requests,
        }
    }
}

#[tonic::async_trait]
impl rls::rate_limit_service_server::RateLimitService for RlsService {
    async fn should_rate_limit(
        &self,
        request: Request<rls::RateLimitRequest>,
    ) -> Result<Response<rls::RateLimitResponse>, Status> {
        self.total_requests.fetch_add(1, Relaxed);
        let started = std::time::Instant::now();
        let r = self.decide(request).await;
        self.app.metrics.response_time.observe(started.elapsed());
        r
    }
}

impl RlsService {
    async fn decide(
        &self,
        request: Request<rls::RateLimitRequest>,
    ) -> Result<Response<rls::RateLimitResponse>, Status> {
        let parent = crate::tracing::SpanParent::from_headers(
            &self.app.settings.tracing,
            request.metadata().as_ref(),
        );
        let req = convert::request_from_pb(request.into_inner()).map_err(|e| {
            self.app.limiter.stats().service_error.fetch_add(1, Relaxed);
            Status::invalid_argument(e.0)
        })?;
        let decision = self.app.limiter.should_rate_limit(&req);
        let decision = crate::tracing::in_span(
            parent,
            "ShouldRateLimit",
            &req.domain,
            req.descriptors.len(),
            decision,
        );
        match decision.await {
            Ok(resp) => Ok(Response::new(convert::response_to_pb(&resp))),
            // Upstream returns a plain Go error, which gRPC sends as UNKNOWN with the text.
            Err(e) => {
                log::log(Level::Warn, &format!("ShouldRateLimit: {e}"));
                Err(Status::unknown(e.to_string()))
            }
        }
    }
}

/// The routes of the gRPC port, and a task that mirrors [`crate::Health`] into the gRPC
/// health service under the name `ratelimit`. The first status is set before this returns,
/// so a health check that arrives with the first connection never finds the service
/// unregistered.
pub async fn routes(app: Arc<App>) -> GrpcRoutes<RlsService> {
    let (reporter, health_service) = tonic_health::server::health_reporter();
    let mut rx = app.health.subscribe();
    let status = |healthy: bool| {
        if healthy {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        }
    };
    let first = status(*rx.borrow_and_update());
    reporter.set_service_status("ratelimit", first).await;
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let s = status(*rx.borrow_and_update());
            reporter.set_service_status("ratelimit", s).await;
        }
    });
    let refused = app.limiter.stats().service_error.clone();
    let limits = app.settings.request_limits;
    GrpcRoutes::new(RlsService::new(app), Routes::new(health_service).prepare())
        .with_request_limits(limits, refused)
}

type RlsServer<T> = rls::rate_limit_service_server::RateLimitServiceServer<T>;

/// The gRPC port's services. Decisions go straight to the rate limit service; every other
/// path (health checks, unknown services: `UNIMPLEMENTED`) goes through tonic's `Routes`.
/// `Routes` finds a service with axum's router, which parses the path into parameters on
/// each call. Skipping it took about 4,100 of the ~52,500 instructions a decision cost the
/// whole server (callgrind, docs/benchmarks.md), for a choice a prefix test
/// makes.
pub struct GrpcRoutes<T>(Arc<Routing<T>>);

struct Routing<T> {
    /// `ShouldRateLimit`, called with our codec.
    rls: Arc<T>,
    codec: LimitedCodec,
    /// The rate limit service's other paths (`UNIMPLEMENTED`).
    rls_server: RlsServer<T>,
    rest: Routes,
}

impl<T> Clone for GrpcRoutes<T> {
    fn clone(&self) -> Self {
        GrpcRoutes(self.0.clone())
    }
}

impl<T: rls::rate_limit_service_server::RateLimitService> GrpcRoutes<T> {
    /// `rls` answers `envoy.service.ratelimit.v3.RateLimitService`, `rest` the rest; requests
    /// are held to the default [`RequestLimits`].
    pub fn new(rls: T, rest: Routes) -> Self {
        let rls = Arc::new(rls);
        let codec = LimitedCodec::new(RequestLimits::DEFAULT, Arc::default());
        GrpcRoutes::of(rls, codec, rest)
    }

    fn of(rls: Arc<T>, codec: LimitedCodec, rest: Routes) -> Self {
        GrpcRoutes(Arc::new(Routing {
            rls_server: RlsServer::from_arc(rls.clone()),
            rls,
            codec,
            rest,
        }))
    }

    /// Holds requests to `limits`, counting those refused in `refused`.
    pub fn with_request_limits(self, limits: RequestLimits, refused: Arc<AtomicU64>) -> Self {
        let codec = LimitedCodec::new(limits, refused);
        GrpcRoutes::of(self.0.rls.clone(), codec, self.0.rest.clone())
    }

    /// The routes for one connection. hyper clones them for every call, and every clone
    /// bumps a reference count: one of this connection's only, rather than counts that
    /// every connection thread shares and passes between cores (0.90-0.97x the rate on the
    /// memory store when they were shared).
    fn for_connection(&self) -> Self {
        GrpcRoutes::of(
            self.0.rls.clone(),
            self.0.codec.for_connection(),
            self.0.rest.clone(),
        )
    }
}

/// The service's `ShouldRateLimit`, as tonic's unary call runs it.
struct ShouldRateLimit<T>(GrpcRoutes<T>);

impl<T: rls::rate_limit_service_server::RateLimitService>
    tonic::server::UnaryService<rls::RateLimitRequest> for ShouldRateLimit<T>
{
    type Response = rls::RateLimitResponse;
    type Future = tonic::codegen::BoxFuture<Response<Self::Response>, Status>;

    fn call(&mut self, request: Request<rls::RateLimitRequest>) -> Self::Future {
        let routes = self.0.clone();
        Box::pin(async move { routes.0.rls.should_rate_limit(request).await })
    }
}

/// `/envoy.service.ratelimit.v3.RateLimitService/`: the prefix of every method's path.
fn is_rls_path(path: &str) -> bool {
    let name = <RlsServer<()> as NamedService>::NAME;
    path.strip_prefix('/')
        .and_then(|p| p.strip_prefix(name))
        .is_some_and(|p| p.starts_with('/'))
}

impl<T, B> tower_service::Service<http::Request<B>> for GrpcRoutes<T>
where
    T: rls::rate_limit_service_server::RateLimitService,
    B: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = tonic::codegen::BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Both services are always ready (neither applies backpressure here).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let path = req.uri().path();
        if path == rls_call::PATH {
            let call = ShouldRateLimit(self.clone());
            let mut grpc = tonic::server::Grpc::new(self.0.codec.clone());
            Box::pin(async move { Ok(grpc.unary(call, req).await) })
        } else if is_rls_path(path) {
            self.0.rls_server.clone().call(req)
        } else {
            Box::pin(self.0.rest.clone().call(req))
        }
    }
}

/// Where the gRPC port listens.
pub enum GrpcListener {
    /// `GRPC_HOST:GRPC_PORT`.
    Tcp(TcpListener),
    /// `GRPC_UDS`.
    Unix(UnixListener),
}

/// Connection lifetime settings.
#[derive(Debug, Clone, Copy)]
pub struct Ageing {
    /// `GRPC_MAX_CONNECTION_AGE`, before jitter.
    pub max_age: Duration,
    /// `GRPC_MAX_CONNECTION_AGE_GRACE`.
    pub grace: Duration,
}

/// `age` +/- 10%, different for each connection so a fleet does not reconnect in step.
fn jittered(age: Duration) -> Duration {
    static N: AtomicU64 = AtomicU64::new(0);
    let r = RandomState::new().hash_one(N.fetch_add(1, Relaxed));
    let factor = 0.9 + 0.2 * (r % 10_001) as f64 / 10_000.0;
    age.mul_f64(factor)
}

/// How the gRPC port treats its connections.
#[derive(Clone)]
pub struct Connections {
    /// Upstream's connection ageing.
    pub ageing: Ageing,
    /// How often the server PINGs a connection (`GRPC_KEEPALIVE_TIME`; `None`: never), and
    /// how long it waits for the answer before closing it (`GRPC_KEEPALIVE_TIMEOUT`).
    pub keepalive: (Option<Duration>, Duration),
    /// The bound on open connections and their timeouts.
    pub gate: Arc<Gate>,
    /// Connection threads (see [`conn_threads_for`]); 0: the caller's runtime.
    pub threads: usize,
}

impl Connections {
    /// The port as `settings` describe it, on `threads` connection threads.
    pub fn from_settings(settings: &crate::Settings, threads: usize) -> Self {
        Connections {
            ageing: Ageing {
                max_age: settings.grpc_max_connection_age,
                grace: settings.grpc_max_connection_age_grace,
            },
            keepalive: (
                settings.grpc_keepalive_time,
                settings.grpc_keepalive_timeout,
            ),
            gate: Gate::new("gRPC", settings.ports.grpc),
            threads,
        }
    }
}

/// Serves gRPC until `shutdown` flips, then drains connections for at most `drain`.
pub async fn serve_grpc<T: rls::rate_limit_service_server::RateLimitService>(
    listener: GrpcListener,
    routes: GrpcRoutes<T>,
    tls: Option<SharedConfig>,
    conns: Connections,
    mut shutdown: watch::Receiver<bool>,
    drain: Duration,
) {
    let threads = ConnThreads::start(conns.threads);
    let mut tasks = JoinSet::new();
    let mut backoff = Backoff::default();
    loop {
        while tasks.try_join_next().is_some() {}
        let accepted = tokio::select! {
            a = accept(&listener) => a,
            _ = shutdown.changed() => break,
        };
        let io = match accepted {
            Ok(io) => io,
            Err(e) => {
                tokio::time::sleep(conns.gate.accept_failed(&e, &mut backoff)).await;
                continue;
            }
        };
        backoff.reset();
        let Some(ticket) = conns.gate.admit() else {
            continue;
        };
        let routes = routes.for_connection();
        let shutdown = shutdown.clone();
        let tls = tls.as_ref().map(|t| t.load_full());
        let thread = threads.least_busy();
        let local = thread.runtime.is_some();
        let live = LiveGuard::new(thread.live.clone());
        let conns = conns.clone();
        tasks.spawn_on(
            async move {
                let _live = live;
                // The socket moves to this thread's own reactor.
                let io = match io.register() {
                    Ok(io) => io,
                    Err(e) => {
                        log::log(
                            Level::Debug,
                            &format!("gRPC connection lost on hand-over: {e}"),
                        );
                        return;
                    }
                };
                if ticket.first_byte(&io).await.is_err() {
                    return;
                }
                let handshake = conns.gate.limits().first_byte_timeout;
                match (io, tls) {
                    (Accepted::Tcp(s), Some(cfg)) => {
                        let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
                        match tokio::time::timeout(handshake, acceptor.accept(s)).await {
                            Ok(Ok(tls)) => serve_conn(tls, routes, &conns, shutdown, local).await,
                            Ok(Err(e)) => {
                                log::log(Level::Debug, &format!("gRPC TLS handshake failed: {e}"))
                            }
                            Err(_) => log::log(Level::Debug, "gRPC TLS handshake timed out"),
                        }
                    }
                    (Accepted::Tcp(s), None) => {
                        serve_conn(s, routes, &conns, shutdown, local).await
                    }
                    (Accepted::Unix(s), _) => serve_conn(s, routes, &conns, shutdown, local).await,
                }
                drop(ticket);
            },
            &thread.handle,
        );
    }
    drop(listener);
    let _ = tokio::time::timeout(drain, async { while tasks.join_next().await.is_some() {} }).await;
    tasks.abort_all();
}

enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Readable for Accepted {
    async fn readable(&self) -> std::io::Result<()> {
        match self {
            Accepted::Tcp(s) => s.readable().await,
            Accepted::Unix(s) => s.readable().await,
        }
    }

    fn try_peek(&self) -> std::io::Result<usize> {
        match self {
            Accepted::Tcp(s) => s.try_peek(),
            Accepted::Unix(s) => s.try_peek(),
        }
    }
}

/// An accepted socket between the accepting runtime and a connection thread.
enum Unregistered {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Unregistered {
    /// Registers the socket with the reactor of the runtime this is called on.
    fn register(self) -> std::io::Result<Accepted> {
        Ok(match self {
            Unregistered::Tcp(s) => Accepted::Tcp(tokio::net::TcpStream::from_std(s)?),
            Unregistered::Unix(s) => Accepted::Unix(tokio::net::UnixStream::from_std(s)?),
        })
    }
}

async fn accept(l: &GrpcListener) -> std::io::Result<Unregistered> {
    match l {
        GrpcListener::Tcp(l) => {
            let (s, _) = l.accept().await?;
            let _ = s.set_nodelay(true);
            Ok(Unregistered::Tcp(s.into_std()?))
        }
        GrpcListener::Unix(l) => Ok(Unregistered::Unix(l.accept().await?.0.into_std()?)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use futures_util::stream::FuturesUnordered;
    use tokio::sync::mpsc;

    use super::connection::{StreamFuture, drive};
    use super::*;
    use crate::conn::Activity;
    use crate::pb::rls::rate_limit_service_client::RateLimitServiceClient;
    use crate::pb::rls::rate_limit_service_server::RateLimitService;
    use tokio::sync::Notify;

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
        let settings = crate::Settings::from_lookup(|_| None).unwrap();
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
        let thread = |r: Response<rls::RateLimitResponse>| {
            String::from_utf8(r.into_inner().raw_body).unwrap()
        };
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
        use crate::settings::BackendType;
        assert_eq!(conn_threads_for(BackendType::Memcache), 0);
        for backend in [BackendType::Memory, BackendType::Redis] {
            assert_eq!(conn_threads_for(backend), conn_thread_count());
            assert!(conn_threads_for(backend) >= 1);
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
}
