//! Strategy servers: the packages, enabling and disabling a rented server, drive time,
//! and the seeded latency model of the speed test.

use serde_json::{Map, Value, json};
use trading_model::plans::{REGIONS, plan_details, tier};
use trading_model::{ApiError, Valid, typed};

use super::answers::{no_record, text};
use super::subscriptions::{fmt_cents, invoice};
use crate::context::{Caller, RequestContext, db, record_id, refused};
use crate::resources::answer;
use crate::store::Store;

/// Server packages: id, type, name, vCPUs, memory in GB, price per hour in cents.
const SERVER_PACKAGES: [(&str, &str, &str, u32, u32, u64); 4] = [
    ("shared-standard", "shared", "Shared standard", 1, 1, 2),
    ("private-small", "private", "Private small", 2, 4, 8),
    ("private-medium", "private", "Private medium", 4, 8, 15),
    ("private-large", "private", "Private large", 8, 16, 28),
];

/// Rental period charged when a server is enabled.
const RENTAL_SECS: u64 = 30 * 86_400;

pub(crate) fn price_cents(per_hour: u64, secs: u64) -> u64 {
    (per_hour * secs).div_ceil(3600)
}

pub(crate) fn server_types(kind: &str, duration: i64) -> Value {
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

pub(crate) fn enable_server(
    store: &Store,
    c: &Caller,
    kind: &str,
    valid: &Valid,
    now: u64,
) -> Result<Value, ApiError> {
    // Only private servers come in several packages; shared ones are all the standard one.
    let (region_in, package_in) = if kind == "private" {
        let p = typed::SubscriptionsEnablePrivateServer::from_valid(valid)?;
        (p.region, p.server_package)
    } else {
        let p = typed::SubscriptionsEnableSharedServer::from_valid(valid)?;
        (p.region, "shared-standard".to_owned())
    };
    let region_in = region_in.trim();
    let Some(region) = REGIONS.iter().find(|r| r.eq_ignore_ascii_case(region_in)) else {
        return Err(refused(
            "region",
            format!("Unknown region; use one of {}.", REGIONS.join(", ")),
        ));
    };
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

pub(crate) fn disable_server(
    store: &Store,
    user: i64,
    kind: &str,
    valid: &Valid,
    now: u64,
) -> Result<Value, ApiError> {
    // The private and shared endpoints take the same parameters.
    let id = record_id(
        "id",
        &typed::SubscriptionsDisablePrivateServer::from_valid(valid)?.id,
    )?;
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

pub(crate) fn add_drivetime(
    store: &Store,
    c: &Caller,
    valid: &Valid,
    now: u64,
) -> Result<Value, ApiError> {
    let hours = typed::SubscriptionsAddDrivetime::from_valid(valid)?.hours;
    let hours = u64::try_from(hours).unwrap_or(1);
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

pub(crate) fn mix(mut x: u64) -> u64 {
    // splitmix64: a stable, well-spread hash for deterministic simulated values.
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

pub(crate) fn hash_str(s: &str) -> u64 {
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

pub(crate) fn speed_test(
    env: &RequestContext,
    user: i64,
    valid: &Valid,
) -> Result<Value, ApiError> {
    let store = &*env.store;
    let wanted = typed::TestsServerLocationSpeedToExchange::from_valid(valid)?;
    let id = record_id("server_id", &wanted.server_id)?;
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
    for (p, code) in [
        ("exchange1", &wanted.exchange1),
        ("exchange2", &wanted.exchange2),
    ] {
        let code = code.trim().to_ascii_lowercase();
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
