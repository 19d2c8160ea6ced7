//! Strategy profiles: checking a profile against the algorithm, the market and the
//! plan, and the endpoints that edit, duplicate or delete one.

use serde_json::{Map, Value, json};
use trading_model::market::Market;
use trading_model::strategy::{Event, Refusal, State, transition};
use trading_model::strategy_profile::{
    self, CONDITION_ARRAYS, EXECUTABLE_ARRAYS, KeyLookup, Profile,
};
use trading_model::{ApiError, Checked, typed};

use super::lifecycle::{apply_effects, refusal};
use super::rows::own_profile;
use crate::context::{NO_RECORD, refused};
use crate::paper::call_context::{Cx, db, sql};
use crate::store::{PaperDb, StrategyRow};

/// Checks a (merged) profile (`trading_model::strategy_profile::check`) against the
/// caller's exchange keys and plan.
fn check_profile(
    conn: &PaperDb<'_>,
    market: &Market,
    user: i64,
    p: &Map<String, Value>,
    plan: &Value,
) -> Result<(), ApiError> {
    let excluded: Vec<&str> = plan["strategies"]["algos_excluded"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Key lookups fail only on a store error; that is kept and answered as such.
    let mut store_error = None;
    let key = |id: i64| match conn.key_fields(user, id) {
        Ok(Some(f)) => KeyLookup::For(
            f.get("exchange")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        ),
        Ok(None) => KeyLookup::Unknown,
        Err(e) => {
            store_error.get_or_insert(e);
            KeyLookup::Unknown
        }
    };
    let checked = strategy_profile::check(&Profile::new(p), market, &excluded, key);
    if let Some(e) = store_error {
        return Err(sql(e));
    }
    checked.map_err(|problem| refused(&problem.param, problem.message))
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
    let given = typed::StrategyEditProfile::from_valid(cx.valid)?;
    let (id, mut p, row) = own_profile(cx, "id", &given.id)?;
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
        let conn = cx.store().paper();
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
    let given = typed::StrategyDeleteProfile::from_valid(cx.valid)?;
    let (id, _, row) = own_profile(cx, "id", &given.id)?;
    let (_, effects) = transition(row.state, Event::DeleteProfile).map_err(|r| refusal("id", r))?;
    let removed = {
        let conn = cx.store().paper();
        apply_effects(&conn, id, cx.user(), &effects, cx.now()).map_err(sql)?
    };
    cx.store()
        .delete_record("strategy_profile", cx.user(), id)
        .map_err(db)?;
    Ok(json!({"id": id, "deleted": true, "transactions_deleted": removed}))
}

pub(crate) fn duplicate(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let given = typed::StrategyDuplicateStrategy::from_valid(cx.valid)?;
    let (_, mut p, _) = own_profile(cx, "id", &given.id)?;
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
    let name = format!("{} (copy)", Profile::new(&p).text("name"));
    p.insert("name".into(), json!(name));
    p.remove("overview");
    let rec = cx
        .store()
        .insert_record("strategy_profile", cx.user(), &p, None, cx.now())
        .map_err(db)?;
    Ok(crate::resources::answer(&rec))
}

pub(crate) fn edit_order(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let ids: Vec<i64> = typed::StrategyEditOrder::from_valid(cx.valid)?
        .ids
        .iter()
        .map(|s| {
            s.trim()
                .parse::<i64>()
                .map_err(|_| refused("ids", NO_RECORD))
        })
        .collect::<Result<_, _>>()?;
    let conn = cx.store().paper();
    let mine: Vec<i64> = conn
        .profiles_of(cx.user())
        .map_err(sql)?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    if let Some(bad) = ids.iter().find(|i| !mine.contains(i)) {
        return Err(refused("ids", format!("Strategy {bad}: {NO_RECORD}")));
    }
    // Named strategies first in the given order, then the others in their old order.
    let mut rest: Vec<StrategyRow> = mine
        .iter()
        .filter(|i| !ids.contains(i))
        .map(|i| conn.row_of(cx.user(), *i))
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    rest.sort_by_key(|r| (r.position, r.id));
    let order: Vec<i64> = ids
        .iter()
        .copied()
        .chain(rest.iter().map(|r| r.id))
        .collect();
    for (pos, id) in order.iter().enumerate() {
        let mut r = conn.row_of(cx.user(), *id).map_err(sql)?;
        r.position = pos as i64 + 1;
        conn.save_row(&r).map_err(sql)?;
    }
    Ok(json!({"order": order.iter().map(|i| i.to_string()).collect::<Vec<_>>()}))
}

pub(crate) fn edit_component(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let given = typed::StrategyEditComponent::from_valid(cx.valid)?;
    let (id, mut p, row) = own_profile(cx, "id", &given.id)?;
    if row.state == State::Running {
        return Err(refusal("id", Refusal::Running));
    }
    let component = given.component;
    if !EXECUTABLE_ARRAYS.contains(&component.as_str())
        && !CONDITION_ARRAYS.contains(&component.as_str())
    {
        return Err(refused(
            "component",
            "Name an executable_* or condition_* array of edit-profile.",
        ));
    }
    let index = usize::try_from(given.row).unwrap_or(usize::MAX);
    let value = given.value;
    let mut list = Profile::new(&p).list(&component);
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
        let conn = cx.store().paper();
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
