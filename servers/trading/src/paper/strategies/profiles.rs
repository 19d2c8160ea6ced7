//! Strategy profiles: checking a profile against the algorithm, the market and the
//! plan, and the endpoints that edit, duplicate or delete one.

use rusqlite::Connection;
use serde_json::{Map, Value, json};
use trading_model::market::Market;
use trading_model::strategy::{
    Condition, Event, Refusal, State, algorithm, level_index, level_price, transition,
};
use trading_model::{ApiError, Checked};

use super::lifecycle::{apply_effects, refusal};
use super::rows::own_profile;
use super::rows::{Row, arr, f64_at, field_text, profiles_of, row_of, save_row};
use crate::context::{NO_RECORD, refused};
use crate::paper::call_context::{Cx, db, sql};

/// Array parameters of `edit-profile` that describe executables, one entry per row.
const EXECUTABLE_ARRAYS: [&str; 16] = [
    "executable_parents",
    "executable_values",
    "executable_codes",
    "executable_apikeys",
    "executable_apikeysmarket",
    "executable_leverage",
    "executable_priceoffset",
    "executable_priceexact",
    "post_request_delay",
    "post_request_random",
    "executable_priceoffsetside",
    "executable_pricereference",
    "executable_toleranceminimum",
    "executable_tolerancemaximum",
    "executable_maximumtimelive",
    "executable_obqtycumulativecheck",
];

const CONDITION_ARRAYS: [&str; 4] = [
    "condition_codes",
    "condition_values",
    "condition_orderbooklevel_side1",
    "condition_orderbooklevel_side2",
];

