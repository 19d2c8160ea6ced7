//! Subscription plans: what distinguishes Free, Pro, Enterprise and the test plan
//! Unlimited, the `subscriptions/details` record of a plan with an account's custom
//! settings applied, and the packages on sale. Pure data and shaping; which plan an
//! account is on is the server's to store.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// A subscription plan as an account holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Id as reported in `meta.subscription.id`.
    pub id: String,
    /// Name as reported in `meta.subscription.name`.
    pub name: String,
    /// Requests per minute (`meta.rateLimits.minute`).
    pub rate_minute: u32,
    /// Limits changed for this account by `subscriptions/change-setting-confirm`
    /// (setting name to value); empty for a plan as sold.
    pub custom: BTreeMap<String, i64>,
}

/// Server regions (shared and private servers run in them).
pub const REGIONS: [&str; 5] = ["Singapore", "Tokyo", "Frankfurt", "London", "Virginia"];

/// What distinguishes the plans; everything else in the details is the documented Free
/// plan's value.
pub struct Tier {
    /// Monthly price in USD.
    pub price: u32,
    /// Whether it is a paid ("pro") plan.
    pub pro: bool,
    /// Minimum spacing between signed calls, in ms (`user_settings.ratelimit.ms`).
    pub ratelimit_ms: u64,
    /// Most strategies.
    pub strategies: i64,
    /// Most strategy templates.
    pub templates: i64,
    /// Most exchange keys in use at once.
    pub concurrent_keys: i64,
    /// Longest strategy run, in seconds.
    pub duration: i64,
    /// Strategy orders a second.
    pub orders_per_second: i64,
    /// Most rows in one export.
    pub export_rows: i64,
    /// Whether private servers may be rented.
    pub private_servers: bool,
    /// Most sub-accounts.
    pub subaccounts: i64,
    /// Most stored exchange keys.
    pub stored_keys: i64,
}

/// The limits of the plan with this id.
pub fn tier(plan_id: &str) -> Tier {
    match plan_id {
        "1" => Tier {
            price: 49,
            pro: true,
            ratelimit_ms: 250,
            strategies: 50,
            templates: 20,
            concurrent_keys: 10,
            duration: 7 * 86_400,
            orders_per_second: 5,
            export_rows: 100_000,
            private_servers: true,
            subaccounts: 20,
            stored_keys: 20,
        },
        "2" => Tier {
            price: 249,
            pro: true,
            ratelimit_ms: 100,
            strategies: 500,
            templates: 100,
            concurrent_keys: 50,
            duration: 30 * 86_400,
            orders_per_second: 20,
            export_rows: 1_000_000,
            private_servers: true,
            subaccounts: 100,
            stored_keys: 100,
        },
        // Free as documented; Unlimited (100) is Free without request limits, so tests of
        // plan rules see the documented limits while sending as many calls as they like.
        _ => Tier {
            price: 0,
            pro: false,
            ratelimit_ms: if plan_id == "100" { 0 } else { 1000 },
            strategies: 10,
            templates: 3,
            concurrent_keys: 2,
            duration: 21_600,
            orders_per_second: 1,
            export_rows: 10_000,
            private_servers: false,
            subaccounts: 5,
            stored_keys: 3,
        },
    }
}

/// Whether sub-accounts of an account on `plan_id` may have API keys (the plan's
/// `subaccounts.api_access`; false on the documented Free plan).
pub fn subaccount_api_access(plan_id: &str) -> bool {
    tier(plan_id).pro
}

/// Settings `change-setting-request` can change, where they live in the details, and the
/// monthly price of one unit above the plan's value.
pub const CUSTOM: &[(&str, &str, u32)] = &[
    ("maximum_strategies", "/strategies/maximum/strategies", 2),
    ("maximum_templates", "/strategies/maximum/templates", 1),
    (
        "maximum_stored_keys",
        "/exchange_api_keys/maximum_stored",
        3,
    ),
    ("maximum_subaccounts", "/subaccounts/maximum_accounts", 4),
];

