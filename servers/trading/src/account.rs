//! Account endpoints beyond the generic resources: sub-account keys and their permissions,
//! sessions, settings, security overview, referrals, subscriptions (packages, custom
//! settings, invoices, servers, drive time), wallets and the deposit/withdrawal history.
//!
//! Money here is bookkeeping only: invoices are recorded as issued and paid (no payment
//! provider), deposits are credited by the operator (`trading-api deposit`), withdrawals
//! stay in manual review, and deposit addresses are derived deterministically from the
//! account id (they are not real chain addresses). Plans and their limits are in
//! [`plan_details`]; sub-account permissions in [`sub_forbidden`].

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};
use serde_json::{Map, Value, json};
use trading_model::{ApiError, Endpoint, ErrorCode, Page, Valid};

use trading_model::plans::{
    CUSTOM, PACKAGES, REGIONS, package_json, plan_details, subaccount_api_access, tier,
};
use trading_model::wallets::{WALLETS, confirmations, fmt_units, min_deposit, parse_units, wallet};

use crate::context::db;
use crate::context::{Caller, RequestContext, SubCaller};
use crate::context::{id_param, ms, refused};
use crate::resources::answer;
use crate::store::{KeyRecord, Record, Store};

/// Endpoints answered here.
const PATHS: &[&str] = &[
    "user/settings",
    "user/security-settings",
    "user/account-balance",
    "user/list-referrals",
    "user/active-sessions",
    "subaccounts/subaccount-access-history",
    "subaccounts/subaccount-delete",
    "subaccounts/broadcast-edit",
    "subscriptions/cancel",
    "subscriptions/invoices",
    "subscriptions/change-php-sdk",
    "subscriptions/change-package",
    "subscriptions/php-sdk-recommendation",
    "subscriptions/list-packages",
    "subscriptions/change-setting-request",
    "subscriptions/change-setting-confirm",
    "subscriptions/server-types",
    "subscriptions/enable-private-server",
    "subscriptions/enable-shared-server",
    "subscriptions/list-private-servers",
    "subscriptions/list-shared-servers",
    "subscriptions/disable-private-server",
    "subscriptions/disable-shared-server",
    "subscriptions/add-drivetime",
    "subscriptions/list-history",
    "tests/server-location-speed-to-exchange",
    "wallets/fetch-deposit-address",
    "wallets/list-balances",
    "wallets/withdraw",
    "finance/list-depoists",
    "finance/list-withdraws",
];

/// Whether this module answers `path`.
pub(crate) fn handles(path: &str) -> bool {
    PATHS.contains(&path)
}

/// Sub-account history entries kept per account.
const SUB_HISTORY_KEPT: u32 = 1000;

fn forbidden(msg: String) -> ApiError {
    ApiError::new(ErrorCode::UnprocessableAuthorization)
        .with_status(403)
        .with_message(msg)
}

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
    store
        .conn()
        .execute(
            "INSERT INTO key_links (key, last_seen_ms, last_address) VALUES (?1, ?2, ?3)
             ON CONFLICT(key) DO UPDATE SET last_seen_ms = ?2, last_address = ?3",
            params![key, ms(now_ms), address],
        )
        .map_err(|e| db(e.into()))?;
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

