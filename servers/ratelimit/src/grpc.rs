//! The gRPC face: `envoy.service.ratelimit.v3.RateLimitService` and `grpc.health.v1.Health`
//! on one port, in two parts: the service adapter (`grpc/service.rs`: a request in, the limiter's
//! decision out) and the connection engine (`grpc/engine.rs`: accepting, connection threads,
//! HTTP/2, ageing). The engine is generic over the routes, so a benchmark can run it with a
//! null service.

mod engine;
mod rlqs;
mod service;

pub use engine::{Ageing, Connections, GrpcListener, conn_threads_for, serve_grpc};
pub use rlqs::{RlqsService, action_to_pb, usages as rlqs_usages};
pub use service::{GrpcRoutes, RlsService, routes};
