//! The `ratelimit` server: a thin shell that serves `ratelimit-core` over upstream's
//! interfaces (HTTP `/json` and `/healthcheck`, the debug port) with upstream's settings.
//!
//! It parses settings, reads rule files, picks a counter store and wires them to sockets.
//! What it deliberately does not do: decide anything. Matching, keys, counting and
//! statistics all live in `ratelimit-core`; a request handler here only translates.
//!
//! [`serve`] runs every listener until a shutdown future resolves, so tests run the whole
//! server on `127.0.0.1:0`.
#![forbid(unsafe_code)]

pub mod checkconfig;
pub mod conn;
pub mod convert;
pub mod files;
pub mod grpc;
pub mod health;
pub mod http;
pub mod limits;
pub mod log;
pub mod memory;
pub mod metrics;
pub mod pb;
pub mod provider;
pub mod rls_call;
pub mod settings;
pub mod tls;
pub mod tracing;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ratelimit_core::{Clock, CounterStore, Limiter};
use tokio::net::TcpListener;

pub use health::Health;
pub use settings::Settings;

/// The limiter as the server runs it: any store, any clock.
pub type ServerLimiter = Limiter<Arc<dyn CounterStore>, Arc<dyn Clock>>;

/// Everything a request handler needs.
pub struct App {
    /// The decision engine.
    pub limiter: ServerLimiter,
    /// Health components.
    pub health: Health,
    /// The settings the server started with.
    pub settings: Settings,
    /// Statistics for the sinks and the debug port.
    pub metrics: Arc<metrics::Metrics>,
}

/// The sockets the server answers on, each with its TLS configuration when enabled.
pub struct Listeners {
    /// `/json` and `/healthcheck`.
    pub http: (TcpListener, Option<tls::SharedConfig>),
    /// The debug port.
    pub debug: (TcpListener, Option<tls::SharedConfig>),
    /// The gRPC port.
    pub grpc: Option<(grpc::GrpcListener, Option<tls::SharedConfig>)>,
}

/// How long open connections may finish after shutdown begins.
pub const DRAIN: Duration = Duration::from_secs(10);

/// Serves until `shutdown` resolves; then health turns unhealthy, listeners close and
/// in-flight requests finish (for at most [`DRAIN`]).
pub async fn serve(app: Arc<App>, listeners: Listeners, shutdown: impl Future<Output = ()>) {
    let (tx, rx) = tokio::sync::watch::channel(false);
    let http_port = |name, limits, tls| http::HttpPort {
        gate: conn::Gate::new(name, limits),
        tls,
        read_timeout: app.settings.http_read_timeout,
    };
    let a = app.clone();
    let (listener, tls) = listeners.http;
    let main = tokio::spawn(http::serve_http(
        listener,
        move |req| http::main_handler(a.clone(), req),
        http_port("HTTP", app.settings.ports.http, tls),
        rx.clone(),
        DRAIN,
    ));
    let a = app.clone();
    let (listener, tls) = listeners.debug;
    let debug = tokio::spawn(http::serve_http(
        listener,
        move |req| http::debug_handler(a.clone(), req),
        http_port("debug", app.settings.ports.debug, tls),
        rx.clone(),
        DRAIN,
    ));
    let grpc = match listeners.grpc {
        None => None,
        Some((listener, tls)) => {
            let threads = grpc::conn_threads_for(app.settings.backend_type);
            let conns = grpc::Connections::from_settings(&app.settings, threads);
            let routes = grpc::routes(app.clone()).await;
            Some(tokio::spawn(grpc::serve_grpc(
                listener,
                routes,
                tls,
                conns,
                rx.clone(),
                DRAIN,
            )))
        }
    };
    shutdown.await;
    // Unhealthy first, so that load balancers stop sending before the listeners close.
    app.health.fail_sigterm();
    let _ = tx.send(true);
    let _ = main.await;
    let _ = debug.await;
    if let Some(g) = grpc {
        let _ = g.await;
    }
}