fn text(r: &Record, field: &str) -> String {
    r.fields
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn no_record(param: &str) -> ApiError {
    refused(param, "No such record on this account.")
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn page_json(rows: Vec<Value>, page: &Page, total: u64) -> Value {
    json!({"records": rows, "page": page.pagenumber, "showing": rows.len(), "total": total})
}

/// The first page of 100 for list endpoints the catalogue gives no paging parameters.
const WHOLE: Page = Page {
    limit: 100,
    pagenumber: 1,
};

fn list(store: &Store, kind: &str, user: i64, page: &Page) -> Result<Value, ApiError> {
    let (rows, total) = store
        .list_records(kind, user, page.limit, page.offset())
        .map_err(db)?;
    Ok(page_json(rows.iter().map(answer).collect(), page, total))
}

fn paging(ep: &Endpoint, valid: &Valid) -> Page {
    Page::of(ep, valid).unwrap_or(Page {
        limit: 10,
        pagenumber: 1,
    })
}

// ---------------------------------------------------------------------------------------
// Dispatch

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
    Some(answer_for(ep, valid, env, caller))
}

fn answer_for(
    ep: &Endpoint,
    valid: &Valid,
    env: &RequestContext,
    c: &Caller,
) -> Result<Value, ApiError> {
    let (store, user, now) = (&*env.store, c.user_id, env.now_ms);
    match ep.path.as_str() {
        "user/settings" => settings(store, c, valid, now),
        "user/security-settings" => security(store, c),
        "user/account-balance" => account_balance(env, user),
        "user/list-referrals" => referrals(store, user, &paging(ep, valid)),
        "user/active-sessions" => sessions(store, c, valid.text("request").unwrap_or(""), now),
        "subaccounts/subaccount-access-history" => list(store, "subaccount_access", user, &WHOLE),
        "subaccounts/subaccount-delete" => {
            let (spec, action) = crate::resources::find(&ep.path)
                .ok_or_else(|| ApiError::new(ErrorCode::EmptyData))?;
            let out = crate::resources::run(spec, action, ep, valid, store, c, now)?;
            // Deleting a sub-account ends its sessions: its keys stop authenticating.
            let id = valid.text("id").and_then(|s| s.trim().parse::<i64>().ok());
            store
                .conn()
                .execute(
                    "UPDATE key_links SET revoked_ms = COALESCE(revoked_ms, ?1)
                     WHERE subaccount_id = ?2
                       AND key IN (SELECT key FROM api_keys WHERE user_id = ?3)",
                    params![ms(now), id, user],
                )
                .map_err(|e| db(e.into()))?;
            Ok(out)
        }
        "subaccounts/broadcast-edit" => {
            let id = id_param(valid, "id")?;
            let mut changes = Map::new();
            for f in ["title", "body"] {
                changes.insert(f.into(), json!(valid.text(f).unwrap_or_default()));
            }
            let r = store
                .update_record("broadcast", user, id, &changes, now)
                .map_err(db)?
                .ok_or_else(|| no_record("id"))?;
            Ok(answer(&r))
        }
        "subscriptions/cancel" => Err(ApiError::new(ErrorCode::CloseAccountOnWebsite)
            .with_message("Please use the website to cancel your subscription.")),
        "subscriptions/invoices" => list(store, "invoice", user, &WHOLE),
        "subscriptions/list-packages" => Ok(json!({
            "current": {"id": c.plan.id, "name": c.plan.name},
            "packages": PACKAGES.iter().map(|(id, n)| package_json(id, n)).collect::<Vec<_>>(),
        })),
        "subscriptions/change-php-sdk" | "subscriptions/change-package" => {
            change_package(store, c, valid.text("id").unwrap_or("").trim(), now)
        }
        "subscriptions/php-sdk-recommendation" => recommendation(store, c),
        "subscriptions/change-setting-request" => setting_request(store, c, valid, now),
        "subscriptions/change-setting-confirm" => setting_confirm(store, c, valid, now),
        "subscriptions/server-types" => {
            let kind = valid.text("type").unwrap_or("shared").to_ascii_lowercase();
            let duration = valid.integer("duration").unwrap_or(7200);
            Ok(server_types(&kind, duration))
        }
        "subscriptions/enable-private-server" => enable_server(store, c, "private", valid, now),
        "subscriptions/enable-shared-server" => enable_server(store, c, "shared", valid, now),
        "subscriptions/list-private-servers" => {
            list(store, "server_private", user, &paging(ep, valid))
        }
        "subscriptions/list-shared-servers" => {
            list(store, "server_shared", user, &paging(ep, valid))
        }
        "subscriptions/disable-private-server" => {
            disable_server(store, user, "private", valid, now)
        }
        "subscriptions/disable-shared-server" => disable_server(store, user, "shared", valid, now),
        "subscriptions/add-drivetime" => add_drivetime(store, c, valid, now),
        "subscriptions/list-history" => list(store, "topup", user, &WHOLE),
        "tests/server-location-speed-to-exchange" => speed_test(env, user, valid),
        "wallets/fetch-deposit-address" => {
            let wallet = valid.text("wallet").unwrap_or("BTC").to_ascii_uppercase();
            Ok(json!({
                "wallet": wallet,
                "address": deposit_address(user, &wallet),
                "minimum_deposit": fmt_units(min_deposit(&wallet)),
                "confirmations": confirmations(&wallet),
            }))
        }
        "wallets/list-balances" => {
            let rows = balances(store, user)?;
            let (page_rows, info) = paging(ep, valid).apply(&rows);
            Ok(
                json!({"records": page_rows, "page": info.page, "showing": info.showing, "total": info.total}),
            )
        }
        "wallets/withdraw" => withdraw(store, user, valid, now),
        "finance/list-depoists" => list(store, "deposit", user, &paging(ep, valid)),
        "finance/list-withdraws" => list(store, "withdrawal", user, &WHOLE),
        _ => Err(ApiError::new(ErrorCode::EmptyData)),
    }
}

// ---------------------------------------------------------------------------------------
// Settings, security, sessions, referrals

fn settings_of(store: &Store, user: i64) -> Result<Map<String, Value>, ApiError> {
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

fn settings(store: &Store, c: &Caller, valid: &Valid, now: u64) -> Result<Value, ApiError> {
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
fn sessions(store: &Store, c: &Caller, request: &str, now: u64) -> Result<Value, ApiError> {
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

fn security(store: &Store, c: &Caller) -> Result<Value, ApiError> {
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
fn referral_code(user: i64) -> String {
    let mut n = u64::try_from(user).unwrap_or(0) + 46_656;
    let mut out = Vec::new();
    while n > 0 {
        out.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
        n /= 36;
    }
    out.reverse();
    format!("ex-{}", String::from_utf8_lossy(&out))
}

fn referrals(store: &Store, user: i64, page: &Page) -> Result<Value, ApiError> {
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

fn invoice(
    store: &Store,
    user: i64,
    item: &str,
    amount_cents: u64,
    now: u64,
) -> Result<Record, ApiError> {
    let mut f = Map::new();
    f.insert("item".into(), json!(item));
    f.insert("amount".into(), json!(fmt_cents(amount_cents)));
    f.insert("currency".into(), json!("USD"));
    f.insert("status".into(), json!("paid"));
    f.insert("time_ms".into(), json!(now));
    store
        .insert_record("invoice", user, &f, None, now)
        .map_err(db)
}

fn fmt_cents(c: u64) -> String {
    format!("{}.{:02}", c / 100, c % 100)
}

fn change_package(store: &Store, c: &Caller, id: &str, now: u64) -> Result<Value, ApiError> {
    let Some((id, name)) = PACKAGES
        .iter()
        .find(|(p, n)| *p == id || n.eq_ignore_ascii_case(id))
    else {
        return Err(refused(
            "id",
            "No such package; see subscriptions/list-packages.",
        ));
    };
    // Accounts on the test plan keep it: a schema or load test must not lose its limits
    // by calling this endpoint.
    if !PACKAGES.iter().any(|(p, _)| *p == c.plan.id) {
        return Err(refused(
            "id",
            format!(
                "{} is a test plan; its accounts cannot change package.",
                c.plan.name
            ),
        ));
    }
    if *id == c.plan.id && c.plan.custom.is_empty() {
        return Err(refused("id", format!("The account is already on {name}.")));
    }
    {
        let conn = store.conn();
        conn.execute(
            "UPDATE users SET plan_id = ?1 WHERE id = ?2",
            params![id, c.user_id],
        )
        .map_err(|e| db(e.into()))?;
        // A package change replaces custom settings with the package's own limits.
        conn.execute(
            "UPDATE account_extra SET custom = NULL WHERE user_id = ?1",
            [c.user_id],
        )
        .map_err(|e| db(e.into()))?;
    }
    let price = tier(id).price;
    let inv = invoice(
        store,
        c.user_id,
        &format!("Package {name}, first month"),
        u64::from(price) * 100,
        now,
    )?;
    Ok(json!({
        "previous": {"id": c.plan.id, "name": c.plan.name},
        "subscription": {"id": id, "name": name, "status": "active"},
        "invoice_id": inv.id,
    }))
}

fn count(store: &Store, kind: &str, user: i64) -> Result<u64, ApiError> {
    Ok(store.list_records(kind, user, 1, 0).map_err(db)?.1)
}

fn recommendation(store: &Store, c: &Caller) -> Result<Value, ApiError> {
    let usage = json!({
        "strategies": count(store, "strategy_profile", c.user_id)?,
        "templates": count(store, "strategy_template", c.user_id)?,
        "stored_keys": count(store, "exchange_api_key", c.user_id)?,
        "subaccounts": count(store, "subaccount", c.user_id)?,
        "private_servers": count(store, "server_private", c.user_id)?,
    });
    // The cheapest package with room to grow: usage must fit under 80 % of its limits.
    let fits = |id: &str| {
        let t = tier(id);
        let room = |used: &Value, max: i64| used.as_i64().unwrap_or(0) * 5 <= max * 4;
        room(&usage["strategies"], t.strategies)
            && room(&usage["templates"], t.templates)
            && room(&usage["stored_keys"], t.stored_keys)
            && room(&usage["subaccounts"], t.subaccounts)
            && (usage["private_servers"] == 0 || t.private_servers)
    };
    let (id, name) = PACKAGES
        .iter()
        .find(|(id, _)| fits(id))
        .unwrap_or(&PACKAGES[2]);
    Ok(json!({
        "current": {"id": c.plan.id, "name": c.plan.name},
        "recommended": package_json(id, name),
        "usage": usage,
        "reason": "the cheapest package whose limits leave 20% headroom over current usage",
    }))
}

fn setting_request(store: &Store, c: &Caller, valid: &Valid, now: u64) -> Result<Value, ApiError> {
    let setting = valid.text("setting").unwrap_or("").to_ascii_lowercase();
    let value = valid.integer("value").unwrap_or(0);
    let Some((name, pointer, unit)) = CUSTOM.iter().find(|(n, _, _)| *n == setting) else {
        return Err(refused("setting", "Unknown setting."));
    };
    let current = plan_details(&c.plan)
        .pointer(pointer)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let base = crate::store::Plan {
        custom: BTreeMap::new(),
        ..c.plan.clone()
    };
    let included = plan_details(&base)
        .pointer(pointer)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let extra = u64::try_from(value.saturating_sub(included)).unwrap_or(0);
    let mut f = Map::new();
    f.insert("setting".into(), json!(name));
    f.insert("current".into(), json!(current));
    f.insert("value".into(), json!(value));
    f.insert(
        "price_month".into(),
        json!(fmt_cents(extra * u64::from(*unit) * 100)),
    );
    f.insert("status".into(), json!("pending"));
    let r = store
        .insert_record("price_adjustment", c.user_id, &f, None, now)
        .map_err(db)?;
    let mut out = answer(&r);
    out["price_adjustment_id"] = json!(r.id);
    Ok(out)
}

fn setting_confirm(store: &Store, c: &Caller, valid: &Valid, now: u64) -> Result<Value, ApiError> {
    let id = id_param(valid, "id")?;
    let r = store
        .get_record("price_adjustment", c.user_id, id)
        .map_err(db)?
        .ok_or_else(|| no_record("id"))?;
    if r.fields.get("status") != Some(&json!("pending")) {
        return Err(refused(
            "id",
            "This price adjustment was already confirmed.",
        ));
    }
    let setting = text(&r, "setting");
    let value = r.fields.get("value").and_then(Value::as_i64).unwrap_or(0);
    let mut custom = c.plan.custom.clone();
    custom.insert(setting.clone(), value);
    let custom_text = serde_json::to_string(&custom).unwrap_or_default();
    store
        .conn()
        .execute(
            "INSERT INTO account_extra (user_id, custom) VALUES (?1, ?2)
             ON CONFLICT(user_id) DO UPDATE SET custom = ?2",
            params![c.user_id, custom_text],
        )
        .map_err(|e| db(e.into()))?;
    let price = text(&r, "price_month");
    let cents = parse_units(&price, 2).unwrap_or(0);
    let inv = invoice(
        store,
        c.user_id,
        &format!("Custom setting {setting} = {value}, first month"),
        u64::try_from(cents).unwrap_or(0),
        now,
    )?;
    let mut change = Map::new();
    change.insert("status".into(), json!("confirmed"));
    change.insert("invoice_id".into(), json!(inv.id));
    let r = store
        .update_record("price_adjustment", c.user_id, id, &change, now)
        .map_err(db)?
        .ok_or_else(|| no_record("id"))?;
    Ok(json!({
        "subscription": {"id": c.plan.id, "name": c.plan.name, "status": "custom", "custom": custom},
        "price_adjustment": answer(&r),
    }))
}

/// Server packages: id, type, name, vCPUs, memory in GB, price per hour in cents.
const SERVER_PACKAGES: [(&str, &str, &str, u32, u32, u64); 4] = [
    ("shared-standard", "shared", "Shared standard", 1, 1, 2),
    ("private-small", "private", "Private small", 2, 4, 8),
    ("private-medium", "private", "Private medium", 4, 8, 15),
    ("private-large", "private", "Private large", 8, 16, 28),
];

/// Rental period charged when a server is enabled.
const RENTAL_SECS: u64 = 30 * 86_400;

fn price_cents(per_hour: u64, secs: u64) -> u64 {
    (per_hour * secs).div_ceil(3600)
}

fn server_types(kind: &str, duration: i64) -> Value {
    let secs = u64::try_from(duration).unwrap_or(7200).max(7200);
    let packages: Vec<Value> = SERVER_PACKAGES
        .iter()
        .filter(|p| p.1 == kind)
        .map(|(id, _, name, cpu, mem, per_hour)| {
            json!({
                "id": id, "name": name, "cpu": cpu, "memory_gb": mem,
                "price_per_hour": fmt_cents(*per_hour),
                "price": fmt_cents(price_cents(*per_hour, secs)),
                "currency": "USD",
            })
        })
        .collect();
    json!({"type": kind, "duration": secs, "regions": REGIONS, "packages": packages})
}

fn enable_server(
    store: &Store,
    c: &Caller,
    kind: &str,
    valid: &Valid,
    now: u64,
) -> Result<Value, ApiError> {
    let region_in = valid.text("region").unwrap_or("").trim();
    let Some(region) = REGIONS.iter().find(|r| r.eq_ignore_ascii_case(region_in)) else {
        return Err(refused(
            "region",
            format!("Unknown region; use one of {}.", REGIONS.join(", ")),
        ));
    };
    let package_in = valid.text("server_package").unwrap_or("shared-standard");
    let Some(package) = SERVER_PACKAGES
        .iter()
        .find(|p| p.1 == kind && p.0.eq_ignore_ascii_case(package_in.trim()))
    else {
        return Err(refused(
            "server_package",
            "No such server package; see subscriptions/server-types.",
        ));
    };
    let offered = plan_details(&c.plan)["strategies"]["servers"]["locations"][kind]["active"]
        .as_array()
        .is_some_and(|a| a.iter().any(|r| r == *region));
    if kind == "shared" && !offered {
        return Err(refused(
            "region",
            format!(
                "The {} plan offers shared servers in Singapore only.",
                c.plan.name
            ),
        ));
    }
    if kind == "private" && !tier(&c.plan.id).private_servers {
        return Err(refused(
            "server_package",
            "The plan does not include private servers; change the package first.",
        ));
    }
    let cost = price_cents(package.5, RENTAL_SECS);
    let inv = invoice(
        store,
        c.user_id,
        &format!("{} server {} in {region}, 30 days", kind, package.0),
        cost,
        now,
    )?;
    let mut f = Map::new();
    f.insert("type".into(), json!(kind));
    f.insert("region".into(), json!(region));
    f.insert("server_package".into(), json!(package.0));
    f.insert("status".into(), json!("active"));
    f.insert("paid_until".into(), json!((now / 1000) + RENTAL_SECS));
    f.insert("invoice_id".into(), json!(inv.id));
    let r = store
        .insert_record(&format!("server_{kind}"), c.user_id, &f, None, now)
        .map_err(db)?;
    Ok(answer(&r))
}

/// Whether a server may be switched off: not while strategies of the account run (they
/// may run on it).
pub(crate) fn may_disable(running_strategies: u64) -> Result<(), ApiError> {
    if running_strategies > 0 {
        return Err(refused(
            "id",
            format!(
                "{running_strategies} strategies are running; stop them before disabling the server."
            ),
        ));
    }
    Ok(())
}

fn disable_server(
    store: &Store,
    user: i64,
    kind: &str,
    valid: &Valid,
    now: u64,
) -> Result<Value, ApiError> {
    let id = id_param(valid, "id")?;
    let kind = format!("server_{kind}");
    let r = store
        .get_record(&kind, user, id)
        .map_err(db)?
        .ok_or_else(|| no_record("id"))?;
    if r.fields.get("status") != Some(&json!("active")) {
        return Err(refused("id", "The server is already disabled."));
    }
    let running = crate::paper::running_strategies(store, user).map_err(db)?;
    may_disable(running)?;
    let mut change = Map::new();
    change.insert("status".into(), json!("disabled"));
    change.insert("disabled_ms".into(), json!(now));
    let r = store
        .update_record(&kind, user, id, &change, now)
        .map_err(db)?
        .ok_or_else(|| no_record("id"))?;
    Ok(answer(&r))
}

/// Drive time costs 5 cents per strategy hour.
const DRIVETIME_CENTS_PER_HOUR: u64 = 5;

fn add_drivetime(store: &Store, c: &Caller, valid: &Valid, now: u64) -> Result<Value, ApiError> {
    let hours = u64::try_from(valid.integer("hours").unwrap_or(1)).unwrap_or(1);
    let inv = invoice(
        store,
        c.user_id,
        &format!("Drive time, {hours} hours"),
        hours * DRIVETIME_CENTS_PER_HOUR,
        now,
    )?;
    let (rows, _) = store
        .list_records("topup", c.user_id, trading_model::MAX_LIMIT, 0)
        .map_err(db)?;
    let before: u64 = rows
        .iter()
        .filter_map(|r| r.fields.get("hours").and_then(Value::as_u64))
        .sum();
    let mut f = Map::new();
    f.insert("type".into(), json!("drivetime"));
    f.insert("hours".into(), json!(hours));
    f.insert(
        "amount".into(),
        json!(fmt_cents(hours * DRIVETIME_CENTS_PER_HOUR)),
    );
    f.insert("currency".into(), json!("USD"));
    f.insert("invoice_id".into(), json!(inv.id));
    let r = store
        .insert_record("topup", c.user_id, &f, None, now)
        .map_err(db)?;
    let mut out = answer(&r);
    out["total_hours"] = json!(before + hours);
    Ok(out)
}

fn mix(mut x: u64) -> u64 {
    // splitmix64: a stable, well-spread hash for deterministic simulated values.
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn hash_str(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Where each exchange's matching engine is assumed to be.
fn exchange_region(code: &str) -> &'static str {
    match code {
        "binance" | "okex" | "huobipro" | "bitmax" => "Tokyo",
        "bitfinex" | "kraken" => "Frankfurt",
        "bitstamp" => "London",
        _ => "Virginia",
    }
}

/// Typical round trip between two regions, in milliseconds.
fn region_rtt(a: &str, b: &str) -> u64 {
    if a == b {
        return 2;
    }
    let idx = |r: &str| REGIONS.iter().position(|x| *x == r).unwrap_or(4);
    // Singapore, Tokyo, Frankfurt, London, Virginia.
    const RTT: [[u64; 5]; 5] = [
        [2, 70, 160, 170, 220],
        [70, 2, 230, 220, 150],
        [160, 230, 2, 15, 90],
        [170, 220, 15, 2, 75],
        [220, 150, 90, 75, 2],
    ];
    RTT[idx(a)][idx(b)]
}

fn speed_test(env: &RequestContext, user: i64, valid: &Valid) -> Result<Value, ApiError> {
    let store = &*env.store;
    let id = id_param(valid, "server_id")?;
    let server = match store.get_record("server_private", user, id).map_err(db)? {
        Some(r) => r,
        None => store
            .get_record("server_shared", user, id)
            .map_err(db)?
            .ok_or_else(|| no_record("server_id"))?,
    };
    if server.fields.get("status") != Some(&json!("active")) {
        return Err(refused("server_id", "The server is disabled."));
    }
    let region = text(&server, "region");
    let mut results = Vec::new();
    for p in ["exchange1", "exchange2"] {
        let code = valid.text(p).unwrap_or("").trim().to_ascii_lowercase();
        if !env.exchanges.contains(&code) {
            return Err(refused(p, "Unknown exchange; see system/exchanges."));
        }
        // Jitter changes once a minute and is the same for every caller in that minute.
        let jitter = mix(hash_str(&format!("{region}/{code}")) ^ (env.now_ms / 60_000)) % 9;
        let ms = region_rtt(&region, exchange_region(&code)) + jitter;
        results.push(json!({"exchange": code, "location": exchange_region(&code), "ms": ms}));
    }
    let fastest = results
        .iter()
        .min_by_key(|r| r["ms"].as_u64().unwrap_or(u64::MAX))
        .map(|r| r["exchange"].clone());
    let (previous, _) = store.list_records("speed_test", user, 100, 0).map_err(db)?;
    let previous: Vec<Value> = previous
        .iter()
        .filter(|r| r.fields.get("server_id") == Some(&json!(id)))
        .take(10)
        .map(answer)
        .collect();
    let mut f = Map::new();
    f.insert("server_id".into(), json!(id));
    f.insert("region".into(), json!(region));
    f.insert("results".into(), json!(results));
    f.insert("fastest".into(), fastest.unwrap_or(Value::Null));
    let r = store
        .insert_record("speed_test", user, &f, None, env.now_ms)
        .map_err(db)?;
    let mut out = answer(&r);
    out["previous"] = json!(previous);
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Wallets

/// A deterministic deposit address per account and wallet (the sandbox has no chains).
fn deposit_address(user: i64, w: &str) -> String {
    let seed = hash_str(&format!("{user}/{w}"));
    let hex: String = (0..3)
        .map(|i| format!("{:016x}", mix(seed.wrapping_add(i))))
        .collect();
    match w {
        "BTC" => format!("bc1q{}", &hex[..38]),
        _ => format!("0x{}", &hex[..40]),
    }
}

/// Per wallet: deposited, withdrawn (amount plus fee, except rejected requests) and
/// pending (in review).
fn balances(store: &Store, user: i64) -> Result<Vec<Value>, ApiError> {
    let sum = |kind: &str| -> Result<BTreeMap<String, (i128, i128)>, ApiError> {
        let (rows, _) = store
            .list_records(kind, user, trading_model::MAX_LIMIT, 0)
            .map_err(db)?;
        let mut m: BTreeMap<String, (i128, i128)> = BTreeMap::new();
        for r in rows {
            if r.fields.get("status") == Some(&json!("rejected")) {
                continue;
            }
            let amount = parse_units(&text(&r, "amount"), 8).unwrap_or(0)
                + parse_units(&text(&r, "fee"), 8).unwrap_or(0);
            let pending = if r.fields.get("status") == Some(&json!("manual_review")) {
                amount
            } else {
                0
            };
            let e = m.entry(text(&r, "wallet")).or_default();
            e.0 += amount;
            e.1 += pending;
        }
        Ok(m)
    };
    let (dep, wd) = (sum("deposit")?, sum("withdrawal")?);
    Ok(WALLETS
        .iter()
        .map(|(w, decimals, fee, _)| {
            let d = dep.get(*w).map_or(0, |x| x.0);
            let (out, pending) = wd.get(*w).copied().unwrap_or_default();
            json!({
                "wallet": w,
                "decimals": decimals,
                "deposited": fmt_units(d),
                "withdrawn": fmt_units(out - pending),
                "pending_withdrawal": fmt_units(pending),
                "balance": fmt_units(d - out),
                "withdrawal_fee": fmt_units(*fee),
            })
        })
        .collect())
}

fn account_balance(env: &RequestContext, user: i64) -> Result<Value, ApiError> {
    let rows = balances(&env.store, user)?;
    let mut total = 0.0;
    let wallets: Vec<Value> = rows
        .into_iter()
        .map(|mut r| {
            let w = r["wallet"].as_str().unwrap_or("").to_owned();
            let bal: f64 = r["balance"].as_str().unwrap_or("0").parse().unwrap_or(0.0);
            let usd = env.market.asset_usd(&w, env.now_ms).unwrap_or(0.0) * bal;
            total += usd;
            r["usd"] = json!((usd * 100.0).round() / 100.0);
            r
        })
        .collect();
    Ok(
        json!({"wallets": wallets, "total_usd": (total * 100.0).round() / 100.0, "time": env.now_ms / 1000}),
    )
}

fn withdraw(store: &Store, user: i64, valid: &Valid, now: u64) -> Result<Value, ApiError> {
    let w = valid.text("wallet").unwrap_or("BTC").to_ascii_uppercase();
    let Some((w, _, fee, _)) = wallet(&w) else {
        return Err(refused("wallet", "Unknown wallet."));
    };
    let address = valid.text("address").unwrap_or("").trim().to_owned();
    let amount = valid
        .text("amount")
        .and_then(|a| parse_units(a, 8))
        .filter(|a| *a > 0)
        .ok_or_else(|| refused("amount", "Give a positive amount with at most 8 decimals."))?;
    let balance = balances(store, user)?
        .iter()
        .find(|r| r["wallet"] == *w)
        .and_then(|r| parse_units(r["balance"].as_str()?.trim_start_matches('-'), 8))
        .unwrap_or(0);
    if amount + fee > balance {
        return Err(refused(
            "amount",
            format!(
                "Amount plus the fee of {} {w} exceeds the balance of {} {w}.",
                fmt_units(*fee),
                fmt_units(balance)
            ),
        ));
    }
    let mut f = Map::new();
    f.insert("wallet".into(), json!(w));
    f.insert("address".into(), json!(address));
    f.insert("amount".into(), json!(fmt_units(amount)));
    f.insert("fee".into(), json!(fmt_units(*fee)));
    f.insert("status".into(), json!("manual_review"));
    f.insert("review_until_ms".into(), json!(now + 86_400_000));
    let r = store
        .insert_record("withdrawal", user, &f, None, now)
        .map_err(db)?;
    Ok(answer(&r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_cannot_be_disabled_while_strategies_run() {
        assert!(may_disable(0).is_ok());
        let e = may_disable(2).unwrap_err();
        assert_eq!((e.code.code(), e.status), (1440, 422));
    }

    #[test]
    fn sub_account_permissions() {
        for p in [
            "subaccounts/subaccount-create",
            "subaccounts/subaccount-access-history",
            "subaccounts/broadcast-create",
            "subscriptions/change-package",
            "user/close-account",
            "exchange-api-keys/add",
        ] {
            let e = sub_forbidden(p, true).unwrap();
            assert_eq!(e.status, 403, "{p}");
        }
        assert!(sub_forbidden("subscriptions/details", false).is_none());
        assert!(sub_forbidden("subaccounts/broadcast-list", false).is_none());
        assert!(sub_forbidden("exchange-api-keys/test", true).is_none());
        assert!(sub_forbidden("exchange-api-keys/test", false).is_some());
        assert!(sub_forbidden("exchange-api-keys/list", false).is_none());
    }

    #[test]
    fn addresses_and_prices() {
        assert_eq!(deposit_address(7, "BTC"), deposit_address(7, "BTC"));
        assert_ne!(deposit_address(7, "BTC"), deposit_address(8, "BTC"));
        assert_eq!(deposit_address(7, "BTC").len(), 42);
        assert_eq!(referral_code(1), "ex-1001");
        assert_eq!(price_cents(8, 7200), 16);
    }
}
