//! The pure model of the trading API v2 sandbox, an executium-compatible REST API.
//!
//! The heart is one data file, `data/endpoints.json`: the 179 documented endpoints plus the
//! `system/ep` alias the official SDKs call, each with its methods, host, `auth_required`
//! flag and parameter rules. Routing ([`Catalogue::route`]), parameter parsing
//! ([`Params`]), validation ([`validate`]), paging ([`Page`]), the `system/endpoints`
//! records ([`endpoint_records`]) and the OpenAPI document ([`openapi`]) are all derived
//! from it, so they agree by construction. The envelope builders ([`success`],
//! [`failure`], [`Meta`]) produce the `{data, meta}` answers with `meta.status` equal to
//! the HTTP status. [`auth`] checks the SDKs' HS256 tokens and the strict mode;
//! [`replay`] decides which nonces a key still accepts. [`typed`] gives each endpoint's
//! validated parameters as a struct generated from the same file. The domain logic the
//! handlers call is here too, as pure functions: the simulated [`market`], order matching
//! ([`orders`]) and order checks ([`order_request`]), account statistics and finance lists
//! ([`paper_reports`]), strategies ([`strategy`], [`strategy_profile`]), transaction
//! records ([`tx_record`]) and export files ([`export_files`]).
//!
//! What it deliberately does not do: no sockets, no HTTP types, no clock reads, no storage
//! (so no key store and no nonce memory) and no rate limiting. Time, secrets and what a key
//! remembers of its nonces are passed in; the server crate owns everything with side effects.
//!
//! ```
//! use trading_model::{Catalogue, Context, Request, prepare};
//! let cat = Catalogue::builtin();
//! let req = Request {
//!     method: "POST",
//!     path: "exchange-api-keys/edit",
//!     query: "id=9",
//!     content_type: Some("application/x-www-form-urlencoded"),
//!     body: b"id=1&label=ab",
//! };
//! let err = prepare(cat, &req, &Context::default()).unwrap_err();
//! assert_eq!(err.status, 422);
//! let lists = err.validation.unwrap();
//! assert_eq!(lists.incorrect_value_lengths, ["label minimum length 3"]);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod auth;
mod catalogue;
mod describe;
mod envelope;
mod errors;
pub mod export_files;
pub mod limits;
pub mod market;
pub mod order_request;
pub mod orders;
mod paging;
pub mod paper_reports;
mod params;
pub mod plans;
pub mod replay;
pub mod signal_payload;
pub mod strategy;
pub mod strategy_profile;
pub mod tx_record;
pub mod typed;
mod validate;
pub mod wallets;

pub use catalogue::{
    Catalogue, CatalogueError, Endpoint, Evidence, Host, Kind, Method, Paging, Param, RouteError,
    Validator,
};
pub use describe::{PREFIX, endpoint_records, openapi};
pub use envelope::{API_VERSION, AuthMeta, Meta, failure, success};
pub use errors::{ApiError, ErrorCode};
pub use paging::{MAX_LIMIT, Page, PageInfo};
pub use params::{BodyError, Params};
pub use validate::{Checked, Context, Valid, ValidationFailure, validate};

/// One request as the server received it, before routing.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// HTTP method name.
    pub method: &'a str,
    /// Path below `/api/v2/` (no leading slash).
    pub path: &'a str,
    /// Raw query string without `?` (may be empty).
    pub query: &'a str,
    /// `Content-Type` header, if any.
    pub content_type: Option<&'a str>,
    /// Request body (ignored for GET, as the spec reads GET parameters from the query only).
    pub body: &'a [u8],
}

/// Turns a route failure into the API error answer (2500 with 404 or 405).
pub fn route_error(err: &RouteError, path: &str) -> ApiError {
    match err {
        RouteError::NotFound => ApiError::new(ErrorCode::UnknownEndpoint)
            .with_message(format!("Unknown endpoint {path:?}.")),
        RouteError::MethodNotAllowed(allowed) => {
            let names: Vec<&str> = allowed.iter().map(|m| m.as_str()).collect();
            ApiError::new(ErrorCode::UnknownEndpoint)
                .with_status(405)
                .with_message(format!(
                    "Method not allowed for {path}; use {}.",
                    names.join(" or ")
                ))
        }
    }
}

