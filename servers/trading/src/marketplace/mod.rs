//! The signal marketplace (`signals`) and the weekly competitions ranked by signal
//! results (`competitions`).
//!
//! Signals and iterations are stored (SQLite, `store/marketplace.rs`) and evaluated
//! against the simulated market's prices; nothing is ever turned into an order, and no
//! notification is sent.

mod competitions;
mod signals;

use serde_json::Value;
use trading_model::{ApiError, Endpoint, Valid};

use crate::context::{RequestContext, for_caller};

/// Endpoints answered here.
const PATHS: [&str; 16] = [
    "marketplace/signals-add",
    "marketplace/signals-trigger",
    "marketplace/signals-position",
    "marketplace/signals-edit",
    "marketplace/signal-developer",
    "marketplace/signal-reset",
    "marketplace/signal-delete",
    "marketplace/signals-feed",
    "marketplace/signals-iteration-price-movement",
    "marketplace/backtested-subscriptions",
    "marketplace/subscription-manage",
    "marketplace/featured",
    "marketplace/subscription-information",
    "competitions/list",
    "competitions/join",
    "competitions/leave",
];

/// Whether this module answers `path`.
pub(crate) fn handles(path: &str) -> bool {
    PATHS.contains(&path)
}

/// Answers `ep` if this module handles it.
pub(crate) fn call(
    ep: &Endpoint,
    valid: &Valid,
    env: &RequestContext,
) -> Option<Result<Value, ApiError>> {
    for_caller(handles(&ep.path), env, |c| {
        if ep.path.starts_with("competitions/") {
            competitions::call(&ep.path, valid, env, c.user_id)
        } else {
            signals::call(&ep.path, ep, valid, env, c.user_id)
        }
    })
}
