//! The HTTP faces: `/json` and `/healthcheck` on the main port, and the debug port.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use ratelimit_core::{Code, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::app::App;
use crate::conn::{Activity, Backoff, Gate, Watched};
use crate::cpu_profile;
use crate::log::{self, Level};
use crate::tls::SharedConfig;

type Resp = Response<Full<Bytes>>;

fn text(status: StatusCode, body: &'static str) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Upstream answers every unusable `/json` request with exactly this; the reason goes in a
/// header and the log so that clients matching on the body keep working.
fn bad_request(reason: &str) -> Resp {
    log::log(Level::Debug, &format!("/json: bad request: {reason}"));
    let mut r = text(StatusCode::BAD_REQUEST, "Bad Request\n");
    if let Ok(v) = header::HeaderValue::from_str(&sanitize_header(reason)) {
        r.headers_mut().insert("x-ratelimit-error", v);
    }
    r
}

fn sanitize_header(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(512)
        .collect()
}

/// The main port: `/json` (any method, as upstream) and `/healthcheck`.
pub async fn main_handler(app: Arc<App>, req: Request<Incoming>) -> Resp {
    match req.uri().path() {
        "/json" => json_handler(app, req).await,
        "/healthcheck" => {
            if app.health.healthy() {
                text(StatusCode::OK, "OK")
            } else {
                text(StatusCode::INTERNAL_SERVER_ERROR, "")
            }
        }
        _ => text(StatusCode::NOT_FOUND, "404 page not found\n"),
    }
}

async fn json_handler(app: Arc<App>, req: Request<Incoming>) -> Resp {
    let parent = crate::tracing::SpanParent::from_headers(&app.settings.tracing, req.headers());
    let max = app.settings.http_max_body_bytes;
    let read = tokio::time::timeout(
        app.settings.http_read_timeout,
        Limited::new(req.into_body(), max).collect(),
    )
    .await;
    let body = match read {
        Err(_) => return text(StatusCode::REQUEST_TIMEOUT, "Request Timeout\n"),
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return text(StatusCode::PAYLOAD_TOO_LARGE, "Request Entity Too Large\n");
        }
        Ok(Err(e)) => return bad_request(&format!("cannot read body: {e}")),
        Ok(Ok(b)) => b.to_bytes(),
    };
    let request = match json::parse_request(&body) {
        Ok(r) => r,
        Err(e) => return bad_request(&e.to_string()),
    };
    if let Err(e) = app.settings.request_limits.check_request(&request) {
        // Counted as the gRPC face counts its refusals.
        (app.limiter.stats().service_error).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return bad_request(&e.to_string());
    }
    let decision = app.limiter.should_rate_limit(&request);
    let decision = crate::tracing::in_span(
        parent,
        "json",
        &request.domain,
        request.descriptors.len(),
        decision,
    );
    let resp = match decision.await {
        Ok(r) => r,
        Err(e) => {
            log::log(Level::Warn, &format!("/json: {e}"));
            return bad_request(&e.to_string());
        }
    };
    let status = match resp.overall_code {
        Code::Ok => StatusCode::OK,
        Code::OverLimit => StatusCode::TOO_MANY_REQUESTS,
        Code::Unknown => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let mut r = Response::new(Full::new(Bytes::from(json::write_response(&resp))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// Paths of the debug port with their help text, as listed by `/`.
const DEBUG_PATHS: [(&str, &str); 5] = [
    (
        "/debug/pprof/",
        "root of various pprof endpoints. hit for help.",
    ),
    ("/debug/pprof/heap", "memory figures of the process"),
    (
        "/debug/pprof/profile",
        "CPU profiling endpoint (?seconds=N, default 10; SVG flame graph, or ?format=text for folded stacks)",
    ),
    (
        "/rlconfig",
        "print out the currently loaded configuration for debugging",
    ),
    ("/stats", "print out stats"),
];

/// Only one CPU profile at a time: the profiler is process-wide.
static PROFILING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn cpu_profile(query: Option<&str>) -> Resp {
    let mut seconds = 10u64;
    let mut format = cpu_profile::Format::FlameGraph;
    for pair in query.unwrap_or("").split('&') {
        match pair.split_once('=') {
            Some(("seconds", v)) => match v.parse::<u64>() {
                Ok(s) if (1..=120).contains(&s) => seconds = s,
                _ => return text(StatusCode::BAD_REQUEST, "seconds must be 1 to 120\n"),
            },
            Some(("format", "text")) => format = cpu_profile::Format::Folded,
            _ => {}
        }
    }
    let Ok(lock) = PROFILING.try_lock() else {
        return text(StatusCode::CONFLICT, "a profile is already being taken\n");
    };
    let sampling = match cpu_profile::Sampling::start(
        cpu_profile::FREQUENCY,
        cpu_profile::capacity(seconds),
    ) {
        Ok(s) => s,
        Err(cpu_profile::StartError::Busy) => {
            return text(StatusCode::CONFLICT, "a profile is already being taken\n");
        }
        Err(cpu_profile::StartError::Os(e)) => {
            log::log(Level::Error, &format!("cannot start the CPU profiler: {e}"));
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot start the profiler\n",
            );
        }
    };
    // A client that goes away mid-profile drops `sampling`, which stops it.
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    // Naming frames parses the binary's debug information: seconds of CPU, kept off the
    // runtime's threads.
    let rendered = tokio::task::spawn_blocking(move || {
        let samples = sampling.stop();
        if samples.dropped > 0 {
            log::log(
                Level::Warn,
                &format!(
                    "CPU profile: {} samples over capacity dropped",
                    samples.dropped
                ),
            );
        }
        let out = cpu_profile::render(&samples, format);
        drop(samples);
        crate::memory::release_freed_memory();
        drop(lock);
        out
    })
    .await;
    let (body, ctype) = match rendered {
        Ok(Ok(Some(r))) => (r.body, r.content_type),
        Ok(Ok(None)) => return text(StatusCode::OK, "no CPU samples: the process was idle\n"),
        _ => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot build the profile\n",
            );
        }
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(ctype),
    );
    r
}

/// Resident and peak memory from the kernel's view of this process.
fn heap_figures() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .filter(|l| {
            ["VmRSS", "VmHWM", "VmSize", "VmPeak", "RssAnon", "Threads"]
                .iter()
                .any(|k| l.starts_with(k))
        })
        .map(|l| format!("{}\n", l.split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect()
}

/// The debug port: `/` (index), `/rlconfig`, `/stats`, and `/debug/pprof/*` unless
/// `DEBUG_PPROF_ENABLED` is false.
pub async fn debug_handler(app: Arc<App>, req: Request<Incoming>) -> Resp {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed\n");
    }
    let pprof = app.settings.debug_pprof_enabled;
    if !pprof && req.uri().path().starts_with("/debug/pprof") {
        return text(StatusCode::NOT_FOUND, "404 page not found\n");
    }
    let body = match req.uri().path() {
        "/" => DEBUG_PATHS
            .iter()
            .filter(|(p, _)| pprof || !p.starts_with("/debug/pprof"))
            .map(|(p, h)| format!("{p}: {h}\n"))
            .collect::<String>(),
        "/debug/pprof/" | "/debug/pprof" => DEBUG_PATHS
            .iter()
            .filter(|(p, _)| p.starts_with("/debug/pprof/") && *p != "/debug/pprof/")
            .map(|(p, h)| format!("{p}: {h}\n"))
            .collect(),
        "/debug/pprof/heap" => heap_figures(),
        "/debug/pprof/profile" => return cpu_profile(req.uri().query()).await,
        "/rlconfig" => app.limiter.rules().map(|r| r.dump()).unwrap_or_default(),
        "/stats" => {
            use crate::metrics::Value;
            let mut out = String::new();
            for (k, v) in app.metrics.collect() {
                match v {
                    Value::Counter(n) | Value::Gauge(n) => out.push_str(&format!("{k}: {n}\n")),
                    Value::Timer(h) => out.push_str(&format!(
                        "{k}: count={} sum_seconds={:.6}\n",
                        h.count, h.sum
                    )),
                }
            }
            out
        }
        _ => return text(StatusCode::NOT_FOUND, "404 page not found\n"),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// How an HTTP port treats its connections.
#[derive(Clone)]
pub struct HttpPort {
    /// The bound on open connections and their timeouts.
    pub gate: Arc<Gate>,
    /// Serve TLS (HTTP/1.1 and HTTP/2 by ALPN) with the configuration in force.
    pub tls: Option<SharedConfig>,
    /// How long a client may take to send a request's headers, and how long a connection
    /// may wait for its next request (`HTTP_READ_TIMEOUT`).
    pub read_timeout: Duration,
}

/// Serves HTTP/1.1 and HTTP/2 (h2c, or by ALPN over TLS) on `listener` until `shutdown`
/// flips, then lets open connections finish for up to `drain`.
pub async fn serve_http<H, Fut>(
    listener: TcpListener,
    handler: H,
    port: HttpPort,
    mut shutdown: watch::Receiver<bool>,
    drain: Duration,
) where
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Resp> + Send + 'static,
{
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Bounds how long a client may take to send its headers (slowloris), and how long an
    // HTTP/1 connection waits for its next request.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(port.read_timeout);
    let mut backoff = Backoff::default();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    tokio::time::sleep(port.gate.accept_failed(&e, &mut backoff)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        backoff.reset();
        let Some(ticket) = port.gate.admit() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let conn = Conn {
            builder: builder.clone(),
            handler: handler.clone(),
            watcher: graceful.watcher(),
            port: port.clone(),
        };
        tokio::spawn(async move {
            if ticket.first_byte(&stream).await.is_err() {
                return;
            }
            let Some(tls) = &conn.port.tls else {
                return conn.serve(stream).await;
            };
            let mut cfg = (*tls.load_full()).clone();
            cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            let accept = tokio_rustls::TlsAcceptor::from(Arc::new(cfg)).accept(stream);
            match tokio::time::timeout(conn.port.gate.limits().first_byte_timeout, accept).await {
                Ok(Ok(s)) => conn.serve(s).await,
                Ok(Err(e)) => log::log(Level::Debug, &format!("HTTP TLS handshake failed: {e}")),
                Err(_) => log::log(Level::Debug, "HTTP TLS handshake timed out"),
            }
            drop(ticket);
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(drain, graceful.shutdown()).await;
}

/// What one accepted HTTP connection is served with.
struct Conn<H> {
    builder: auto::Builder<TokioExecutor>,
    handler: H,
    watcher: Watcher,
    port: HttpPort,
}

impl<H, Fut> Conn<H>
where
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Resp> + Send + 'static,
{
    /// Serves until the client leaves, the server drains, or the connection's output stalls
    /// or it waits for a request longer than the read timeout.
    async fn serve<I>(self, io: I)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let activity = Arc::new(Activity::default());
        let requests = activity.clone();
        let handler = self.handler;
        let svc = service_fn(move |req| {
            let in_flight = requests.begin();
            let answer = handler(req);
            async move {
                let r = answer.await;
                drop(in_flight);
                Ok::<_, Infallible>(r)
            }
        });
        let io = TokioIo::new(Watched::new(io, activity.clone()));
        let conn = self
            .watcher
            .watch(self.builder.serve_connection(io, svc).into_owned());
        let limits = self.port.gate.limits();
        tokio::select! {
            _ = conn => {}
            closed = activity.closing(&limits, None) => {
                log::log(Level::Debug, &format!("HTTP connection closed: {closed:?}"));
            }
        }
    }
}

/// The Prometheus scrape endpoint: the text exposition of every statistic at `path`.
pub fn prometheus_response(
    req: &Request<Incoming>,
    path: &str,
    metrics: &crate::metrics::Metrics,
    mappings: &[crate::metrics::prometheus::Mapping],
    millis: bool,
) -> Resp {
    if req.uri().path() != path {
        return text(StatusCode::NOT_FOUND, "404 page not found\n");
    }
    let body = crate::metrics::prometheus::render(&metrics.collect(), mappings, millis);
    let mut r = Response::new(Full::new(Bytes::from(body)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}
