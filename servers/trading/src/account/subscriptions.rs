//! Subscriptions: changing package, the recommendation, custom settings requested and
//! confirmed, and their invoices.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use trading_model::plans::{CUSTOM, PACKAGES, package_json, plan_details, tier};
use trading_model::wallets::parse_units;
use trading_model::{ApiError, Valid, typed};

use super::answers::{no_record, text};
use crate::context::{Caller, db, record_id, refused};
use crate::resources::answer;
use crate::store::{Record, Store};

pub(crate) fn invoice(
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

pub(crate) fn fmt_cents(c: u64) -> String {
    format!("{}.{:02}", c / 100, c % 100)
}

pub(crate) fn change_package(
    store: &Store,
    c: &Caller,
    id: &str,
    now: u64,
) -> Result<Value, ApiError> {
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
    // A package change replaces custom settings with the package's own limits.
    store.change_plan(c.user_id, id).map_err(db)?;
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

pub(crate) fn recommendation(store: &Store, c: &Caller) -> Result<Value, ApiError> {
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

pub(crate) fn setting_request(
    store: &Store,
    c: &Caller,
    valid: &Valid,
    now: u64,
) -> Result<Value, ApiError> {
    let p = typed::SubscriptionsChangeSettingRequest::from_valid(valid)?;
    let (setting, value) = (p.setting.to_ascii_lowercase(), p.value);
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

pub(crate) fn setting_confirm(
    store: &Store,
    c: &Caller,
    valid: &Valid,
    now: u64,
) -> Result<Value, ApiError> {
    let id = record_id(
        "id",
        &typed::SubscriptionsChangeSettingConfirm::from_valid(valid)?.id,
    )?;
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
    store.set_custom_settings(c.user_id, &custom).map_err(db)?;
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
