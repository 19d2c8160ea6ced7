//! `ratelimit`: reads upstream's environment settings and serves until SIGTERM or SIGINT.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ratelimit_backends::{MemoryStore, SystemClock};
use ratelimit_core::{Clock, CounterStore, Limiter, Stats};
use ratelimit_server::grpc::GrpcListener;
use ratelimit_server::log::{self, Level};
use ratelimit_server::settings::BackendType;
use ratelimit_server::tls::{self, TlsFiles};
use ratelimit_server::{App, Health, Listeners, Settings, provider, serve};
use tokio::net::TcpListener;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("check-config") {
        return ratelimit_server::checkconfig::main(&args[2..]);
    }
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ratelimit: {e}");
            return ExitCode::from(2);
        }
    };
    log::init(&settings.log_level, settings.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ratelimit: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::log(Level::Error, &e);
            eprintln!("ratelimit: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(settings: Settings) -> Result<(), String> {
    let store: Arc<dyn CounterStore> = match settings.backend_type {
        BackendType::Memory => Arc::new(MemoryStore::new()),
        BackendType::Redis => {
            return Err(
                "BACKEND_TYPE=redis is not built yet in this version; set BACKEND_TYPE=memory"
                    .into(),
            );
        }
        BackendType::Memcache => {
            return Err(
                "BACKEND_TYPE=memcache is not built yet in this version; set BACKEND_TYPE=memory"
                    .into(),
            );
        }
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let stats = Arc::new(Stats::with_dynamic_cap(settings.stats_dynamic_cap));
    let limiter = Limiter::builder(store, clock)
        .settings(settings.limiter.clone())
        .stats(stats)
        .build()
        .map_err(|e| e.to_string())?;
    let health = Health::new(settings.healthy_with_at_least_one_config_loaded);

    let tls = if settings.grpc_server_use_tls {
        if settings.grpc_server_tls_cert.is_empty() || settings.grpc_server_tls_key.is_empty() {
            return Err(
                "GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"
                    .into(),
            );
        }
        let files = TlsFiles {
            cert: settings.grpc_server_tls_cert.clone().into(),
            key: settings.grpc_server_tls_key.clone().into(),
            client_ca: (!settings.grpc_client_tls_cacert.is_empty())
                .then(|| settings.grpc_client_tls_cacert.clone().into()),
            client_san: (!settings.grpc_client_tls_san.is_empty())
                .then(|| settings.grpc_client_tls_san.clone()),
        };
        Some(
            tls::load_and_watch(files, Duration::from_secs(1))
                .map_err(|e| format!("gRPC TLS: {e}"))?,
        )
    } else {
        None
    };

    // Rules before listeners: without FORCE_START_WITHOUT_INITIAL_CONFIG no listener opens
    // before a configuration is loaded.
    let app = Arc::new(App {
        limiter,
        health,
        settings: settings.clone(),
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
    let shutdown = shutdown_signal();
    // Tests and operators read the bound addresses from this line (ports may be 0).
    eprintln!(
        "ratelimit: listening http={} debug={} grpc={grpc_addr}",
        http.local_addr().map_err(|e| e.to_string())?,
        debug.local_addr().map_err(|e| e.to_string())?
    );
    serve(
        app,
        Listeners {
            http,
            debug,
            grpc: Some((grpc, tls)),
        },
        shutdown,
    )
    .await;
    log::log(Level::Info, "stopped");
    Ok(())
}

async fn bind(host: &str, port: u16) -> Result<TcpListener, String> {
    TcpListener::bind((host, port))
        .await
        .map_err(|e| format!("cannot listen on {host}:{port}: {e}"))
}

/// Registers the handlers now (not when first polled), so that a signal arriving right
/// after the listeners are announced still drains instead of killing the process.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
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
