//! HTTP shell of the GraphQL demo: `POST`/`GET /graphql` run requests through
//! [`gql_demo::Demo`], and `GET /graphql` from a browser returns the GraphiQL explorer (with
//! the URL's query in its editors), whose assets come from a CDN or from a local directory so
//! it also works offline.
//!
//! This crate owns what is HTTP: routes, content types, status codes, request size and time
//! limits, connection count, graceful shutdown. It deliberately holds no GraphQL logic (the
//! schema, limits on documents and the GET-cannot-mutate rule live in `gql-demo`), no TLS and
//! no authentication: run it on loopback or behind a proxy that adds them. The entry point is
//! [`serve`], which tests run on `127.0.0.1:0`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod explorer;
mod settings;

use std::{borrow::Cow, convert::Infallible, future::Future, sync::Arc, time::Duration};

use bytes::Bytes;
use gql_demo::{Dataset, Demo, OperationPolicy, Request, Status};
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tokio::{net::TcpListener, sync::Semaphore};

pub use explorer::{ASSETS_PREFIX, Explorer};
pub use settings::{Assets, Command, DEFAULT_ASSETS_URL, Settings, USAGE};

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A flag, variable or referenced file is unusable.
    #[error("{0}")]
    Settings(String),
    /// The data file cannot be read or is invalid.
    #[error("creature data {path}: {source}")]
    Data {
        /// The file.
        path: String,
        /// What is wrong with it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The listener failed.
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
}

/// The largest creature data file read: far above any demo data set, far below a
/// machine's memory.
const MAX_DATA_BYTES: u64 = 64 << 20;

/// Reads the data file when it is a regular file within [`MAX_DATA_BYTES`]: a FIFO would
/// stall the start and a device could fill the memory.
fn read_data_file(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".to_owned());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_DATA_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_DATA_BYTES {
        return Err(format!("larger than the {MAX_DATA_BYTES} bytes allowed"));
    }
    String::from_utf8(bytes).map_err(|_| "not valid UTF-8".to_owned())
}

/// Everything a request handler reads: built once, shared by all connections.
#[derive(Debug)]
pub struct App {
    demo: Demo,
    explorer: Explorer,
    max_body_bytes: usize,
    request_timeout: Duration,
    max_connections: usize,
}

impl App {
    /// Loads the data set and the explorer assets named by `settings`.
    pub fn new(settings: &Settings) -> Result<Self, ServerError> {
        let data = match &settings.data {
            None => Dataset::builtin(),
            Some(path) => {
                let shown = path.display().to_string();
                let text = read_data_file(path).map_err(|e| ServerError::Data {
                    path: shown.clone(),
                    source: e.into(),
                })?;
                Dataset::from_json(&text).map_err(|e| ServerError::Data {
                    path: shown,
                    source: Box::new(e),
                })?
            }
        };
        Ok(Self {
            demo: Demo::new(data, settings.demo),
            explorer: Explorer::new(&settings.assets)?,
            max_body_bytes: settings.max_body_bytes,
            request_timeout: settings.request_timeout,
            max_connections: settings.max_connections,
        })
    }

    /// The GraphQL demo behind the endpoint.
    pub fn demo(&self) -> &Demo {
        &self.demo
    }
}

/// Serves `listener` until `shutdown` completes, then stops accepting and gives open
/// connections up to five seconds to finish.
pub async fn serve<F>(
    listener: TcpListener,
    settings: Settings,
    shutdown: F,
) -> Result<(), ServerError>
where
    F: Future<Output = ()>,
{
    serve_app(listener, App::new(&settings)?, shutdown).await
}

/// [`serve`] with an [`App`] built beforehand, so that a binary can report bad settings
/// before it announces its address.
pub async fn serve_app<F>(listener: TcpListener, app: App, shutdown: F) -> Result<(), ServerError>
where
    F: Future<Output = ()>,
{
    let app = Arc::new(app);
    let permits = Arc::new(Semaphore::new(app.max_connections));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(app.request_timeout)
        .max_buf_size(app.max_body_bytes.max(16 * 1024) + 8 * 1024);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(64);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, _peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                // Running out of file descriptors or a reset before accept: keep serving.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        let app = Arc::clone(&app);
        let service = hyper::service::service_fn(move |req| {
            let app = Arc::clone(&app);
            async move { Ok::<_, Infallible>(handle(app, req).await) }
        });
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A client that disconnects mid-request is not a server error.
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
    Ok(())
}

type Response = hyper::Response<Full<Bytes>>;

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response {
    let mut response = hyper::Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn json_error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "errors": [{ "message": message }] });
    respond(status, "application/json", body.to_string())
}

