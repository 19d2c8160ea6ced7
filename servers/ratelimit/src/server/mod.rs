//! Settings to a running server: [`run`] is everything the `ratelimit` binary does between
//! reading its settings and exiting, so what tests start is exactly what operators run.
//!
//! Order matters and is kept here: rules load before any listener opens (unless
//! `FORCE_START_WITHOUT_INITIAL_CONFIG`), the bound addresses are announced on stderr only
//! once a shutdown signal can be caught, and on shutdown health fails first, then the
//! listeners drain, then the statistics sink flushes once more and traces are sent.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ratelimit_backends::SystemClock;
use ratelimit_core::{Clock, Limiter, Stats};
use tokio::net::TcpListener;

use crate::app::App;
use crate::conn::Gate;
use crate::grpc::{self, GrpcListener};
use crate::health::Health;
use crate::http;
use crate::log::{self, Level};
use crate::metrics::Metrics;
use crate::provider;
use crate::settings::Settings;
use crate::tls::{self, SharedConfig, TlsFiles};

mod stats;
mod store;

/// Runs the server `settings` describe until the future `shutdown` returns resolves, then
/// drains it. `shutdown` is called once the sockets are bound, right before their addresses
/// are announced: a signal handler it installs then catches a signal sent as soon as the
/// announcement is read, while a signal sent earlier (waiting for the first rules, say)
/// still ends the process at once.
///
/// First sets up logging from the settings, raises the open file limit (lowering the ports'
/// connection bounds if they still do not fit) and logs the settings' warnings. Errors are
/// startup failures: a store that cannot be reached, a port that cannot be bound, bad TLS
/// files.
pub async fn run<F: Future<Output = ()>>(
    mut settings: Settings,
    shutdown: impl FnOnce() -> F,
) -> Result<(), String> {
    log::init(&settings.log_level, settings.log_format);
    fit_to_file_limit(&mut settings);
    for w in &settings.warnings {
        log::log(Level::Warn, w);
    }
    let (store, redis) = store::connect(&settings).await?;
    let (store, tracer_provider) = store::traced(&settings, store)?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let stats = Arc::new(Stats::with_dynamic_bounds(
        settings.stats_dynamic_cap,
        settings.stats_dynamic_bytes,
    ));
    let mut metrics = Metrics::new(stats.clone());
    let store = store::timed(&settings, store, &mut metrics);
    let metrics = Arc::new(metrics);
    let limiter = Limiter::builder(store, clock)
        .settings(settings.limiter.clone())
        .stats(stats)
        .build()
        .map_err(|e| e.to_string())?;
    let health = Health::new(settings.healthy_with_at_least_one_config_loaded);
    let tls = tls_config(&settings)?;

    // Rules before listeners: without FORCE_START_WITHOUT_INITIAL_CONFIG no listener opens
    // before a configuration is loaded.
    let app = Arc::new(App {
        limiter,
        health,
        settings: settings.clone(),
        metrics,
        quota_redis: redis.clone().filter(|_| settings.rlqs_share_through_redis),
    });
    provider::start(app.clone()).await?;

    let http = bind(&settings.host, settings.port).await?;
    let debug = bind(&settings.debug_host, settings.debug_port).await?;
    let (grpc, grpc_addr) = if settings.grpc_uds.is_empty() {
        let l = bind(&settings.grpc_host, settings.grpc_port).await?;
        let addr = l.local_addr().map_err(|e| e.to_string())?.to_string();
        (GrpcListener::Tcp(l), addr)
    } else {
        // A socket file left by a previous run would make bind fail.
        let _ = std::fs::remove_file(&settings.grpc_uds);
        let l = tokio::net::UnixListener::bind(&settings.grpc_uds)
            .map_err(|e| format!("cannot listen on unix socket {}: {e}", settings.grpc_uds))?;
        (GrpcListener::Unix(l), format!("unix:{}", settings.grpc_uds))
    };
    let shutdown = shutdown();
    // Tests and operators read the bound addresses from this line (ports may be 0).
    eprintln!(
        "ratelimit: listening http={} debug={} grpc={grpc_addr}",
        http.local_addr().map_err(|e| e.to_string())?,
        debug.local_addr().map_err(|e| e.to_string())?
    );
    let prometheus = stats::bind_prometheus(&settings.stats_sink).await?;
    stats::add_gauges(&app, redis);
    let (stats_stop, stats_stopped) = tokio::sync::watch::channel(false);
    let sink_task = stats::start_sink(&app, prometheus, stats_stopped).await?;
    // The store's health (e.g. REDIS_HEALTH_CHECK_ACTIVE_CONNECTION) feeds the health faces.
    let watched = app.clone();
    tokio::spawn(async move {
        loop {
            watched
                .health
                .set_backend(watched.limiter.store().healthy());
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    let tls_for = |on: bool| tls.clone().filter(|_| on);
    let listeners = Listeners {
        http: (http, tls_for(settings.http_server_use_tls)),
        debug: (debug, tls_for(settings.debug_server_use_tls)),
        grpc: Some((grpc, tls_for(settings.grpc_server_use_tls))),
    };
    serve(app, listeners, shutdown).await;
    let _ = stats_stop.send(true);
    if let Some(t) = sink_task {
        // A last flush so that the final counts are not lost.
        let _ = tokio::time::timeout(Duration::from_secs(2), t).await;
    }
    if let Some(p) = tracer_provider {
        // Sends what the batch processor still holds.
        let _ = tokio::task::spawn_blocking(move || p.shutdown()).await;
    }
    log::log(Level::Info, "stopped");
    Ok(())
}

/// Resolves on SIGTERM or SIGINT. The handlers are registered when this is called, not when
/// the future is first polled, so that a signal arriving right after the listeners are
/// announced still drains instead of killing the process.
pub fn termination_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let handlers = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        let (Ok(mut term), Ok(mut int)) = handlers else {
            // Without signal handlers the process still stops on SIGTERM's default action.
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        log::log(Level::Info, "termination signal received, draining");
    }
}

/// One certificate, reloaded in one place, for every port that serves TLS.
fn tls_config(settings: &Settings) -> Result<Option<SharedConfig>, String> {
    let tls_users: Vec<&str> = [
        ("GRPC_SERVER_USE_TLS", settings.grpc_server_use_tls),
        ("HTTP_SERVER_USE_TLS", settings.http_server_use_tls),
        ("DEBUG_SERVER_USE_TLS", settings.debug_server_use_tls),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect();
    let Some(first) = tls_users.first() else {
        return Ok(None);
    };
    if settings.grpc_server_tls_cert.is_empty() || settings.grpc_server_tls_key.is_empty() {
        return Err(format!(
            "{first}=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"
        ));
    }
    let files = TlsFiles {
        cert: settings.grpc_server_tls_cert.clone().into(),
        key: settings.grpc_server_tls_key.clone().into(),
        client_ca: (!settings.grpc_client_tls_cacert.is_empty())
            .then(|| settings.grpc_client_tls_cacert.clone().into()),
        client_san: (!settings.grpc_client_tls_san.is_empty())
            .then(|| settings.grpc_client_tls_san.clone()),
    };
    let config =
        tls::load_and_watch(files, Duration::from_secs(1)).map_err(|e| format!("TLS: {e}"))?;
    Ok(Some(config))
}

/// Raises the soft limit on open files to the hard one, as the Go runtime does for upstream
/// (a connection is a file), then lowers the ports' connection bounds if they still do not
/// fit under it.
fn fit_to_file_limit(settings: &mut Settings) {
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => n,
        Err(e) => {
            log::log(
                Level::Warn,
                &format!("cannot read the open file limit: {e}"),
            );
            return;
        }
    };
    if let Some(w) = settings.ports.fit_to_file_limit(limit) {
        log::log(Level::Warn, &w);
    }
}

async fn bind(host: &str, port: u16) -> Result<TcpListener, String> {
    TcpListener::bind((host, port))
        .await
        .map_err(|e| format!("cannot listen on {host}:{port}: {e}"))
}

/// The sockets the server answers on, each with its TLS configuration when enabled.
pub struct Listeners {
    /// `/json` and `/healthcheck`.
    pub http: (TcpListener, Option<SharedConfig>),
    /// The debug port.
    pub debug: (TcpListener, Option<SharedConfig>),
    /// The gRPC port.
    pub grpc: Option<(GrpcListener, Option<SharedConfig>)>,
}

/// How long open connections may finish after shutdown begins.
pub const DRAIN: Duration = Duration::from_secs(10);

/// Serves until `shutdown` resolves; then health turns unhealthy, listeners close and
/// in-flight requests finish (for at most [`DRAIN`]).
pub async fn serve(app: Arc<App>, listeners: Listeners, shutdown: impl Future<Output = ()>) {
    let (tx, rx) = tokio::sync::watch::channel(false);
    let http_port = |name, limits, tls| http::HttpPort {
        gate: Gate::new(name, limits),
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
            let threads = grpc::conn_threads_for(&app.settings);
            let conns = grpc::Connections::from_settings(&app.settings, threads);
            let routes = grpc::routes(app.clone(), rx.clone()).await;
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
