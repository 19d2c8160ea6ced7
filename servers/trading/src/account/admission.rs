//! Admitting an authenticated key: whose account it speaks for (a sub-account acts
//! inside its primary account), what a sub-account may not call, the plan's spacing, and
//! the session's last use.

use serde_json::{Map, Value, json};
use trading_model::ApiError;
use trading_model::plans::{subaccount_api_access, tier};

use super::answers::{forbidden, text};
use super::user_settings::settings_of;
use crate::context::{Caller, SubCaller, db};
use crate::store::{KeyRecord, Store};

/// Sub-account history entries kept per account.
const SUB_HISTORY_KEPT: u32 = 1000;

/// What a sub-account may not call: managing sub-accounts, broadcasts, the subscription,
/// money, sessions of others and the account itself is for the primary account; exchange
/// API keys are the primary's (a sub-account may only test them, and only when allowed).
pub(crate) fn sub_forbidden(path: &str, allow_api_key_usage: bool) -> Option<ApiError> {
    let primary_only = path.starts_with("subaccounts/subaccount-")
        || matches!(
            path,
            "subaccounts/broadcast-create"
                | "subaccounts/broadcast-delete"
                | "subaccounts/broadcast-edit"
                | "user/close-account"
                | "user/list-referrals"
                | "wallets/withdraw"
                | "exchange-api-keys/add"
                | "exchange-api-keys/edit"
                | "exchange-api-keys/delete"
        )
        || (path.starts_with("subscriptions/") && path != "subscriptions/details");
    if primary_only {
        return Some(forbidden(format!(
            "Sub-accounts cannot use {path}; the primary account manages this."
        )));
    }
    (path == "exchange-api-keys/test" && !allow_api_key_usage).then(|| {
        forbidden("This sub-account is not allowed to use the account's exchange API keys.".into())
    })
}

fn invalid_key() -> ApiError {
    trading_model::auth::AuthError::InvalidKey.to_api_error()
}

/// Turns an authenticated key into the caller: resolves the sub-account it signs for
/// (inactive or deleted sub-accounts' keys are invalid keys, 401/2000), records the
/// session's use and the sub-account's access history, applies the sub-account
/// permissions, and works out the spacing: the account's `ratelimit_ms` setting, at least
/// the plan's `user_settings.ratelimit.ms` when `plan_spacing` is on (`--plan-spacing`).
pub(crate) fn admit(
    store: &Store,
    record: KeyRecord,
    key: String,
    (path, address): (&str, &str),
    plan_spacing: bool,
    now_ms: u64,
) -> Result<Caller, ApiError> {
    let user_id = record.user_id;
    let subaccount = match record.subaccount_id {
        None => None,
        Some(id) => {
            let sub = store
                .get_record("subaccount", user_id, id)
                .map_err(db)?
                .filter(|r| r.fields.get("active") == Some(&Value::Bool(true)))
                .ok_or_else(invalid_key)?;
            let s = SubCaller {
                id,
                username: text(&sub, "username"),
                allow_api_key_usage: sub.fields.get("allow_api_key_usage")
                    == Some(&Value::Bool(true)),
            };
            Some(s)
        }
    };
    store.touch_session(&key, now_ms, address).map_err(db)?;
    // Refused attempts are part of the sub-account's history too: the primary account
    // sees what its sub-accounts tried.
    let refusal = subaccount
        .as_ref()
        .and_then(|s| sub_forbidden(path, s.allow_api_key_usage));
    if let Some(s) = &subaccount {
        let mut entry = Map::new();
        entry.insert("allowed".into(), json!(refusal.is_none()));
        entry.insert("subaccount_id".into(), json!(s.id));
        entry.insert("username".into(), json!(s.username));
        entry.insert("endpoint".into(), json!(path));
        entry.insert("address".into(), json!(address));
        entry.insert("time_ms".into(), json!(now_ms));
        store
            .insert_record("subaccount_access", user_id, &entry, None, now_ms)
            .map_err(db)?;
        store
            .trim_records("subaccount_access", user_id, SUB_HISTORY_KEPT)
            .map_err(db)?;
    }
    if let Some(e) = refusal {
        return Err(e);
    }
    // A primary account that moved to a plan without sub-account API access takes it
    // from the keys its sub-accounts already have.
    if subaccount.is_some() && !subaccount_api_access(&record.plan.id) {
        return Err(forbidden(format!(
            "The {} plan does not include API access for sub-accounts.",
            record.plan.name
        )));
    }
    // A plan without request limits (Unlimited, for load and schema tests) has no spacing
    // either, whatever the settings say.
    let spacing_ms = if record.plan.rate_minute == 0 {
        0
    } else {
        let chosen = settings_of(store, user_id)?
            .get("ratelimit_ms")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let floor = if plan_spacing {
            tier(&record.plan.id).ratelimit_ms
        } else {
            0
        };
        chosen.max(floor)
    };
    Ok(Caller {
        user_id,
        plan: record.plan,
        key,
        subaccount,
        spacing_ms,
    })
}
