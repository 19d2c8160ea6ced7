//! What every handler works with, below the dispatcher: the request's context (caller,
//! clock reading, store, market) and the answers for store failures.

use std::sync::Arc;

use trading_model::market::Market;
use trading_model::{ApiError, Catalogue, ErrorCode};

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

/// The answer for a store failure (5000).
pub(crate) fn store_error(e: &StoreError) -> ApiError {
    ApiError::new(ErrorCode::Database).with_message(format!("Internal database error: {e}"))
}

/// [`store_error`] for `map_err`.
pub(crate) fn db(e: StoreError) -> ApiError {
    store_error(&e)
}
