//! The HTTP face: the admission and Alertmanager paths, `/healthz`.
//!
//! Every stage of reading a request has a deadline, so a client that stalls (or never
//! speaks) cannot hold a connection open: the first byte within `--http-first-byte-timeout`,
//! the headers within `--http-read-timeout` (hyper's timer, which also ends a kept-alive
//! connection that waits that long for its next request), then the body within
//! `--http-read-timeout` again.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use relay_templates::event::{Arrival, InputError, parse_admission, parse_alertmanager};
use tokio::net::{TcpListener, TcpStream};

use crate::App;
use crate::log::Level;

type Resp = Response<Full<Bytes>>;

/// Largest request body accepted.
pub const MAX_BODY: usize = 4 << 20;

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    r
}

fn text(status: StatusCode, body: String) -> Resp {
    respond(status, "text/plain; charset=utf-8", body)
}

fn json(value: serde_json::Value) -> Resp {
    respond(StatusCode::OK, "application/json", value.to_string())
}

/// The pause after a failed accept, doubled on each failure in a row up to the most.
const ACCEPT_PAUSE_FIRST: Duration = Duration::from_millis(5);
const ACCEPT_PAUSE_MOST: Duration = Duration::from_secs(1);

/// Accepts connections until `shutdown` resolves.
pub async fn serve_http(app: Arc<App>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(app.settings.read_timeout);
    let first_byte_timeout = app.settings.first_byte_timeout;
    let mut pause = ACCEPT_PAUSE_FIRST;
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut shutdown => return,
            r = listener.accept() => match r {
                Ok(s) => {
                    pause = ACCEPT_PAUSE_FIRST;
                    s
                }
                Err(e) => {
                    // Out of file descriptors, most often: retrying at once would spin
                    // and log without end until one is freed.
                    app.log.log(Level::Warn, &format!("accept failed: {e}; retrying in {pause:?}"), &[]);
                    tokio::select! {
                        _ = &mut shutdown => return,
                        _ = tokio::time::sleep(pause) => {}
                    }
                    pause = (pause * 2).min(ACCEPT_PAUSE_MOST);
                    continue;
                }
            },
        };
        let app = Arc::clone(&app);
        let builder = builder.clone();
        tokio::spawn(async move {
            if !first_byte(&stream, first_byte_timeout).await {
                return;
            }
            let svc = service_fn(move |req| {
                let app = Arc::clone(&app);
                async move { Ok::<_, Infallible>(handle(app, req).await) }
            });
            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
        });
    }
}

/// Whether `stream` has a byte to read within `limit` (the byte stays for hyper). A socket
/// that never speaks is cut sooner than a slow request's headers would be.
async fn first_byte(stream: &TcpStream, limit: Duration) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(limit, stream.peek(&mut byte)).await,
        Ok(Ok(1..))
    )
}

enum Route {
    K8s,
    Alertmanager,
}

/// Routes one request.
pub async fn handle(app: Arc<App>, req: Request<Incoming>) -> Resp {
    if req.uri().path() == app.settings.metrics_path && req.method() == Method::GET {
        return respond(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            app.metrics.render(&app.stats),
        );
    }
    let path = req.uri().path().trim_start_matches('/').to_string();
    if path == "healthz" {
        let s = &app.stats;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let outputs: serde_json::Map<String, serde_json::Value> = app
            .metrics
            .outputs
            .iter()
            .map(|(name, c)| {
                (
                    name.to_string(),
                    serde_json::json!({
                        "rendered": load(&c.rendered),
                        "sent": load(&c.sent),
                        "failed": load(&c.failed),
                        "dropped": load(&c.dropped),
                        "retries": load(&c.retries),
                    }),
                )
            })
            .collect();
        return json(serde_json::json!({
            "status": "ok",
            "received": load(&s.received),
            "rendered": load(&s.rendered),
            "failed": load(&s.failed),
            "dropped": load(&s.dropped),
            "outputs": outputs,
        }));
    }
    let route = if app.settings.k8s_paths.contains(&path) {
        Route::K8s
    } else if app.settings.alertmanager_paths.contains(&path) {
        Route::Alertmanager
    } else {
        return text(StatusCode::NOT_FOUND, format!("no handler for /{path}\n"));
    };
    if req.method() != Method::POST {
        return text(StatusCode::METHOD_NOT_ALLOWED, "use POST\n".into());
    }
    let media_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
    if media_type.as_deref() != Some("application/json") {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid Content-Type, expect application/json\n".into(),
        );
    }
    let trace_id = req
        .headers()
        .get(app.settings.trace_header.as_str())
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let read_timeout = app.settings.read_timeout;
    let read = tokio::time::timeout(
        read_timeout,
        Limited::new(req.into_body(), MAX_BODY).collect(),
    );
    let body = match read.await {
        Ok(Ok(b)) => b.to_bytes(),
        Err(_) => {
            // The rest of the body may never come: the connection cannot be reused.
            let mut r = text(
                StatusCode::REQUEST_TIMEOUT,
                format!("body not received within {read_timeout:?}\n"),
            );
            r.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
            return r;
        }
        Ok(Err(e)) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                return text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("body larger than {MAX_BODY} bytes\n"),
                );
            }
            return text(StatusCode::BAD_REQUEST, format!("cannot read body: {e}\n"));
        }
    };
    let arrival = Arrival {
        channel: path.clone(),
        now: (app.clock)(),
        time_format: app.settings.time_format.clone(),
    };
    let bad = |e: InputError| {
        app.log
            .log(Level::Debug, &format!("/{path}: bad request: {e}"), &[]);
        text(StatusCode::BAD_REQUEST, format!("{e}\n"))
    };
    match route {
        Route::K8s => match parse_admission(&body, &arrival) {
            Ok(review) => {
                let answer = review.response();
                match review.event {
                    // Dry runs are not real changes; the API server may send them repeatedly.
                    Some(_) if review.dry_run => {}
                    Some(ev) => app.dispatch(vec![ev], trace_id),
                    None => {}
                }
                json(answer)
            }
            Err(e) => bad(e),
        },
        Route::Alertmanager => match parse_alertmanager(&body, &arrival) {
            Ok(events) => {
                app.dispatch(events, trace_id);
                json(serde_json::json!({"Message": "OK"}))
            }
            Err(e) => bad(e),
        },
    }
}
