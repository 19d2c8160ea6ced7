//! `ratelimit`: reads upstream's environment settings and serves until SIGTERM or SIGINT.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ratelimit_backends::{MemcachedStore, MemoryStore, RedisStore, SystemClock};
use ratelimit_core::{Clock, CounterStore, Limiter, Stats};
use ratelimit_server::grpc::GrpcListener;
use ratelimit_server::log::{self, Level};
use ratelimit_server::settings::{BackendType, ConfigType};
use ratelimit_server::tls::{self, TlsFiles};
use ratelimit_server::{App, Health, Listeners, Settings, files, serve};
use tokio::net::TcpListener;

fn main() -> ExitCode {
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
    for w in &settings.warnings {
        log::log(Level::Warn, w);
    }
    let store: Arc<dyn CounterStore> = match settings.backend_type {
        BackendType::Memory => Arc::new(MemoryStore::new()),
        BackendType::Redis => {
            let retry = |m: &str| log::log(Level::Warn, m);
            Arc::new(
                RedisStore::connect(
                    settings.redis.clone(),
                    settings.redis_per_second.clone(),
                    settings.redis_startup,
                    &retry,
                )
                .await
                .map_err(|e| format!("cannot connect to redis: {e}"))?,
            )
        }
        BackendType::Memcache => {
            Arc::new(MemcachedStore::new(settings.memcache.clone()).map_err(|e| e.to_string())?)
        }
    };
    if settings.config_type != ConfigType::File {
        return Err(
            "CONFIG_TYPE=GRPC_XDS_SOTW is not built yet in this version; use CONFIG_TYPE=FILE"
                .into(),
        );
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let stats = Arc::new(Stats::with_dynamic_cap(settings.stats_dynamic_cap));
    let limiter = Limiter::builder(store, clock)
        .settings(settings.limiter.clone())
        .stats(stats)
        .build()
        .map_err(|e| e.to_string())?;
    let health = Health::new(settings.healthy_with_at_least_one_config_loaded);

    let files = files::read_rule_files(&settings).map_err(|e| e.to_string())?;
    limiter
        .reload_yaml(
            files.iter().map(|(n, t)| (n.as_str(), t.as_str())),
            settings.merge_domain_config,
        )
        .map_err(|e| format!("error loading rate limit configuration: {e}"))?;
    let domains = limiter.rules().map_or(0, |r| r.domain_count());
    health.set_config(domains > 0 || !settings.healthy_with_at_least_one_config_loaded);
    log::log(
        Level::Info,
        &format!("loaded {} rule file(s), {domains} domain(s)", files.len()),
    );

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
    // Tests and operators read the bound addresses from this line (ports may be 0).
    eprintln!(
        "ratelimit: listening http={} debug={} grpc={grpc_addr}",
        http.local_addr().map_err(|e| e.to_string())?,
        debug.local_addr().map_err(|e| e.to_string())?
    );
    let app = Arc::new(App {
        limiter,
        health,
        settings,
    });
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
    serve(
        app,
        Listeners {
            http,
            debug,
            grpc: Some((grpc, tls)),
        },
        shutdown_signal(),
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

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the process still stops on SIGTERM's default action.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    log::log(Level::Info, "termination signal received, draining");
}
