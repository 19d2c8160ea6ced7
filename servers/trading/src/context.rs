//! What every handler works with, below the dispatcher: the request's context (caller,
//! clock reading, store, market) and the answers handlers share (refusals naming a
//! parameter, record ids read from parameters, store failures).

use std::sync::Arc;

use serde_json::{Value, json};
use trading_model::market::Market;
use trading_model::{ApiError, Catalogue, ErrorCode, ValidationFailure};

use crate::store::{Store, StoreError};

/// The authenticated caller. `user_id` is the account whose data is used: for a
/// sub-account's key, its primary account (sub-accounts act inside it).
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub user_id: i64,
    pub plan: trading_model::plans::Plan,
    /// The key that signed the request (its session).
    pub key: String,
    /// Set when a sub-account's key signed the request.
    pub subaccount: Option<SubCaller>,
    /// Minimum spacing between this account's signed calls (0: none); see `account`.
    pub spacing_ms: u64,
}

/// A sub-account signing with its own key.
#[derive(Debug, Clone)]
pub(crate) struct SubCaller {
    /// Record id of the sub-account under its primary account.
    pub id: i64,
    /// Its username.
    pub username: String,
    /// Whether the primary account lets it use the account's exchange API keys.
    pub allow_api_key_usage: bool,
}

/// One request as a handler sees it: the catalogue, the clock reading it runs at, the
/// caller (if authenticated), the store and the simulated market.
pub(crate) struct RequestContext {
    pub cat: &'static Catalogue,
    pub now_ms: u64,
    pub exchanges: Vec<String>,
    pub caller: Option<Caller>,
    pub store: Arc<Store>,
    /// Caller's address, for the access history.
    pub address: String,
    /// The simulated market (pure; prices are a function of time).
    pub market: Arc<Market>,
}

/// The authenticated caller, or 2001 for endpoints that need one.
pub(crate) fn caller_of(env: &RequestContext) -> Result<&Caller, ApiError> {
    env.caller
        .as_ref()
        .ok_or_else(|| ApiError::new(ErrorCode::MissingKey))
}

/// The head every signed feature module's `call` shares: `None` when the module does not
/// answer `path`, 2001 when nobody signed the request, otherwise `answer` for the caller.
pub(crate) fn for_caller(
    handles: bool,
    env: &RequestContext,
    answer: impl FnOnce(&Caller) -> Result<Value, ApiError>,
) -> Option<Result<Value, ApiError>> {
    handles.then(|| caller_of(env).and_then(answer))
}

/// The answer for a store failure (5000).
pub(crate) fn store_error(e: &StoreError) -> ApiError {
    ApiError::new(ErrorCode::Database).with_message(format!("Internal database error: {e}"))
}

/// [`store_error`] for `map_err`.
pub(crate) fn db(e: StoreError) -> ApiError {
    store_error(&e)
}

/// The refusal text for an id that names no record of the caller.
pub(crate) const NO_RECORD: &str = "No such record on this account.";

/// A 1440 refusal naming the parameter at fault.
pub(crate) fn refused(param: &str, error: impl Into<String>) -> ApiError {
    refused_with(param, error, None)
}

/// A 1440 refusal naming the parameter at fault, with one more field in its entry
/// (`supported`, say).
pub(crate) fn refused_with(
    param: &str,
    error: impl Into<String>,
    extra: Option<(&str, Value)>,
) -> ApiError {
    let mut entry = json!({"parameter": param, "error": error.into()});
    if let Some((k, v)) = extra {
        entry[k] = v;
    }
    ApiError::validation(ValidationFailure {
        missing_information: vec![entry],
        ..ValidationFailure::default()
    })
}

/// A parameter that names a record: an `integer` one, or text holding a whole number.
pub(crate) trait IdValue {
    fn as_id(&self) -> Option<i64>;
}

impl IdValue for i64 {
    fn as_id(&self) -> Option<i64> {
        Some(*self)
    }
}

impl IdValue for str {
    fn as_id(&self) -> Option<i64> {
        self.trim().parse().ok()
    }
}

impl IdValue for String {
    fn as_id(&self) -> Option<i64> {
        self.as_str().as_id()
    }
}

/// A record id parameter's value (a positive integer), or the "no such record" refusal
/// naming `param`.
pub(crate) fn record_id(param: &str, given: &(impl IdValue + ?Sized)) -> Result<i64, ApiError> {
    given
        .as_id()
        .filter(|&i| i > 0)
        .ok_or_else(|| refused(param, NO_RECORD))
}

/// [`record_id`] of an optional parameter: `Ok(None)` when absent.
pub(crate) fn opt_record_id(
    param: &str,
    given: Option<&impl IdValue>,
) -> Result<Option<i64>, ApiError> {
    given.map(|g| record_id(param, g)).transpose()
}

/// Rounds for answers: prices and percentages are floats, but 1e-12 noise helps nobody.
pub(crate) fn round(v: f64, decimals: i32) -> f64 {
    let f = 10f64.powi(decimals);
    (v * f).round() / f
}
