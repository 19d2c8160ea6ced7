//! The remaining catalogue areas: the signal marketplace and competitions (`signals`), the
//! algorithm creator (`algorithms`), support tickets, calendar reminders and article
//! earnings (`desk`).
//!
//! Everything answered is stored (SQLite) or computed from the stored data, the injected
//! clock and the simulated market. This module does not trade: signals and algorithms are
//! recorded and evaluated against market prices, never turned into orders, and no e-mail or
//! push notification is ever sent (support settings and reminders are only kept and listed).
//! `support/list-tickets` and `user/create-support-ticket` stay with the generic resources
//! (kind `support_ticket`), whose records `support/add-ticket` and `support/update-ticket`
//! share.

mod algorithms;
mod desk;
mod signals;

use serde_json::Value;
use trading_model::{ApiError, Endpoint, ErrorCode, Valid};

use crate::context::RequestContext;

/// Endpoints answered here.
const PATHS: [&str; 39] = [
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
    "algorithm-creator/algorithm-add",
    "algorithm-creator/algorithm-update",
    "algorithm-creator/algorithm-remove",
    "algorithm-creator/algorithm-statistics",
    "algorithm-creator/condition-add",
    "algorithm-creator/condition-remove",
    "algorithm-creator/condition-update",
    "algorithm-creator/execution-add",
    "algorithm-creator/execution-remove",
    "algorithm-creator/execution-update",
    "algorithm-creator/list-algorithms",
    "algorithm-creator/list-condition-operators",
    "algorithm-creator/list-conditions",
    "algorithm-creator/list-executions",
    "algorithm-creator/list-order-types",
    "algorithm-creator/publish-algorithm",
    "algorithm-creator/unpublish-algorithm",
    "algorithm-creator/validate-algorithm",
    "support/add-ticket",
    "support/update-ticket",
    "support/settings",
    "calendar/add-reminder",
    "calendar/list-schedule",
];

/// Whether this module answers `path`.
pub(crate) fn handles(path: &str) -> bool {
    PATHS.contains(&path) || path == "articles/check-earnings"
}

/// Answers `ep` if this module handles it.
pub(crate) fn call(
    ep: &Endpoint,
    valid: &Valid,
    env: &RequestContext,
) -> Option<Result<Value, ApiError>> {
    if !handles(&ep.path) {
        return None;
    }
    let Some(caller) = env.caller.as_ref() else {
        return Some(Err(ApiError::new(ErrorCode::MissingKey)));
    };
    let user = caller.user_id;
    let (group, name) = ep.path.split_once('/').unwrap_or(("", ""));
    Some(match group {
        "marketplace" | "competitions" => signals::call(&ep.path, ep, valid, env, user),
        "algorithm-creator" => algorithms::call(name, valid, env, user),
        _ => desk::call(&ep.path, valid, env, user),
    })
}