/// Reads a request's parameters: the query string, plus for POST the body, with the query
/// string winning for names present in both.
pub fn request_params(req: &Request<'_>) -> Result<Params, ApiError> {
    let query = Params::from_query(req.query);
    if req.method != "POST" {
        return Ok(query);
    }
    let body = Params::from_body(req.content_type, req.body).map_err(|e| {
        let status = match e {
            BodyError::UnsupportedContentType(_) => 415,
            _ => 400,
        };
        ApiError::new(ErrorCode::MissingInformation)
            .with_status(status)
            .with_message(e.to_string())
    })?;
    Ok(Params::merge_query_wins(query, body))
}

/// Routes, parses and validates a request in the order the server needs: unknown path or
/// method, then unreadable body, then parameter problems (all of them at once).
pub fn prepare<'c>(
    cat: &'c Catalogue,
    req: &Request<'_>,
    ctx: &Context<'_>,
) -> Result<(&'c Endpoint, Valid), ApiError> {
    let ep = cat
        .route(req.method, req.path)
        .map_err(|e| route_error(&e, req.path))?;
    let params = request_params(req)?;
    let valid = validate(ep, &params, ctx).map_err(ApiError::validation)?;
    Ok((ep, valid))
}

/// Shared by the `trading_params` fuzz target and the tests that replay its corpus, so the
/// corpus exercises exactly what the fuzzer does.
///
/// Input layout: byte 0 picks the endpoint (modulo the catalogue size); byte 1 picks the
/// method (bit 0: 0 = POST, 1 = GET) and the content type (bits 1-2: JSON, form, none,
/// multipart with boundary `X`);
/// the rest is the raw query string, a `\n`, and the raw body.
#[doc(hidden)]
pub fn fuzz_entry(data: &[u8]) {
    let cat = Catalogue::builtin();
    let ep = &cat.endpoints()[usize::from(data.first().copied().unwrap_or(0)) % cat.len()];
    let flags = data.get(1).copied().unwrap_or(0);
    let rest = data.get(2..).unwrap_or(&[]);
    let (query, body) = match rest.iter().position(|&b| b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let query = String::from_utf8_lossy(query);
    let req = Request {
        method: if flags & 1 == 0 { "POST" } else { "GET" },
        path: &ep.path,
        query: &query,
        content_type: match (flags >> 1) % 4 {
            0 => Some("application/json"),
            1 => Some("application/x-www-form-urlencoded"),
            2 => None,
            _ => Some("multipart/form-data; boundary=X"),
        },
        body,
    };
    match prepare(cat, &req, &Context::default()) {
        Ok((ep, valid)) => {
            for p in ep.parameters.iter().filter(|p| p.required) {
                assert!(valid.get(&p.name).is_some(), "required {} absent", p.name);
            }
            if let Some(page) = Page::of(ep, &valid) {
                assert!(page.limit >= 1 && page.limit <= MAX_LIMIT && page.pagenumber >= 1);
            }
        }
        Err(e) => {
            let body = failure(&e, Meta::new(&ep.path, ep.auth_required, 0));
            assert_eq!(body["meta"]["status"], e.status);
            if let Some(v) = &e.validation {
                assert!(!v.is_empty());
            }
        }
    }
}

/// Shared by the `trading_token` fuzz target and its corpus replay test: parses an
/// `Authorization` value, then runs signature, nonce and strict checks on whatever parsed.
#[doc(hidden)]
pub fn fuzz_token(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(token) = auth::Token::parse(&text) {
        let _ = token.verify(b"fuzz-secret");
        if let Ok(n) = token.nonce().and_then(replay::Nonce::new) {
            let memory = replay::Memory {
                newest_ns: Some(n.at_ns() / 2),
                floor_ns: n.at_ns() / 4,
            };
            let _ = replay::judge(&n, &memory, false, 1_592_207_324_028);
        }
        let signed = auth::Signed {
            method: "POST",
            path: "system/ping",
            query: "",
            body: data,
        };
        let _ = token.check_strict(&signed, 1_592_207_324_028);
    }
}
