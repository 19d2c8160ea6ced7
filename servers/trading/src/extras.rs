//! The remaining catalogue areas: signal marketplace, competitions, algorithm creator, support and calendar.

use serde_json::Value;
use trading_model::{ApiError, Endpoint, Valid};

use crate::handlers::Env;

/// Tables this module keeps (run at every start; must be idempotent).
pub(crate) const SCHEMA: &str = "";

/// Whether this module answers `path`.
pub(crate) fn handles(_path: &str) -> bool {
    false
}

/// Answers `ep` if this module handles it.
pub(crate) fn call(_ep: &Endpoint, _valid: &Valid, _env: &Env) -> Option<Result<Value, ApiError>> {
    None
}
