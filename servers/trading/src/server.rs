//! The HTTP side: accepting connections, the order a request passes through (routing,
//! body, authentication, limits, validation, handler) and the `{data, meta}` answers.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use serde_json::Value;
use tokio::net::TcpListener;
use trading_model::auth::Signed;
use trading_model::limits::Subject;
use trading_model::market::Market;
use trading_model::{
    ApiError, AuthMeta, Catalogue, Context, Endpoint, ErrorCode, Meta, Method, PREFIX, Request,
    failure, prepare, route_error, success,
};

use crate::authenticate::authenticate;
use crate::context::RequestContext;
use crate::settings::{SandboxClock, Settings};
use crate::store::Store;
use crate::{dispatch, limiting, paper};

struct App {
    settings: Settings,
    cat: &'static Catalogue,
    openapi: Bytes,
    requests: AtomicU64,
    boot_ms: u64,
    store: Arc<Store>,
    limits: limiting::Limits,
    market: Arc<Market>,
}

/// Serves the API on `listener` until `shutdown` completes, then lets open connections
/// finish for up to `settings.grace`.
pub async fn serve(
    listener: TcpListener,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let store = match &settings.data_dir {
        Some(dir) => Store::open(dir),
        None => Store::in_memory(),
    }
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    let limits = limiting::Limits::new(settings.clock.clone()).map_err(std::io::Error::other)?;
    let cat = Catalogue::builtin();
    let settings_seed = settings.seed;
    let openapi = serde_json::to_vec(&served_openapi(cat)).unwrap_or_default();
    let app = Arc::new(App {
        boot_ms: (settings.clock)(),
        settings,
        cat,
        openapi: Bytes::from(openapi),
        requests: AtomicU64::new(0),
        store: Arc::new(store),
        limits,
        market: Arc::new(Market::new(settings_seed)),
    });
    // Work that runs on its own (strategies, delayed orders) also advances on requests, so
    // an injected clock is enough; this tick covers the wall clock's passing.
    {
        let app = app.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                every.tick().await;
                let (store, market, now) = (
                    app.store.clone(),
                    app.market.clone(),
                    (app.settings.clock)(),
                );
                let _ =
                    tokio::task::spawn_blocking(move || paper::tick(&store, &market, now)).await;
            }
        });
    }
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(app.settings.read_timeout);
    tokio::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                // Transient accept errors (e.g. too many open files) must not end the server.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let app = app.clone();
        let service = hyper::service::service_fn(move |req| {
            let app = app.clone();
            async move { Ok::<_, Infallible>(handle(&app, req, remote).await) }
        });
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            // A client that breaks the protocol or disconnects only ends its own connection.
            let _ = conn.await;
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(app.settings.grace, graceful.shutdown()).await;
    Ok(())
}

/// The model's OpenAPI document plus what only the server knows: which operations have a
/// handler (`x-implemented`; the others answer 501 after authentication and validation).
fn served_openapi(cat: &Catalogue) -> Value {
    let mut doc = trading_model::openapi(cat, None);
    if let Some(paths) = doc["paths"].as_object_mut() {
        for (path, item) in paths.iter_mut() {
            let done = dispatch::implemented(path.strip_prefix(PREFIX).unwrap_or(path));
            if let Some(ops) = item.as_object_mut() {
                for op in ops.values_mut() {
                    op["x-implemented"] = Value::Bool(done);
                    if !done {
                        op["responses"]["501"] = serde_json::json!({
                            "description": "Not implemented by this sandbox yet (code 5100).",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}},
                        });
                    }
                }
            }
        }
    }
    doc
}

/// An error answer before routing (no endpoint known yet).
fn fail_early(err: ApiError, path: &str, now: u64, request_id: &str) -> Response<Full<Bytes>> {
    let meta = Meta::new(path, false, now).request_id(request_id);
    json_response(err.status, &failure(&err, meta))
}

fn json_response(status: u16, body: &Value) -> Response<Full<Bytes>> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = Response::new(Full::new(Bytes::from(bytes)));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

async fn handle(
    app: &App,
    req: http::Request<Incoming>,
    remote: SocketAddr,
) -> Response<Full<Bytes>> {
    let n = app.requests.fetch_add(1, Ordering::Relaxed);
    let request_id = format!("{:x}-{n}", app.boot_ms);
    let mut extra = Vec::new();
    let mut resp = respond(app, req, remote, &request_id, &mut extra).await;
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    for (k, v) in extra {
        resp.headers_mut().insert(k, v);
    }
    resp
}

