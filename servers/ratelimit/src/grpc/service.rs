//! The service adapter: `ShouldRateLimit` answered from the [`App`]'s limiter, RLQS streams
//! (routed to [`super::rlqs`]), gRPC health
//! mirrored from the app's health, and the routing of a request path to either. It only
//! translates; connections are the engine's ([`super::engine`]).

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::Poll;

use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::{Request, Response, Status};
use tonic_health::ServingStatus;

use crate::app::App;
use crate::convert;
use crate::limits::RequestLimits;
use crate::log::{self, Level};
use crate::pb::rls;
use crate::rls_call::{self, LimitedCodec};

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
        let started = crate::metrics::histogram::start();
        let r = self.decide(request).await;
        self.app.metrics.response_time.observe_since(started);
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
        // A store that counts in process answers during the call (the limiter says so by
        // answering), and then no future is made: this call's own future stays small,
        // and every move of it on its way through tonic and hyper copies less.
        let now = if parent.is_off() {
            self.app.limiter.should_rate_limit_now(&req)
        } else {
            None
        };
        let decision = match now {
            Some(decision) => decision,
            None => {
                let decision = crate::tracing::in_span(
                    parent,
                    "ShouldRateLimit",
                    &req.domain,
                    req.descriptors.len(),
                    self.app.limiter.should_rate_limit(&req),
                );
                Box::pin(decision).await
            }
        };
        match decision {
            Ok(resp) => Ok(Response::new(convert::response_to_pb(&resp))),
            // Upstream returns a plain Go error, which gRPC sends as UNKNOWN with the text.
            Err(e) => {
                log::log(Level::Warn, &format!("ShouldRateLimit: {e}"));
                Err(Status::unknown(e.to_string()))
            }
        }
    }
}

/// The routes of the gRPC port, and a task that mirrors [`crate::health::Health`] into the gRPC
/// health service under the name `ratelimit`. The first status is set before this returns,
/// so a health check that arrives with the first connection never finds the service
/// unregistered.
pub async fn routes(
    app: Arc<App>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> GrpcRoutes<RlsService> {
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
    let rlqs = super::rlqs::RlqsService::new(app.clone(), shutdown);
    rlqs.spawn_ticker();
    let rest = Routes::new(health_service)
        .add_service(RlqsServer::new(rlqs))
        .prepare();
    GrpcRoutes::new(RlsService::new(app), rest).with_request_limits(limits, refused)
}

type RlqsServer<T> =
    crate::pb::rlqs::rate_limit_quota_service_server::RateLimitQuotaServiceServer<T>;
type RlsServer<T> = rls::rate_limit_service_server::RateLimitServiceServer<T>;

/// The gRPC port's services. Decisions go straight to the rate limit service; every other
/// path (health checks, unknown services: `UNIMPLEMENTED`) goes through tonic's `Routes`.
/// `Routes` finds a service with axum's router, which parses the path into parameters on
/// each call: a measurable share of a decision's cost (docs/benchmarks.md) for a choice a
/// prefix test makes.
pub struct GrpcRoutes<T>(Arc<Routing<T>>);

struct Routing<T> {
    /// `ShouldRateLimit`, called with our codec.
    rls: Arc<T>,
    codec: LimitedCodec,
    /// The rate limit service's other paths (`UNIMPLEMENTED`).
    rls_server: RlsServer<T>,
    rest: Routes,
    /// The connection's peer (TCP), handed to the services behind `rest` as [`PeerIp`].
    peer: Option<IpAddr>,
}

/// The peer address of the connection a request came on, in the request's extensions for
/// the services behind tonic's `Routes` (RLQS names an Envoy by it).
#[derive(Debug, Clone, Copy)]
pub struct PeerIp(pub IpAddr);

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
        GrpcRoutes::of(rls, codec, rest, None)
    }

    fn of(rls: Arc<T>, codec: LimitedCodec, rest: Routes, peer: Option<IpAddr>) -> Self {
        GrpcRoutes(Arc::new(Routing {
            rls_server: RlsServer::from_arc(rls.clone()),
            rls,
            codec,
            rest,
            peer,
        }))
    }

    /// Holds requests to `limits`, counting those refused in `refused`.
    pub fn with_request_limits(self, limits: RequestLimits, refused: Arc<AtomicU64>) -> Self {
        let codec = LimitedCodec::new(limits, refused);
        GrpcRoutes::of(self.0.rls.clone(), codec, self.0.rest.clone(), self.0.peer)
    }

    /// The routes for one connection. hyper clones them for every call, and every clone
    /// bumps a reference count: one of this connection's only, rather than counts that
    /// every connection thread shares and passes between cores (slower when shared:
    /// docs/benchmarks.md).
    pub(super) fn for_connection(&self, peer: Option<IpAddr>) -> Self {
        GrpcRoutes::of(
            self.0.rls.clone(),
            self.0.codec.for_connection(),
            self.0.rest.clone(),
            peer,
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

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let path = req.uri().path();
        if path == rls_call::PATH {
            let call = ShouldRateLimit(self.clone());
            let mut grpc = tonic::server::Grpc::new(self.0.codec.clone());
            Box::pin(async move { Ok(grpc.unary(call, req).await) })
        } else if is_rls_path(path) {
            self.0.rls_server.clone().call(req)
        } else {
            if let Some(ip) = self.0.peer {
                req.extensions_mut().insert(PeerIp(ip));
            }
            Box::pin(self.0.rest.clone().call(req))
        }
    }
}
