//! Endpoint handlers: validated parameters in, `data` out. Account resources live in
//! `resources`; the rest of the implemented endpoints need no stored state.

use serde_json::{Value, json};
use trading_model::{ApiError, Catalogue, Endpoint, ErrorCode, Valid, Validator, endpoint_records};

/// Exchanges the sandbox accepts until exchange data is configurable: code and name.
pub(crate) const DEFAULT_EXCHANGES: [(&str, &str); 8] = [
    ("binance", "Binance"),
    ("bitfinex", "Bitfinex"),
    ("bitmax", "BitMax"),
    ("bitstamp", "Bitstamp"),
    ("coinbasepro", "Coinbase Pro"),
    ("huobipro", "Huobi Pro"),
    ("kraken", "Kraken"),
    ("okex", "OKEx"),
];

/// Access-history entries kept per account (older ones are dropped).
const ACCESS_HISTORY_KEPT: u32 = 1000;

/// Endpoints answered here (the account resources are in `resources`).
const STATELESS: [&str; 11] = [
    "user/access-history",
    "user/account-details",
    "system/timestamp",
    "system/endpoints",
    "system/ep",
    "system/ping",
    "system/list-validation-functions",
    "system/exchanges",
    "system/status",
    "subscriptions/details",
    "user/close-account",
];

/// Whether `path` has a handler (the others answer 501 after validation).
pub(crate) fn implemented(path: &str) -> bool {
    STATELESS.contains(&path)
        || crate::resources::find(path).is_some()
        || MODULES.iter().any(|(handles, _)| handles(path))
}

type Handles = fn(&str) -> bool;
type Call = fn(&Endpoint, &Valid, &Env) -> Option<Result<Value, ApiError>>;

/// Feature modules, asked in order before the generic resources: the first that handles a
/// path answers it (so a module can take over a resource endpoint, such as deleting an
/// exchange key that a running strategy uses).
const MODULES: [(Handles, Call); 4] = [
    (crate::paper::handles, crate::paper::call),
    (crate::market::handles, crate::market::call),
    (crate::account::handles, crate::account::call),
    (crate::extras::handles, crate::extras::call),
];

pub(crate) struct Env {
    pub cat: &'static Catalogue,
    pub now_ms: u64,
    pub exchanges: Vec<String>,
    pub caller: Option<crate::Caller>,
    pub store: std::sync::Arc<crate::store::Store>,
    /// Caller's address, for the access history.
    pub address: String,
    /// The simulated market (pure; prices are a function of time).
    pub market: std::sync::Arc<trading_model::market::Market>,
}

/// Runs the endpoint's handler. Called on a blocking thread: resource handlers use SQLite.
pub(crate) fn call(ep: &Endpoint, valid: &Valid, env: &Env) -> Result<Value, ApiError> {
    let now = env.now_ms;
    crate::paper::tick(&env.store, &env.market, now);
    if let Some(c) = &env.caller {
        // Every authenticated call that got this far is part of the access history.
        let mut entry = serde_json::Map::new();
        entry.insert("endpoint".into(), json!(ep.path));
        entry.insert("address".into(), json!(env.address));
        env.store
            .insert_record("access", c.user_id, &entry, None, now)
            .map_err(crate::resources::db)?;
        env.store
            .trim_records("access", c.user_id, ACCESS_HISTORY_KEPT)
            .map_err(crate::resources::db)?;
    }
    for (handles, answer) in MODULES {
        if handles(&ep.path) {
            if let Some(result) = answer(ep, valid, env) {
                return result;
            }
        }
    }
    if let Some((spec, action)) = crate::resources::find(&ep.path) {
        let caller = env
            .caller
            .as_ref()
            .ok_or_else(|| ApiError::new(ErrorCode::MissingKey))?;
        return crate::resources::run(spec, action, ep, valid, &env.store, caller, now);
    }
    Ok(match ep.path.as_str() {
        "system/timestamp" => json!({"seconds": now / 1000, "milliseconds": now}),
        "system/endpoints" | "system/ep" => endpoint_records(env.cat),
        "system/ping" => {
            let yours = valid.integer("milliseconds").unwrap_or(0);
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
        "system/exchanges" => Value::Array(
            env.exchanges
                .iter()
                .map(|code| {
                    let name = DEFAULT_EXCHANGES
                        .iter()
                        .find(|(c, _)| c == code)
                        .map_or(code.as_str(), |(_, n)| n);
                    json!({"code": code, "name": name})
                })
                .collect(),
        ),
        "system/status" => json!([
            {"name": "api", "status": "running", "last_checked": now, "issues": "None"}
        ]),
        "subscriptions/details" => match &env.caller {
            Some(c) => plan_details(&c.plan),
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
                .map_err(crate::resources::db)?;
            json!({
                "records": rows.iter().map(crate::resources::answer).collect::<Vec<_>>(),
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
                .map_err(crate::resources::db)?
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
        _ => {
            debug_assert!(!implemented(&ep.path), "{} listed but unhandled", ep.path);
            return Err(ApiError::new(ErrorCode::EmptyData)
                .with_status(501)
                .with_message(format!(
                    "{} is not implemented by this sandbox yet; its parameters were valid.",
                    ep.path
                )));
        }
    })
}

/// `subscriptions/details` for a plan (the plans and their limits are in `account`).
pub(crate) fn plan_details(plan: &crate::store::Plan) -> Value {
    crate::account::plan_details(plan)
}
