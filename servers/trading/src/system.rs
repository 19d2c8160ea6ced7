//! The endpoints that need no feature module: the server clock and catalogue
//! (`system/*`; the market module answers the market's), the caller's account details
//! and access history, plan details, and the refused account closure.

use serde_json::{Value, json};
use trading_model::{ApiError, Endpoint, ErrorCode, Valid, Validator, endpoint_records};

use crate::context::{RequestContext, db};
use crate::resources::answer;

/// Endpoints answered here.
const PATHS: [&str; 9] = [
    "user/access-history",
    "user/account-details",
    "system/timestamp",
    "system/endpoints",
    "system/ep",
    "system/ping",
    "system/list-validation-functions",
    "subscriptions/details",
    "user/close-account",
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
    handles(&ep.path).then(|| answer_for(ep, valid, env))
}

fn answer_for(ep: &Endpoint, valid: &Valid, env: &RequestContext) -> Result<Value, ApiError> {
    let now = env.now_ms;
    Ok(match ep.path.as_str() {
        "system/timestamp" => json!({"seconds": now / 1000, "milliseconds": now}),
        "system/endpoints" | "system/ep" => endpoint_records(env.cat),
        "system/ping" => {
            let yours = trading_model::typed::SystemPing::from_valid(valid)?.milliseconds;
            let ours = i64::try_from(now).unwrap_or(i64::MAX);
            json!({
                "our_server_ms": ours,
                "your_sent_ms": yours,
                "difference": ours.saturating_sub(yours),
                "equation": format!("{ours} - {yours}"),
                "note": "difference is the server clock minus the milliseconds you sent",
            })
        }
        "system/list-validation-functions" => json!(Validator::ORIGINAL_NAMES),
        "subscriptions/details" => match &env.caller {
            Some(c) => trading_model::plans::plan_details(&c.plan),
            None => return Err(ApiError::new(ErrorCode::MissingKey)),
        },
        "user/access-history" => {
            let c = env
                .caller
                .as_ref()
                .ok_or_else(|| ApiError::new(ErrorCode::MissingKey))?;
            let page = trading_model::Page::of(ep, valid).unwrap_or(trading_model::Page {
                limit: 10,
                pagenumber: 1,
            });
            let (rows, total) = env
                .store
                .list_records("access", c.user_id, page.limit, page.offset())
                .map_err(db)?;
            json!({
                "records": rows.iter().map(answer).collect::<Vec<_>>(),
                "page": page.pagenumber,
                "showing": rows.len(),
                "total": total,
            })
        }
        "user/account-details" => {
            let c = env
                .caller
                .as_ref()
                .ok_or_else(|| ApiError::new(ErrorCode::MissingKey))?;
            let u = env
                .store
                .user(c.user_id)
                .map_err(db)?
                .ok_or_else(|| ApiError::new(ErrorCode::EmptyData))?;
            json!({
                "id": u.id,
                "name": u.name,
                "subscription": {
                    "id": u.plan.id,
                    "name": u.plan.name,
                    "status": if u.plan.custom.is_empty() { "active" } else { "custom" },
                },
                "subaccount": c.subaccount.as_ref().map(|s| json!({"id": s.id, "username": s.username})),
                "time_created": u.created_ms / 1000,
            })
        }
        "user/close-account" => return Err(ApiError::new(ErrorCode::CloseAccountOnWebsite)),
        _ => return Err(ApiError::new(ErrorCode::EmptyData)),
    })
}