async fn respond(
    app: &App,
    req: http::Request<Incoming>,
    remote: SocketAddr,
    request_id: &str,
    extra: &mut Vec<(http::HeaderName, HeaderValue)>,
) -> Response<Full<Bytes>> {
    let started = Instant::now();
    let now = (app.settings.clock)();
    // An SDK whose domain setting ends in a slash asks for `//api/v2/...`: the extra
    // leading slashes name no other resource, so they are dropped.
    let raw_path = format!("/{}", req.uri().path().trim_start_matches('/'));
    let endpoint_path = raw_path
        .strip_prefix(PREFIX)
        .unwrap_or(&raw_path)
        .to_owned();
    let route = app.cat.route(req.method().as_str(), &endpoint_path);
    let meta = |ep: Option<&Endpoint>| {
        Meta::new(
            ep.map_or(endpoint_path.as_str(), |e| e.path.as_str()),
            ep.is_some_and(|e| e.auth_required),
            now,
        )
        .request_id(request_id)
    };

    if raw_path == "/api/v2/openapi.json" && req.method() == http::Method::GET {
        if let Err(e) = read_body(req.into_body(), &app.settings).await {
            return fail_early(e, &raw_path, now, request_id);
        }
        let mut resp = Response::new(Full::new(app.openapi.clone()));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return resp;
    }

    let fail = |err: ApiError, ep: Option<&Endpoint>| {
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let body = failure(&err, meta(ep).process_micros(micros));
        let mut resp = json_response(err.status, &body);
        if err.status == 405 {
            let allow: Vec<&str> = Method::SERVED.iter().map(|m| m.as_str()).collect();
            if let Ok(v) = HeaderValue::from_str(&allow.join(", ")) {
                resp.headers_mut().insert(header::ALLOW, v);
            }
        }
        resp
    };

    if raw_path == "/sandbox/advance" {
        if let Some(clock) = &app.settings.sandbox {
            return advance(app, clock, req, request_id).await;
        }
    }

    if !raw_path.starts_with(PREFIX) {
        let err = match read_body(req.into_body(), &app.settings).await {
            Ok(_) => ApiError::new(ErrorCode::UnknownEndpoint).with_message(format!(
                "Unknown endpoint {raw_path:?}; the API lives under {PREFIX}."
            )),
            Err(e) => e,
        };
        return fail(err, None);
    }
    let ep = match route {
        Ok(ep) => ep,
        Err(e) => {
            let err = match read_body(req.into_body(), &app.settings).await {
                Ok(_) => route_error(&e, &endpoint_path),
                Err(body_err) => body_err,
            };
            // A known path with an unserved method still reports that endpoint's meta.
            return fail(err, app.cat.get(endpoint_path.trim_end_matches('/')));
        }
    };

    let address = remote.ip().to_string();
    let key = header_text(req.headers(), "key");
    let authorization = header_text(req.headers(), "authorization");
    let method = req.method().as_str().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // Read every body, even one that will be ignored: answering before the client finished
    // sending makes HTTP/1.1 drop the connection, which breaks keep-alive clients.
    let body = match read_body(req.into_body(), &app.settings).await {
        Ok(b) => b,
        Err(e) => return fail(e, Some(ep)),
    };

    let request = Request {
        method: &method,
        path: &ep.path,
        query: &query,
        content_type: content_type.as_deref(),
        body: &body,
    };
    // Credentials sent to a public endpoint are checked too: answers are tailored to the
    // caller's plan (news impact horizons), and a wrong secret must not pass unnoticed.
    let signed_anyway = key.is_some() && authorization.is_some();
    let caller = if ep.auth_required || signed_anyway {
        let signed = Signed {
            method: &method,
            path: &ep.path,
            query: &query,
            body: &body,
        };
        authenticate(
            &app.store,
            app.settings.plan_spacing,
            key.clone(),
            authorization,
            &signed,
            &address,
            now,
        )
        .await
        .map(Some)
    } else {
        Ok(None)
    };
    // Authenticated calls count against their key and plan; everything else against the
    // address, so failing authentication does not escape the limits.
    let weight = trading_model::limits::weight(&ep.path);
    let limit = match (&caller, &key) {
        (Ok(Some(c)), Some(k)) => {
            app.limits
                .check_key(k, c.plan.rate_minute, c.spacing_ms, weight, now)
                .await
        }
        _ => {
            app.limits
                .check(
                    &address,
                    Subject::Address,
                    app.settings.ip_per_minute,
                    weight,
                    now,
                )
                .await
        }
    };
    extra.extend(limit.headers);
    // A call that presents a key is answered about that key: a wrong secret is told so
    // even from an address under a ban (the attempt was counted above all the same).
    // Keyless calls to key-only endpoints are anonymous traffic and get the limit's answer.
    let caller = match caller {
        Err(e) if key.is_some() => return fail(e, Some(ep)),
        other => other,
    };
    // From here on an authenticated caller's answers, refusals included, say who it is.
    let known = caller.as_ref().ok().cloned().flatten();
    let meta = |ep: Option<&Endpoint>| match &known {
        Some(c) => meta(ep).uid(c.user_id).auth(AuthMeta {
            rate_limit_minute: c.plan.rate_minute,
            subscription_id: c.plan.id.clone(),
            subscription_name: c.plan.name.clone(),
        }),
        None => meta(ep),
    };
    let fail = |err: ApiError, ep: Option<&Endpoint>| {
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        json_response(err.status, &failure(&err, meta(ep).process_micros(micros)))
    };
    if let Some(e) = limit.error {
        return fail(e, Some(ep));
    }
    let caller = match caller {
        Ok(c) => c,
        Err(e) => return fail(e, Some(ep)),
    };
    let ctx = Context {
        exchanges: Some(&app.settings.exchanges),
    };
    let valid = match prepare(app.cat, &request, &ctx) {
        Ok((_, valid)) => valid,
        Err(e) => return fail(e, Some(ep)),
    };
    let env = RequestContext {
        cat: app.cat,
        now_ms: now,
        exchanges: app.settings.exchanges.clone(),
        caller: caller.clone(),
        store: app.store.clone(),
        address,
        market: app.market.clone(),
    };
    let outcome = tokio::task::spawn_blocking(move || dispatch::call(ep, &valid, &env))
        .await
        .unwrap_or_else(|_| {
            Err(ApiError::new(ErrorCode::EmptyData).with_message("The handler failed."))
        });
    match outcome {
        Ok(data) => {
            let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            let body = success(data, meta(Some(ep)).process_micros(micros));
            json_response(200, &body)
        }
        Err(e) => fail(e, Some(ep)),
    }
}

