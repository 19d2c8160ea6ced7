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

use serde_json::{Value, json};
use trading_model::{ApiError, Endpoint, ErrorCode, Valid, ValidationFailure};

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

/// A 1440 refusal naming the parameter at fault.
pub(super) fn refused(param: &str, error: impl Into<String>) -> ApiError {
    ApiError::validation(ValidationFailure {
        missing_information: vec![json!({"parameter": param, "error": error.into()})],
        ..ValidationFailure::default()
    })
}

pub(super) fn db(e: crate::store::StoreError) -> ApiError {
    crate::context::db(e)
}

/// A record id sent as an integer parameter (catalogued by this sandbox) or as text (the
/// documented id parameters are strings).
pub(super) fn id_param(valid: &Valid, name: &str) -> Result<i64, ApiError> {
    valid
        .integer(name)
        .or_else(|| valid.text(name).and_then(|s| s.trim().parse().ok()))
        .filter(|&i| i > 0)
        .ok_or_else(|| refused(name, "No such record on this account."))
}

/// An optional id: `Ok(None)` when absent, refused when present but not an id.
pub(super) fn opt_id(valid: &Valid, name: &str) -> Result<Option<i64>, ApiError> {
    if valid.get(name).is_none() {
        return Ok(None);
    }
    id_param(valid, name).map(Some)
}

/// Rounds for answers: prices and percentages are floats, but 1e-12 noise helps nobody.
pub(super) fn round(v: f64, decimals: i32) -> f64 {
    let f = 10f64.powi(decimals);
    (v * f).round() / f
}

/// Milliseconds as SQLite integers.
pub(super) fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