/// Checks a (merged) profile: algorithm, executable rows and conditions.
fn check_profile(
    conn: &Connection,
    market: &Market,
    user: i64,
    p: &Map<String, Value>,
    plan: &Value,
) -> Result<(), ApiError> {
    let alg: Option<u32> = field_text(p, "algorithm_id").trim().parse().ok();
    let Some(alg) = alg.and_then(algorithm) else {
        return Err(refused(
            "algorithm_id",
            "Unknown algorithm; see strategy/list-algorithms.",
        ));
    };
    let excluded = plan["strategies"]["algos_excluded"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if excluded.iter().any(|a| a.as_str() == Some(alg.name)) {
        return Err(refused(
            "algorithm_id",
            format!("{} is not part of your plan.", alg.name),
        ));
    }
    match field_text(p, "slice_delay").trim().parse::<i64>() {
        Ok(d) if d >= 1 => {}
        _ => {
            return Err(refused(
                "slice_delay",
                "slice_delay is a whole number of seconds, at least 1.",
            ));
        }
    }
    let codes = arr(p, "executable_codes");
    let n = codes.len();
    for name in EXECUTABLE_ARRAYS {
        let len = arr(p, name).len();
        if len != 0 && len != n {
            return Err(refused(
                name,
                format!("{name} has {len} entries; executable_codes has {n}."),
            ));
        }
    }
    let keys = arr(p, "executable_apikeys");
    let values = arr(p, "executable_values");
    if n > 0 && (keys.len() != n || values.len() != n) {
        return Err(refused(
            "executable_apikeys",
            "Every executable needs a code, an exchange API key and a value (quantity).",
        ));
    }
    for i in 0..n {
        let Some(sym) = market.symbol(codes[i].trim()) else {
            return Err(refused(
                "executable_codes",
                format!("Unknown trading code {}.", codes[i]),
            ));
        };
        let key: i64 = keys[i]
            .trim()
            .parse()
            .map_err(|_| refused("executable_apikeys", NO_RECORD))?;
        match crate::paper::balances::key_fields(conn, user, key).map_err(sql)? {
            None => {
                return Err(refused(
                    "executable_apikeys",
                    format!("Exchange API key {key}: {NO_RECORD}"),
                ));
            }
            Some(f) if f.get("exchange").and_then(Value::as_str) != Some(sym.exchange) => {
                return Err(refused(
                    "executable_apikeys",
                    format!("Exchange API key {key} is not for {}.", sym.exchange),
                ));
            }
            Some(_) => {}
        }
        if f64_at(&values, i).is_none_or(|q| q <= 0.0) {
            return Err(refused(
                "executable_values",
                "Quantities must be positive numbers.",
            ));
        }
        for name in [
            "executable_priceoffset",
            "executable_priceexact",
            "executable_maximumtimelive",
        ] {
            let v = arr(p, name);
            if v.get(i).is_some_and(|s| !s.trim().is_empty()) && f64_at(&v, i).is_none() {
                return Err(refused(name, format!("{name} entries must be numbers.")));
            }
        }
    }
    if level_index(&field_text(p, "executable_priceoffsettype")).is_none() {
        return Err(refused(
            "executable_priceoffsettype",
            "Use ob1 to ob5 (empty means ob1).",
        ));
    }
    let ccodes = arr(p, "condition_codes");
    let cvalues = arr(p, "condition_values");
    if ccodes.len() != cvalues.len() {
        return Err(refused(
            "condition_values",
            "One condition value per condition code.",
        ));
    }
    for (c, v) in ccodes.iter().zip(&cvalues) {
        if market.symbol(c.trim()).is_none() {
            return Err(refused(
                "condition_codes",
                format!("Unknown trading code {c}."),
            ));
        }
        if Condition::parse(v).is_none() {
            return Err(refused(
                "condition_values",
                format!("{v:?} is not a comparison such as >=100."),
            ));
        }
    }
    for name in [
        "condition_orderbooklevel_side1",
        "condition_orderbooklevel_side2",
    ] {
        let v = arr(p, name);
        if v.len() > ccodes.len() {
            return Err(refused(
                name,
                format!("{name} has more entries than condition_codes."),
            ));
        }
        let any_book = market.book("binance-btcusdt", 0);
        if let Some(b) = any_book {
            if let Some(bad) = v.iter().find(|l| level_price(&b, l).is_none()) {
                return Err(refused(
                    name,
                    format!("{bad:?} is not mid, bid1..bid5 or ask1..ask5."),
                ));
            }
        }
    }
    Ok(())
}

fn to_json(v: &Checked) -> Value {
    match v {
        Checked::Text(s) | Checked::Decimal(s) => json!(s),
        Checked::Integer(i) => json!(i),
        Checked::Bool(b) => json!(b),
        Checked::List(l) => json!(l),
    }
}

pub(crate) fn edit_profile(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let (id, mut p, row) = own_profile(cx, "id")?;
    if row.state == State::Running {
        return Err(refusal("id", Refusal::Running));
    }
    let mut changes = Map::new();
    for name in cx.valid.names() {
        if name == "id" {
            continue;
        }
        if let Some(v) = cx.valid.get(name) {
            changes.insert(name.to_owned(), to_json(v));
        }
    }
    for (k, v) in &changes {
        p.insert(k.clone(), v.clone());
    }
    {
        let conn = cx.store().conn();
        check_profile(&conn, &cx.env.market, cx.user(), &p, &cx.plan())?;
    }
    let rec = cx
        .store()
        .update_record("strategy_profile", cx.user(), id, &changes, cx.now())
        .map_err(db)?
        .ok_or_else(|| refused("id", NO_RECORD))?;
    Ok(crate::resources::answer(&rec))
}

pub(crate) fn delete_profile(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let (id, _, row) = own_profile(cx, "id")?;
    let (_, effects) = transition(row.state, Event::DeleteProfile).map_err(|r| refusal("id", r))?;
    let removed = {
        let conn = cx.store().conn();
        apply_effects(&conn, id, cx.user(), &effects, cx.now()).map_err(sql)?
    };
    cx.store()
        .delete_record("strategy_profile", cx.user(), id)
        .map_err(db)?;
    Ok(json!({"id": id, "deleted": true, "transactions_deleted": removed}))
}

pub(crate) fn duplicate(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let (_, mut p, _) = own_profile(cx, "id")?;
    let max = cx.plan()["strategies"]["maximum"]["strategies"]
        .as_u64()
        .unwrap_or(10);
    let (_, total) = cx
        .store()
        .list_records("strategy_profile", cx.user(), 1, 0)
        .map_err(db)?;
    if total >= max {
        return Err(refused(
            "id",
            format!("The plan keeps at most {max} of these; delete one first."),
        ));
    }
    let name = format!("{} (copy)", field_text(&p, "name"));
    p.insert("name".into(), json!(name));
    p.remove("overview");
    let rec = cx
        .store()
        .insert_record("strategy_profile", cx.user(), &p, None, cx.now())
        .map_err(db)?;
    Ok(crate::resources::answer(&rec))
}

pub(crate) fn edit_order(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let ids: Vec<i64> = cx
        .valid
        .list("ids")
        .unwrap_or(&[])
        .iter()
        .map(|s| {
            s.trim()
                .parse::<i64>()
                .map_err(|_| refused("ids", NO_RECORD))
        })
        .collect::<Result<_, _>>()?;
    let conn = cx.store().conn();
    let mine: Vec<i64> = profiles_of(&conn, cx.user())
        .map_err(sql)?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    if let Some(bad) = ids.iter().find(|i| !mine.contains(i)) {
        return Err(refused("ids", format!("Strategy {bad}: {NO_RECORD}")));
    }
    // Named strategies first in the given order, then the others in their old order.
    let mut rest: Vec<Row> = mine
        .iter()
        .filter(|i| !ids.contains(i))
        .map(|i| row_of(&conn, cx.user(), *i))
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    rest.sort_by_key(|r| (r.position, r.id));
    let order: Vec<i64> = ids
        .iter()
        .copied()
        .chain(rest.iter().map(|r| r.id))
        .collect();
    for (pos, id) in order.iter().enumerate() {
        let mut r = row_of(&conn, cx.user(), *id).map_err(sql)?;
        r.position = pos as i64 + 1;
        save_row(&conn, &r).map_err(sql)?;
    }
    Ok(json!({"order": order.iter().map(|i| i.to_string()).collect::<Vec<_>>()}))
}

pub(crate) fn edit_component(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let (id, mut p, row) = own_profile(cx, "id")?;
    if row.state == State::Running {
        return Err(refusal("id", Refusal::Running));
    }
    let component = cx.valid.text("component").unwrap_or("").to_owned();
    if !EXECUTABLE_ARRAYS.contains(&component.as_str())
        && !CONDITION_ARRAYS.contains(&component.as_str())
    {
        return Err(refused(
            "component",
            "Name an executable_* or condition_* array of edit-profile.",
        ));
    }
    let index = usize::try_from(cx.valid.integer("row").unwrap_or(0)).unwrap_or(usize::MAX);
    let value = cx.valid.text("value").unwrap_or("").to_owned();
    let mut list = arr(&p, &component);
    if index < list.len() {
        list[index] = value;
    } else if index == list.len() {
        list.push(value);
    } else {
        return Err(refused(
            "row",
            format!(
                "{component} has {} entries; row is 0 to {}.",
                list.len(),
                list.len()
            ),
        ));
    }
    p.insert(component.clone(), json!(list));
    {
        let conn = cx.store().conn();
        check_profile(&conn, &cx.env.market, cx.user(), &p, &cx.plan())?;
    }
    let mut changes = Map::new();
    changes.insert(component, json!(list));
    let rec = cx
        .store()
        .update_record("strategy_profile", cx.user(), id, &changes, cx.now())
        .map_err(db)?
        .ok_or_else(|| refused("id", NO_RECORD))?;
    Ok(crate::resources::answer(&rec))
}
