//! `ratelimit`: reads upstream's environment settings and serves until SIGTERM or SIGINT.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ratelimit_backends::memcached::Severity;
use ratelimit_backends::{MemcachedStore, MemoryStore, RedisStore, SystemClock};
use ratelimit_core::{Clock, CounterStore, Limiter, Stats};
use ratelimit_server::conn::Gate;
use ratelimit_server::grpc::GrpcListener;
use ratelimit_server::log::{self, Level};
use ratelimit_server::metrics::Metrics;
use ratelimit_server::settings::{BackendType, StatsSink};
use ratelimit_server::tls::{self, TlsFiles};
use ratelimit_server::{App, Health, Listeners, Settings, provider, serve};
use tokio::net::TcpListener;

// Every request allocates (HTTP/2 frames, tonic's 8 KB encode buffer, the decision), and
// glibc's malloc spent about a tenth of the server's time on it, consolidating its free
// lists whenever a buffer that size was asked for.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    ratelimit_server::memory::keep_huge_pages_off();
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("check-config") {
        return ratelimit_server::checkconfig::main(&args[2..]);
    }
    let mut settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ratelimit: {e}");
            return ExitCode::from(2);
        }
    };
    log::init(&settings.log_level, settings.log_format);
    fit_to_file_limit(&mut settings);
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
    let mut redis_handle: Option<Arc<RedisStore>> = None;
    let store: Arc<dyn CounterStore> = match settings.backend_type {
        BackendType::Memory => Arc::new(MemoryStore::new()),
        BackendType::Redis => {
            let retry = |m: &str| log::log(Level::Warn, m);
            let r = Arc::new(
                RedisStore::connect(
                    settings.redis.clone(),
                    settings.redis_per_second.clone(),
                    settings.redis_startup,
                    &retry,
                )
                .await
                .map_err(|e| format!("cannot connect to redis: {e}"))?
                .with_warnings(|m| log::log(Level::Warn, m)),
            );
            redis_handle = Some(r.clone());
            r
        }
        BackendType::Memcache => {
            let report = |severity: Severity, m: &str| {
                let level = match severity {
                    Severity::Info => Level::Info,
                    Severity::Error => Level::Error,
                };
                log::log(level, m);
            };
            Arc::new(
                MemcachedStore::connect(settings.memcache.clone(), report)
                    .await
                    .map_err(|e| e.to_string())?,
            )
        }
    };
    // Spans for store calls only when tracing is on: the wrapper costs a span per call.
    let tracer_provider = if settings.tracing.enabled {
        Some(ratelimit_server::tracing::init(&settings.tracing)?)
    } else {
        None
    };
    let store: Arc<dyn CounterStore> = if tracer_provider.is_some() {
        Arc::new(ratelimit_server::tracing::TracedStore(store))
    } else {
        store
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let stats = Arc::new(Stats::with_dynamic_bounds(
        settings.stats_dynamic_cap,
        settings.stats_dynamic_bytes,
    ));
    let metrics = Arc::new(Metrics::new(stats.clone()));
    let limiter = Limiter::builder(store, clock)
        .settings(settings.limiter.clone())
        .stats(stats)
        .build()
        .map_err(|e| e.to_string())?;
    let health = Health::new(settings.healthy_with_at_least_one_config_loaded);

    // One certificate, reloaded in one place, for every port that serves TLS.
    let tls_users: Vec<&str> = [
        ("GRPC_SERVER_USE_TLS", settings.grpc_server_use_tls),
        ("HTTP_SERVER_USE_TLS", settings.http_server_use_tls),
        ("DEBUG_SERVER_USE_TLS", settings.debug_server_use_tls),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect();
    let tls = if let Some(first) = tls_users.first() {
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
        Some(tls::load_and_watch(files, Duration::from_secs(1)).map_err(|e| format!("TLS: {e}"))?)
    } else {
        None
    };

    // Rules before listeners: without FORCE_START_WITHOUT_INITIAL_CONFIG no listener opens
    // before a configuration is loaded.
    let app = Arc::new(App {
        limiter,
        health,
        settings: settings.clone(),
        metrics: metrics.clone(),
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
    if let Some(r) = redis_handle {
        metrics.add_gauges(move |out| {
            let (main, per_second) = r.active_connections();
            out.push(("ratelimit.redis_pool.cx_active".into(), main as u64));
            if per_second > 0 {
                out.push((
                    "ratelimit.redis_per_second_pool.cx_active".into(),
                    per_second as u64,
                ));
            }
        });
    }
    let prometheus = match &settings.stats_sink {
        StatsSink::Prometheus { addr, .. } => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot listen on PROMETHEUS_ADDR {addr}: {e}"))?,
        ),
        _ => None,
    };
    if let Some(lc_app) = app.limiter.local_cache().map(|_| app.clone()) {
        metrics.add_gauges(move |out| {
            use std::sync::atomic::Ordering::Relaxed;
            let Some(lc) = lc_app.limiter.local_cache() else {
                return;
            };
            let s = &lc.stats;
            for (name, v) in [
                ("hitCount", s.hit_count.load(Relaxed)),
                ("missCount", s.miss_count.load(Relaxed)),
                ("lookupCount", s.lookup_count.load(Relaxed)),
                ("entryCount", lc.entry_count() as u64),
                ("expiredCount", s.expired_count.load(Relaxed)),
                ("evacuateCount", s.evacuate_count.load(Relaxed)),
                ("overwriteCount", s.overwrite_count.load(Relaxed)),
            ] {
                out.push((format!("ratelimit.localcache.{name}"), v));
            }
        });
    }
    let (stats_stop, stats_stopped) = tokio::sync::watch::channel(false);
    let sink_task = start_sink(&app, prometheus, stats_stopped).await?;
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

/// Starts the statistics sink chosen by the settings.
async fn start_sink(
    app: &Arc<App>,
    prometheus: Option<TcpListener>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<Option<tokio::task::JoinHandle<()>>, String> {
    use ratelimit_server::metrics::statsd::{self, Flavor};
    let s = &app.settings;
    let push = |flavor: Flavor, target: Option<std::net::SocketAddr>| {
        tokio::spawn(statsd::run(
            app.metrics.clone(),
            flavor,
            target,
            s.stats_flush_interval,
            s.extra_tags.clone(),
            stop.clone(),
        ))
    };
    let resolve = |t: &str| {
        use std::net::ToSocketAddrs;
        t.to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| format!("cannot resolve STATSD_HOST:STATSD_PORT {t}"))
    };
    Ok(match &s.stats_sink {
        StatsSink::Null => None,
        StatsSink::Log => Some(push(Flavor::Log, None)),
        StatsSink::Statsd(t) => Some(push(Flavor::Statsd, Some(resolve(t)?))),
        StatsSink::DogStatsd(t, m) => Some(push(Flavor::Dog(m.clone()), Some(resolve(t)?))),
        StatsSink::Prometheus {
            path,
            mappings,
            millis,
            ..
        } => {
            let Some(listener) = prometheus else {
                return Ok(None);
            };
            eprintln!(
                "ratelimit: listening prometheus={}",
                listener.local_addr().map_err(|e| e.to_string())?
            );
            let (path, mappings, millis, metrics) = (
                path.clone(),
                Arc::new(mappings.clone()),
                *millis,
                app.metrics.clone(),
            );
            let handler = move |req: http::Request<hyper::body::Incoming>| {
                let (path, mappings, metrics) = (path.clone(), mappings.clone(), metrics.clone());
                async move {
                    ratelimit_server::http::prometheus_response(
                        &req, &path, &metrics, &mappings, millis,
                    )
                }
            };
            let port = ratelimit_server::http::HttpPort {
                gate: Gate::new("Prometheus", s.ports.debug),
                tls: None,
                read_timeout: s.http_read_timeout,
            };
            Some(tokio::spawn(ratelimit_server::http::serve_http(
                listener,
                handler,
                port,
                stop,
                Duration::from_secs(2),
            )))
        }
    })
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
