//! Statistics the server adds to the engine's (store pool and local cache gauges) and the
//! sink `USE_STATSD`, `USE_DOG_STATSD`, `USE_PROMETHEUS` or `DISABLE_STATS` choose.

use std::sync::Arc;
use std::time::Duration;

use ratelimit_backends::RedisStore;
use tokio::net::TcpListener;

use crate::app::App;
use crate::conn::Gate;
use crate::metrics::statsd::{self, Flavor};
use crate::settings::StatsSink;

/// The health gauge's statsd-style name (Prometheus: `ratelimit_server_healthy`).
const HEALTHY: &str = "ratelimit_server.healthy";

/// Gauges read at each flush: overall health, the Redis pools' open connections, the local
/// cache's counts.
pub(super) fn add_gauges(app: &Arc<App>, redis: Option<Arc<RedisStore>>) {
    // What /healthcheck answers, as 1 or 0, so that dashboards and alerts see an instance
    // that is up but refuses traffic (store unhealthy, no rules yet, draining).
    let health_app = app.clone();
    app.metrics.add_gauges(move |out| {
        out.push((HEALTHY.into(), u64::from(health_app.health.healthy())));
    });
    if let Some(r) = redis {
        app.metrics.add_gauges(move |out| {
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
    if let Some(lc_app) = app.limiter.local_cache().map(|_| app.clone()) {
        app.metrics.add_gauges(move |out| {
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
}

/// The Prometheus endpoint's socket, when that is the sink.
pub(super) async fn bind_prometheus(sink: &StatsSink) -> Result<Option<TcpListener>, String> {
    match sink {
        StatsSink::Prometheus { addr, .. } => TcpListener::bind(addr)
            .await
            .map(Some)
            .map_err(|e| format!("cannot listen on PROMETHEUS_ADDR {addr}: {e}")),
        _ => Ok(None),
    }
}

/// Starts the statistics sink chosen by the settings; it flushes a last time when `stop`
/// flips.
pub(super) async fn start_sink(
    app: &Arc<App>,
    prometheus: Option<TcpListener>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<Option<tokio::task::JoinHandle<()>>, String> {
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
                async move { crate::http::prometheus_response(&req, &path, &metrics, &mappings, millis) }
            };
            let port = crate::http::HttpPort {
                gate: Gate::new("Prometheus", s.ports.debug),
                tls: None,
                read_timeout: s.http_read_timeout,
            };
            Some(tokio::spawn(crate::http::serve_http(
                listener,
                handler,
                port,
                stop,
                Duration::from_secs(2),
            )))
        }
    })
}