/// `POST /sandbox/advance?ms=N`: moves the sandbox clock forward by N milliseconds (at
/// most a year per call) and runs the due background work before answering, so the caller
/// sees its effects at once.
async fn advance(
    app: &App,
    clock: &Arc<SandboxClock>,
    req: http::Request<Incoming>,
    request_id: &str,
) -> Response<Full<Bytes>> {
    const MAX_STEP_MS: u64 = 366 * 86_400_000;
    let now = (app.settings.clock)();
    let ms = req.uri().query().unwrap_or("").split('&').find_map(|kv| {
        kv.strip_prefix("ms=")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v <= MAX_STEP_MS)
    });
    let is_post = req.method() == http::Method::POST;
    if let Err(e) = read_body(req.into_body(), &app.settings).await {
        return fail_early(e, "/sandbox/advance", now, request_id);
    }
    let Some(ms) = ms.filter(|_| is_post) else {
        let err = ApiError::new(ErrorCode::MissingInformation).with_message(format!(
            "Use POST /sandbox/advance?ms=N with 0 <= N <= {MAX_STEP_MS}."
        ));
        return fail_early(err, "/sandbox/advance", now, request_id);
    };
    clock.advance(ms);
    let now = (app.settings.clock)();
    let (store, market) = (app.store.clone(), app.market.clone());
    let _ = tokio::task::spawn_blocking(move || paper::tick(&store, &market, now)).await;
    json_response(
        200,
        &serde_json::json!({"data": {"milliseconds": now, "seconds": now / 1000}}),
    )
}

/// A header's text; bytes beyond visible ASCII make it unreadable (checked and refused
/// as such), never absent, so that a malformed credential cannot pass as no credential.
fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_owned())
        .filter(|v| !v.is_empty())
}

async fn read_body(body: Incoming, settings: &Settings) -> Result<Bytes, ApiError> {
    let limited = Limited::new(body, settings.max_body_bytes);
    match tokio::time::timeout(settings.read_timeout, limited.collect()).await {
        Err(_) => Err(ApiError::new(ErrorCode::MissingInformation)
            .with_status(408)
            .with_message("The request body did not arrive in time.")),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(ApiError::new(ErrorCode::MissingInformation)
                .with_status(413)
                .with_message(format!(
                    "The request body is larger than {} bytes.",
                    settings.max_body_bytes
                )))
        }
        Ok(Err(_)) => Err(ApiError::new(ErrorCode::MissingInformation)
            .with_message("The request body could not be read.")),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}