/// `subscriptions/details` for a plan: the documented Free plan, Pro, Enterprise and the
/// test plan Unlimited (Free's limits without request limits), with the account's custom
/// settings applied.
pub fn plan_details(plan: &Plan) -> Value {
    let t = tier(&plan.id);
    let private: Vec<&str> = if t.private_servers {
        REGIONS.to_vec()
    } else {
        Vec::new()
    };
    // The documented Free plan shares Singapore only; the larger plans every region.
    let shared: Vec<&str> = if t.pro {
        REGIONS.to_vec()
    } else {
        vec!["Singapore"]
    };
    let mut v = json!({
        "subscription": {"pro_version": t.pro, "enabled": true, "name": plan.name, "price": t.price},
        "user_settings": {
            "enabled": true, "twofactor": false, "private_hosting": t.private_servers,
            "private_hive": false, "api_access": true, "ratelimit": {"ms": t.ratelimit_ms},
        },
        "strategies": {
            "enabled": true, "commissions": 0.002, "orderbook_refresh": 500,
            "liquidity_check_maximum": 100, "algos_excluded": [],
            "maximum": {
                "strategies": t.strategies, "templates": t.templates,
                "concurrent_exchange_api_key": t.concurrent_keys, "duration": t.duration,
            },
            "ratelimit": {"orders_per_second": t.orders_per_second},
            "spread": {"maximum": 30, "minimum": -30},
            "price_offset": {"maximum": 10, "minimum": -10},
            "qty_parent": {"maximum": 0.01, "minimum": 0},
            "qty_child": {"maximum": 0.01, "minimum": 0},
            "sleep_interval": {"maximum": 30, "minimum": 2},
            "export": {"transactions_rows": t.export_rows, "maximum_storage_time": 86400},
            "servers": {
                "speed_testing": t.pro, "shared_resource": true, "private_resource": t.private_servers,
                "locations": {
                    "private": {"active": private, "inactive": []},
                    "shared": {"active": shared, "inactive": []},
                },
            },
        },
        "subaccounts": {
            "enabled": true, "maximum_accounts": t.subaccounts, "qty_parent": {"maximum": 0},
            "qty_child": {"minimum": 0}, "exchanges": [], "see_all_strategies": false,
            "export": false, "exchange_api_keys": {"share_master": t.pro, "add_own": false},
            "api_access": t.pro, "force_twofactor": false,
        },
        "exchange_api_keys": {"enabled": true, "maximum_stored": t.stored_keys},
    });
    for (name, pointer, _) in CUSTOM {
        if let (Some(value), Some(slot)) = (plan.custom.get(*name), v.pointer_mut(pointer)) {
            *slot = json!(value);
        }
    }
    v
}

/// Plans offered as packages (Unlimited is for local tests and not sold).
pub const PACKAGES: [(&str, &str); 3] = [("0", "Free"), ("1", "Pro"), ("2", "Enterprise")];

/// A package as `subscriptions/list-packages` and the recommendation show it.
pub fn package_json(id: &str, name: &str) -> Value {
    let plan = Plan {
        id: id.into(),
        name: name.into(),
        rate_minute: 0,
        custom: BTreeMap::new(),
    };
    let d = plan_details(&plan);
    json!({
        "id": id,
        "name": name,
        "price_month": d["subscription"]["price"],
        "ratelimit": {"minute": rate_minute_of(id), "ms": d["user_settings"]["ratelimit"]["ms"]},
        "maximum_strategies": d["strategies"]["maximum"]["strategies"],
        "maximum_templates": d["strategies"]["maximum"]["templates"],
        "maximum_stored_keys": d["exchange_api_keys"]["maximum_stored"],
        "maximum_subaccounts": d["subaccounts"]["maximum_accounts"],
        "private_servers": d["strategies"]["servers"]["private_resource"],
    })
}

/// Requests a minute the plan with this id allows (0: no limit).
pub fn rate_minute_of(id: &str) -> u32 {
    match id {
        "1" => 300,
        "2" => 1200,
        "100" => 0,
        _ => 60,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_differ_and_custom_settings_apply() {
        let mut p = Plan {
            id: "0".into(),
            name: "Free".into(),
            rate_minute: 60,
            custom: BTreeMap::new(),
        };
        let free = plan_details(&p);
        assert_eq!(free["user_settings"]["ratelimit"]["ms"], 1000);
        assert_eq!(free["strategies"]["maximum"]["strategies"], 10);
        p.custom.insert("maximum_strategies".into(), 42);
        assert_eq!(plan_details(&p)["strategies"]["maximum"]["strategies"], 42);
        p.id = "1".into();
        assert_eq!(plan_details(&p)["subscription"]["price"], 49);
    }
}
