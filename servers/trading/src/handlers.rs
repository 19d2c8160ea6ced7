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
const STATELESS: [&str; 13] = [
    "user/access-history",
    "user/account-details",
    "subaccounts/subaccount-access-history",
    "user/settings",
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
        // Sub-accounts have no keys of their own yet, so none has signed in.
        "subaccounts/subaccount-access-history" => json!([]),
        "user/account-details" | "user/settings" => {
            let c = env
                .caller
                .as_ref()
                .ok_or_else(|| ApiError::new(ErrorCode::MissingKey))?;
            let u = env
                .store
                .user(c.user_id)
                .map_err(crate::resources::db)?
                .ok_or_else(|| ApiError::new(ErrorCode::EmptyData))?;
            if ep.path == "user/settings" {
                json!({"ratelimit": {"minute": u.plan.rate_minute}, "timezone": "UTC"})
            } else {
                json!({
                    "id": u.id,
                    "name": u.name,
                    "subscription": {"id": u.plan.id, "name": u.plan.name},
                    "time_created": u.created_ms / 1000,
                })
            }
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

/// `subscriptions/details` for a plan. Every plan currently gets the limits of the
/// documented free plan; only name, id and request rate come from the store.
pub(crate) fn plan_details(plan: &crate::store::Plan) -> Value {
    json!({
        "subscription": {"pro_version": false, "enabled": true, "name": plan.name, "price": 0},
        "user_settings": {
            "enabled": true, "twofactor": false, "private_hosting": false,
            "private_hive": false, "api_access": true, "ratelimit": {"ms": 1000},
        },
        "strategies": {
            "enabled": true, "commissions": 0.002, "orderbook_refresh": 500,
            "liquidity_check_maximum": 100, "algos_excluded": [],
            "maximum": {"strategies": 10, "templates": 3, "concurrent_exchange_api_key": 2, "duration": 21600},
            "ratelimit": {"orders_per_second": 1},
            "spread": {"maximum": 30, "minimum": -30},
            "price_offset": {"maximum": 10, "minimum": -10},
            "qty_parent": {"maximum": 0.01, "minimum": 0},
            "qty_child": {"maximum": 0.01, "minimum": 0},
            "sleep_interval": {"maximum": 30, "minimum": 2},
            "export": {"transactions_rows": 10000, "maximum_storage_time": 86400},
            "servers": {
                "speed_testing": false, "shared_resource": true, "private_resource": false,
                "locations": {
                    "private": {"active": [], "inactive": []},
                    "shared": {"active": ["Singapore"], "inactive": []},
                },
            },
        },
        "subaccounts": {
            "enabled": true, "maximum_accounts": 5, "qty_parent": {"maximum": 0},
            "qty_child": {"minimum": 0}, "exchanges": [], "see_all_strategies": false,
            "export": false, "exchange_api_keys": {"share_master": false, "add_own": false},
            "api_access": false, "force_twofactor": false,
        },
        "exchange_api_keys": {"enabled": true, "maximum_stored": 3},
    })
}
