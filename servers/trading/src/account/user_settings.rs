//! User settings, security settings, sessions (listing and revoking keys) and referrals.

use rusqlite::{OptionalExtension, params};
use serde_json::{Map, Value, json};
use trading_model::{ApiError, Page, Valid};

use trading_model::plans::{plan_details, tier};

use super::answers::forbidden;
use super::answers::{no_record, obj, page_json};
use crate::context::{Caller, db};
use crate::context::{ms, refused};
use crate::store::Store;

pub(crate) fn settings_of(store: &Store, user: i64) -> Result<Map<String, Value>, ApiError> {
    let text: Option<String> = store
        .conn()
        .query_row(
            "SELECT fields FROM account_settings WHERE user_id = ?1",
            [user],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| db(e.into()))?;
    Ok(text
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .map(obj)
        .unwrap_or_default())
}

pub(crate) fn settings(
    store: &Store,
    c: &Caller,
    valid: &Valid,
    now: u64,
) -> Result<Value, ApiError> {
    let mut s = settings_of(store, c.user_id)?;
    let mut changed = false;
    for f in ["timezone", "language", "notification_email"] {
        if let Some(v) = valid.text(f) {
            s.insert(f.into(), json!(v.trim()));
            changed = true;
        }
    }
    if let Some(v) = valid.integer("ratelimit_ms") {
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
            .conn()
            .execute(
                "INSERT INTO account_settings (user_id, fields, updated_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT(user_id) DO UPDATE SET fields = ?2, updated_ms = ?3",
                params![c.user_id, Value::Object(s.clone()).to_string(), ms(now)],
            )
            .map_err(|e| db(e.into()))?;
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

struct Session {
    id: i64,
    key: String,
    subaccount_id: Option<i64>,
    strict: bool,
    created_ms: i64,
    last_seen_ms: Option<i64>,
    last_address: Option<String>,
    revoked_ms: Option<i64>,
}

fn sessions_of(store: &Store, user: i64) -> Result<Vec<Session>, ApiError> {
    let conn = store.conn();
    let mut stmt = conn
        .prepare(
            "SELECT k.rowid, k.key, l.subaccount_id, k.strict, k.created_ms, l.last_seen_ms,
                    l.last_address, l.revoked_ms
             FROM api_keys k LEFT JOIN key_links l ON l.key = k.key
             WHERE k.user_id = ?1 ORDER BY k.rowid DESC",
        )
        .map_err(|e| db(e.into()))?;
    let rows = stmt
        .query_map([user], |r| {
            Ok(Session {
                id: r.get(0)?,
                key: r.get(1)?,
                subaccount_id: r.get(2)?,
                strict: r.get(3)?,
                created_ms: r.get(4)?,
                last_seen_ms: r.get(5)?,
                last_address: r.get(6)?,
                revoked_ms: r.get(7)?,
            })
        })
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| db(e.into()))?;
    Ok(rows)
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
    let revoke = |ids: Vec<&str>| -> Result<usize, ApiError> {
        let conn = store.conn();
        let mut n = 0;
        for k in ids {
            n += conn
                .execute(
                    "INSERT INTO key_links (key, revoked_ms) VALUES (?1, ?2)
                     ON CONFLICT(key) DO UPDATE SET revoked_ms = COALESCE(revoked_ms, ?2)",
                    params![k, ms(now)],
                )
                .map_err(|e| db(e.into()))?;
        }
        Ok(n)
    };
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
    let conn = store.conn();
    let total: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM account_extra WHERE referred_by = ?1",
            [user],
            |r| r.get(0),
        )
        .map_err(|e| db(e.into()))?;
    let mut stmt = conn
        .prepare(
            "SELECT u.id, u.name, p.name, u.created_ms FROM account_extra a
             JOIN users u ON u.id = a.user_id JOIN plans p ON p.id = u.plan_id
             WHERE a.referred_by = ?1 ORDER BY u.id DESC LIMIT ?2 OFFSET ?3",
        )
        .map_err(|e| db(e.into()))?;
    let rows = stmt
        .query_map(params![user, page.limit, ms(page.offset())], |r| {
            Ok(json!({
                "id": r.get::<_, i64>(0)?,
                "name": r.get::<_, String>(1)?,
                "subscription": r.get::<_, String>(2)?,
                "time_created": r.get::<_, i64>(3)? / 1000,
            }))
        })
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| db(e.into()))?;
    let mut out = page_json(rows, page, u64::try_from(total).unwrap_or(0));
    out["referral_code"] = json!(referral_code(user));
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Subscriptions: packages, custom settings, invoices, servers, drive time
