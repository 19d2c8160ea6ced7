//! The pure model of the trading API v2 sandbox, an executium-compatible REST API.
//!
//! The heart is one data file, `data/endpoints.json`: the 179 documented endpoints plus the
//! `system/ep` alias the official SDKs call, each with its methods, host, `auth_required`
//! flag and parameter rules. Routing ([`Catalogue::route`]), parameter parsing
//! ([`Params`]), validation ([`validate`]), paging ([`Page`]), the `system/endpoints`
//! records ([`endpoint_records`]) and the OpenAPI document ([`openapi`]) are all derived
//! from it, so they agree by construction. The envelope builders ([`success`],
//! [`failure`], [`Meta`]) produce the `{data, meta}` answers with `meta.status` equal to
//! the HTTP status.
//!
//! What it deliberately does not do: no sockets, no HTTP types, no clock reads, no storage,
//! no authentication and no rate limiting. Time is passed in as milliseconds; the server
//! crate owns everything with side effects.
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

mod catalogue;
mod describe;
mod envelope;
mod errors;
mod paging;
mod params;
mod validate;

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
