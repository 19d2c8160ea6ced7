//! Paper trading and strategies: exchange queries and orders filled against the simulated books, strategy profiles and their state machine, the strategy worker, exports, statistics and finance.

use serde_json::Value;
use trading_model::{ApiError, Endpoint, Valid};

use crate::handlers::Env;

/// Tables this module keeps (run at every start; must be idempotent).
pub(crate) const SCHEMA: &str = "";

/// Runs the background work that is due at `now_ms` (strategies, delayed and repeated
/// orders). Called before every request's handler and once a second; must be cheap when
/// there is nothing to do.
pub(crate) fn tick(
    _store: &crate::store::Store,
    _market: &trading_model::market::Market,
    _now_ms: u64,
) {
}

/// Strategies of `user_id` that are running now (account rules refuse some changes while
/// any run, such as disabling the server they run on).
// Used by the account module once servers can be disabled.
#[allow(dead_code)]
pub(crate) fn running_strategies(
    _store: &crate::store::Store,
    _user_id: i64,
) -> Result<u64, crate::store::StoreError> {
    Ok(0)
}

/// Whether this module answers `path`.
pub(crate) fn handles(_path: &str) -> bool {
    false
}

/// Answers `ep` if this module handles it.
pub(crate) fn call(_ep: &Endpoint, _valid: &Valid, _env: &Env) -> Option<Result<Value, ApiError>> {
    None
}
