//! User settings, security settings, sessions (listing and revoking keys) and referrals.

use serde_json::{Map, Value, json};
use trading_model::plans::{plan_details, tier};
use trading_model::{ApiError, Page, Valid, typed};

use super::answers::{forbidden, no_record, page_json};
use crate::context::{Caller, db, refused};
use crate::store::{Session, Store};

pub(crate) fn settings_of(store: &Store, user: i64) -> Result<Map<String, Value>, ApiError> {
    store.account_settings(user).map_err(db)
}

pub(crate) fn settings(
    store: &Store,
    c: &Caller,
    valid: &Valid,
    now: u64,
) -> Result<Value, ApiError> {
    let mut s = settings_of(store, c.user_id)?;
    let mut changed = false;
    let p = typed::UserSettings::from_valid(valid)?;
    let texts = [
        ("timezone", &p.timezone),
        ("language", &p.language),
        ("notification_email", &p.notification_email),
    ];
    for (f, v) in texts {
        if let Some(v) = v {
            s.insert(f.into(), json!(v.trim()));
            changed = true;
        }
    }
    if let Some(v) = p.ratelimit_ms {
        let floor = tier(&c.plan.id).ratelimit_ms;
        if v != 0 && u64::try_from(v).unwrap_or(0) < floor {
            return Err(refused(
                "ratelimit_ms",
                format!(
                    "The plan allows at most 1 request per {floor}ms; use 0 or at least {floor}."
                ),
            ));
        }
        s.insert("ratelimit_ms".into(), json!(v));
        changed = true;
    }
    if changed {
        if c.subaccount.is_some() {
            return Err(forbidden(
                "Sub-accounts cannot change the account's settings.".into(),
            ));
        }
        store
            .save_account_settings(c.user_id, &s, now)
            .map_err(db)?;
    }
    let get = |k: &str, d: &str| s.get(k).cloned().unwrap_or_else(|| json!(d));
    Ok(json!({
        "timezone": get("timezone", "UTC"),
        "language": get("language", "en"),
        "notification_email": get("notification_email", ""),
        "ratelimit": {
            "minute": c.plan.rate_minute,
            "ms": s.get("ratelimit_ms").cloned().unwrap_or(json!(0)),
            "plan_ms": tier(&c.plan.id).ratelimit_ms,
        },
    }))
}

fn sessions_of(store: &Store, user: i64) -> Result<Vec<Session>, ApiError> {
    store.sessions(user).map_err(db)
}

fn session_json(s: &Session, current: &str) -> Value {
    json!({
        "id": s.id,
        "key": format!("{}...", &s.key[..s.key.len().min(8)]),
        "subaccount_id": s.subaccount_id,
        "strict": s.strict,
        "time_created": s.created_ms / 1000,
        "last_seen_ms": s.last_seen_ms,
        "last_address": s.last_address,
        "status": if s.revoked_ms.is_some() { "revoked" } else { "active" },
        "current": s.key == current,
    })
}

/// `user/active-sessions`: `list`, `revoke-others` or `revoke:<id>`. A session is an API
/// key that has been used; revoking it disables the key for good.
pub(crate) fn sessions(
    store: &Store,
    c: &Caller,
    request: &str,
    now: u64,
) -> Result<Value, ApiError> {
    let request = request.trim().to_ascii_lowercase();
    let all = sessions_of(store, c.user_id)?;
    // A sub-account sees and manages only its own keys.
    let mine: Vec<&Session> = all
        .iter()
        .filter(|s| match &c.subaccount {
            Some(sub) => s.subaccount_id == Some(sub.id),
            None => true,
        })
        .collect();
    let revoke =
        |ids: Vec<&str>| -> Result<usize, ApiError> { store.revoke_keys(&ids, now).map_err(db) };
    let revoked = if request == "list" {
        None
    } else if request == "revoke-others" {
        let others: Vec<&str> = mine
            .iter()
            .filter(|s| s.key != c.key && s.revoked_ms.is_none())
            .map(|s| s.key.as_str())
            .collect();
        Some(revoke(others)?)
    } else if let Some(id) = request.strip_prefix("revoke:") {
        let id = id.trim().parse::<i64>().ok();
        let target = mine
            .iter()
            .find(|s| Some(s.id) == id)
            .ok_or_else(|| no_record("request"))?;
        Some(revoke(vec![target.key.as_str()])?)
    } else {
        return Err(refused(
            "request",
            "Use list, revoke-others or revoke:<session id>.",
        ));
    };
    let after = sessions_of(store, c.user_id)?;
    let rows: Vec<Value> = after
        .iter()
        .filter(|s| match &c.subaccount {
            Some(sub) => s.subaccount_id == Some(sub.id),
            None => true,
        })
        .filter(|s| s.last_seen_ms.is_some() || s.revoked_ms.is_some())
        .map(|s| session_json(s, &c.key))
        .collect();
    Ok(json!({"request": request, "revoked": revoked.unwrap_or(0), "sessions": rows}))
}

pub(crate) fn security(store: &Store, c: &Caller) -> Result<Value, ApiError> {
    let all = sessions_of(store, c.user_id)?;
    let active = all.iter().filter(|s| s.revoked_ms.is_none());
    let details = plan_details(&c.plan);
    Ok(json!({
        "twofactor": {
            "enabled": false,
            "available": details["user_settings"]["twofactor"],
            "forced_for_subaccounts": details["subaccounts"]["force_twofactor"],
        },
        "api_keys": {
            "total": all.len(),
            "active": active.clone().count(),
            "strict_mode": active.clone().filter(|s| s.strict).count(),
            "subaccount_keys": active.filter(|s| s.subaccount_id.is_some()).count(),
            "revoked": all.iter().filter(|s| s.revoked_ms.is_some()).count(),
        },
        "signing": "HS256 over the nonce; strict-mode keys also sign method, path, query and body",
    }))
}

/// The referral code of an account: its id in base 36 behind a fixed prefix, so it is
/// stable and short.
pub(crate) fn referral_code(user: i64) -> String {
    let mut n = u64::try_from(user).unwrap_or(0) + 46_656;
    let mut out = Vec::new();
    while n > 0 {
        out.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    format!("ex-{}", String::from_utf8_lossy(&out))
}

pub(crate) fn referrals(store: &Store, user: i64, page: &Page) -> Result<Value, ApiError> {
    let (referred, total) = store
        .referrals(user, page.limit, page.offset())
        .map_err(db)?;
    let rows: Vec<Value> = referred
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.name,
                "subscription": r.plan,
                "time_created": r.created_ms / 1000,
            })
        })
        .collect();
    let mut out = page_json(rows, page, total);
    out["referral_code"] = json!(referral_code(user));
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Subscriptions: packages, custom settings, invoices, servers, drive time