fn method_not_allowed(allow: &'static str) -> Response {
    let mut response = json_error(
        StatusCode::METHOD_NOT_ALLOWED,
        &format!("method not allowed here; use {allow}"),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

async fn handle(app: Arc<App>, req: hyper::Request<Incoming>) -> Response {
    let path = req.uri().path().to_owned();
    match path.as_str() {
        "/graphql" | "/graphql/" => graphql(app, req).await,
        "/" => {
            let mut response = respond(
                StatusCode::FOUND,
                "text/plain; charset=utf-8",
                "the endpoint is /graphql\n",
            );
            response
                .headers_mut()
                .insert(header::LOCATION, HeaderValue::from_static("/graphql"));
            response
        }
        _ => match path.strip_prefix(ASSETS_PREFIX) {
            Some(relative) => asset(&app, req.method(), relative),
            None => json_error(
                StatusCode::NOT_FOUND,
                &format!("no route {path}; the endpoint is /graphql"),
            ),
        },
    }
}

fn asset(app: &App, method: &Method, relative: &str) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return method_not_allowed("GET");
    }
    match app.explorer.asset(relative) {
        Some((bytes, content_type)) => {
            let mut response = respond(StatusCode::OK, content_type, bytes);
            response.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=3600"),
            );
            response
        }
        None => json_error(StatusCode::NOT_FOUND, "no such explorer asset"),
    }
}

fn wants_html(req: &hyper::Request<Incoming>) -> bool {
    req.headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/html"))
}

fn params(query: &str) -> impl Iterator<Item = (Cow<'_, str>, Cow<'_, str>)> {
    form_urlencoded::parse(query.as_bytes())
}

fn media_type(req: &hyper::Request<Incoming>) -> String {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

async fn graphql(app: Arc<App>, req: hyper::Request<Incoming>) -> Response {
    let query_string = req.uri().query().unwrap_or("").to_owned();
    match *req.method() {
        Method::GET | Method::HEAD => {
            let mut response = get(app, &req, &query_string).await;
            // The same URL answers HTML or JSON depending on Accept.
            response
                .headers_mut()
                .insert(header::VARY, HeaderValue::from_static("accept"));
            response
        }
        Method::POST => {
            let media = media_type(&req);
            let body = match read_body(&app, req).await {
                Ok(body) => body,
                Err(response) => return response,
            };
            let request = match media.as_str() {
                "application/json" | "application/graphql-response+json" | "" => {
                    match Request::from_json(&body) {
                        Ok(r) => r,
                        Err(e) => return json_error(StatusCode::BAD_REQUEST, &e.to_string()),
                    }
                }
                "application/graphql" => match std::str::from_utf8(&body) {
                    Ok(text) => Request::from_query(text),
                    Err(_) => {
                        return json_error(StatusCode::BAD_REQUEST, "request body is not UTF-8");
                    }
                },
                "application/x-www-form-urlencoded" => {
                    Request::from_params(form_urlencoded::parse(&body))
                }
                other => {
                    return json_error(
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        &format!(
                            "unsupported content type {other:?}; send application/json, \
                             application/graphql or application/x-www-form-urlencoded"
                        ),
                    );
                }
            };
            run(app, request, OperationPolicy::All).await
        }
        _ => method_not_allowed("GET, POST"),
    }
}

/// A browser (Accept has `text/html`) gets the explorer, with the URL's document in its
/// editors; anyone else, or a URL with express-graphql's `raw` parameter, gets the query run.
async fn get(app: Arc<App>, req: &hyper::Request<Incoming>, query_string: &str) -> Response {
    if query_string.len() > app.max_body_bytes {
        return json_error(
            StatusCode::URI_TOO_LONG,
            &format!(
                "query string is longer than {} bytes; send the query with POST",
                app.max_body_bytes
            ),
        );
    }
    let request = Request::from_params(params(query_string));
    let raw = params(query_string).any(|(k, _)| k == "raw");
    if wants_html(req) && !raw {
        return respond(
            StatusCode::OK,
            "text/html; charset=utf-8",
            app.explorer.page(&request),
        );
    }
    run(app, request, OperationPolicy::QueriesOnly).await
}

async fn read_body(app: &App, req: hyper::Request<Incoming>) -> Result<Bytes, Response> {
    let too_large = || {
        json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("request body is larger than {} bytes", app.max_body_bytes),
        )
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > app.max_body_bytes as u64) {
        return Err(too_large());
    }
    let limited = Limited::new(req.into_body(), app.max_body_bytes);
    match tokio::time::timeout(app.request_timeout, limited.collect()).await {
        Err(_) => Err(json_error(
            StatusCode::REQUEST_TIMEOUT,
            "request body did not arrive in time",
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(_)) => Err(json_error(
            StatusCode::BAD_REQUEST,
            "request body could not be read",
        )),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

/// Executes on the blocking pool: a document at the complexity limit takes tens of
/// milliseconds of CPU, which must not stall the workers that accept connections and run
/// timeouts.
async fn run(app: Arc<App>, request: Request, policy: OperationPolicy) -> Response {
    let task = tokio::task::spawn_blocking(move || app.demo.execute(&request, policy));
    let reply = match task.await {
        Ok(reply) => reply,
        Err(_) => {
            return json_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the request could not be executed",
            );
        }
    };
    let status = StatusCode::from_u16(reply.status.http_code()).unwrap_or(StatusCode::OK);
    let mut response = respond(status, "application/json", reply.body);
    if reply.status == Status::MethodNotAllowed {
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
    }
    response
}
