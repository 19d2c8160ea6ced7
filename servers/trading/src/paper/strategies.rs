//! Strategies: one per profile (the strategy id is the profile id), driven by the pure
//! state machine of `trading_model::strategy`, and the worker that runs their slices as
//! paper orders on the injected clock.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value, json};
use trading_model::market::{Market, Side};
use trading_model::strategy::{
    ALGORITHMS, Condition, Effect, Event, Refusal, State, algorithm, level_index, level_price,
    plan, transition,
};
use trading_model::{ApiError, Checked};

use super::exchange::{NewOrder, Order, cancel, key_problem, log_request, orders_where, place};
use super::{Cx, NO_RECORD, db, iso, ms, num, paged, refused, sql, text};
use crate::store::Store;

/// Slices one tick runs per strategy at most (a clock jump of days is caught up over
/// several ticks instead of stalling one request).
const MAX_SLICES_PER_TICK: u64 = 2_000;

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

pub(super) fn call(cx: &Cx<'_>, path: &str) -> Result<Value, ApiError> {
    match path {
        "strategy/edit-profile" => edit_profile(cx),
        "strategy/delete-profile" => delete_profile(cx),
        "strategy/start" => start(cx),
        "strategy/stop" => stop(cx, Event::Stop { force: cx.valid.boolean("force").unwrap_or(false) }),
        "strategy/soft-stop" => stop(cx, Event::SoftStop),
        "strategy/stop-all-strategies" => stop_all(cx),
        "strategy/hard-reset" => hard_reset(cx),
        "strategy/list-strategies" => list_strategies(cx, true),
        "strategy/data/list" => list_strategies(cx, false),
        "strategy/list-strategy-transactions" => list_transactions(cx),
        "strategy/high-level-overview" => overview(cx),
        "strategy/data/debug" => debug(cx),
        "strategy/list-algorithms" => Ok(list_algorithms(cx)),
        "strategy/list-exchanges" => Ok(Value::Array(
            cx.env
                .market
                .exchanges()
                .iter()
                .map(|e| json!({"code": e.code, "name": e.name, "fee": e.fee, "needs_password": e.needs_password}))
                .collect(),
        )),
        "strategy/list-strategy-options" => Ok(options(cx)),
        "strategy/duplicate-strategy" => duplicate(cx),
        "strategy/edit-order" => edit_order(cx),
        "strategy/edit-component" => edit_component(cx),
        "strategy/books" => books(cx),
        _ => Err(refused("path", "unhandled")),
    }
}

/// The strategy row of a profile.
#[derive(Debug, Clone)]
pub(super) struct Row {
    id: i64,
    user_id: i64,
    pub state: State,
    started_ms: u64,
    next_due_ms: u64,
    slice: u64,
    position: i64,
    stopped_ms: u64,
    note: String,
}

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn row_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        user_id: r.get(1)?,
        state: State::parse(&r.get::<_, String>(2)?),
        started_ms: u(r.get(3)?),
        next_due_ms: u(r.get(4)?),
        slice: u(r.get(5)?),
        position: r.get(6)?,
        stopped_ms: u(r.get(7)?),
        note: r.get(8)?,
    })
}

const ROW_COLS: &str =
    "id, user_id, state, started_ms, next_due_ms, slice, position, stopped_ms, note";

fn rows_where(
    conn: &Connection,
    cond: &str,
    args: &[&dyn rusqlite::ToSql],
) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {ROW_COLS} FROM paper_strategies WHERE {cond}"
    ))?;
    let rows = stmt.query_map(args, row_from)?;
    rows.collect()
}

fn save_row(conn: &Connection, r: &Row) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO paper_strategies (id, user_id, state, started_ms, next_due_ms, slice, position, stopped_ms, note)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (id) DO UPDATE SET state = ?3, started_ms = ?4, next_due_ms = ?5, slice = ?6,
             position = ?7, stopped_ms = ?8, note = ?9",
        params![
            r.id,
            r.user_id,
            r.state.as_str(),
            ms(r.started_ms),
            ms(r.next_due_ms),
            ms(r.slice),
            r.position,
            ms(r.stopped_ms),
            r.note
        ],
    )?;
    Ok(())
}

/// The row of profile `id` (a fresh stopped one when it never ran).
pub(super) fn row_of(conn: &Connection, user: i64, id: i64) -> rusqlite::Result<Row> {
    Ok(rows_where(conn, "id = ?1 AND user_id = ?2", &[&id, &user])?
        .into_iter()
        .next()
        .unwrap_or(Row {
            id,
            user_id: user,
            state: State::Stopped,
            started_ms: 0,
            next_due_ms: 0,
            slice: 0,
            position: id,
            stopped_ms: 0,
            note: String::new(),
        }))
}

fn profile(
    conn: &Connection,
    user: i64,
    id: i64,
) -> rusqlite::Result<Option<(Map<String, Value>, u64)>> {
    let row: Option<(String, i64)> = conn
        .query_row(
            "SELECT fields, created_ms FROM records WHERE kind = 'strategy_profile' AND user_id = ?1 AND id = ?2",
            params![user, id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(row.and_then(|(t, c)| match serde_json::from_str(&t) {
        Ok(Value::Object(m)) => Some((m, u(c))),
        _ => None,
    }))
}

pub(super) fn profiles_of(
    conn: &Connection,
    user: i64,
) -> rusqlite::Result<Vec<(i64, Map<String, Value>)>> {
    super::exchange::records_of(conn, "strategy_profile", user)
}

/// A profile array as strings (absent: empty).
pub(super) fn arr(p: &Map<String, Value>, name: &str) -> Vec<String> {
    match p.get(name) {
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

fn field_text(p: &Map<String, Value>, name: &str) -> String {
    match p.get(name) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

fn f64_at(v: &[String], i: usize) -> Option<f64> {
    v.get(i)
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|x| x.is_finite())
}

/// Keys the profile's executables trade through.
fn keys_of_profile(p: &Map<String, Value>) -> Vec<i64> {
    let mut keys: Vec<i64> = arr(p, "executable_apikeys")
        .iter()
        .filter_map(|k| k.trim().parse().ok())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Running strategies of `user` whose executables use exchange key `key`.
pub(super) fn running_using_key(store: &Store, user: i64, key: i64) -> rusqlite::Result<Vec<i64>> {
    let conn = store.conn();
    let running = rows_where(&conn, "user_id = ?1 AND state = 'running'", &[&user])?;
    let mut out = Vec::new();
    for r in running {
        if let Some((p, _)) = profile(&conn, user, r.id)? {
            if keys_of_profile(&p).contains(&key) {
                out.push(r.id);
            }
        }
    }
    Ok(out)
}

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
        match super::exchange::key_fields(conn, user, key).map_err(sql)? {
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

fn own_profile(cx: &Cx<'_>, param: &str) -> Result<(i64, Map<String, Value>, Row), ApiError> {
    let id = cx.id(param)?;
    let conn = cx.store().conn();
    let Some((p, _)) = profile(&conn, cx.user(), id).map_err(sql)? else {
        return Err(refused(param, NO_RECORD));
    };
    let row = row_of(&conn, cx.user(), id).map_err(sql)?;
    Ok((id, p, row))
}

fn refusal(param: &str, r: Refusal) -> ApiError {
    refused(param, r.message())
}

fn edit_profile(cx: &Cx<'_>) -> Result<Value, ApiError> {
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

fn delete_profile(cx: &Cx<'_>) -> Result<Value, ApiError> {
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

/// Applies the state machine's effects; returns the number of transactions deleted.
fn apply_effects(
    conn: &Connection,
    id: i64,
    user: i64,
    effects: &[Effect],
    now: u64,
) -> rusqlite::Result<usize> {
    let mut removed = 0;
    for e in effects {
        match e {
            Effect::CancelOpenOrders => {
                for mut o in live_orders(conn, id)? {
                    cancel(conn, &mut o, now)?;
                }
            }
            Effect::FlagOpenOrders => {
                conn.execute(
                    "UPDATE paper_orders SET flagged = 1 WHERE strategy_id = ?1 AND status IN ('pending', 'open')",
                    [id],
                )?;
            }
            Effect::ClearTransactions => {
                removed += conn.execute(
                    "DELETE FROM paper_transactions WHERE strategy_id = ?1",
                    [id],
                )?;
            }
            Effect::ResetVariables => {
                let mut r = row_of(conn, user, id)?;
                r.slice = 0;
                r.started_ms = 0;
                r.next_due_ms = 0;
                r.stopped_ms = 0;
                r.note = "reset".into();
                save_row(conn, &r)?;
            }
            Effect::DeleteStrategy => {
                conn.execute("DELETE FROM paper_strategies WHERE id = ?1", [id])?;
                // The exchange keeps the orders; they no longer belong to a strategy.
                conn.execute("UPDATE paper_orders SET strategy_id = NULL, flagged = 0 WHERE strategy_id = ?1", [id])?;
            }
            // Applied by the callers, which know the time and the answer to give.
            Effect::UpdateOverview
            | Effect::RecheckOrders
            | Effect::Schedule
            | Effect::AlreadyRunning
            | Effect::AlreadyStopped => {}
        }
    }
    Ok(removed)
}

fn live_orders(conn: &Connection, strategy: i64) -> rusqlite::Result<Vec<Order>> {
    orders_where(
        conn,
        "strategy_id = ?1 AND status IN ('pending', 'open') ORDER BY id",
        &[&strategy],
    )
}

fn plan_num(plan: &Value, path: &[&str]) -> Option<f64> {
    let mut v = plan;
    for p in path {
        v = v.get(*p)?;
    }
    v.as_f64()
}

/// Plan limits a strategy must meet to start (`None`: fine).
fn start_refusal(
    conn: &Connection,
    market: &Market,
    user: i64,
    id: i64,
    p: &Map<String, Value>,
    plan: &Value,
) -> rusqlite::Result<Option<(&'static str, String)>> {
    let codes = arr(p, "executable_codes");
    if field_text(p, "algorithm_id").is_empty() || codes.is_empty() {
        return Ok(Some((
            "id",
            "The profile has no algorithm or no executables yet; edit it first.".into(),
        )));
    }
    let running = rows_where(
        conn,
        "user_id = ?1 AND state = 'running' AND id != ?2",
        &[&user, &id],
    )?
    .len();
    if let Some(max) = plan_num(plan, &["strategies", "maximum", "strategies"]) {
        if running as f64 >= max {
            return Ok(Some((
                "id",
                format!("Your plan runs at most {max} strategies at once."),
            )));
        }
    }
    let keys = keys_of_profile(p);
    if let Some(max) = plan_num(
        plan,
        &["strategies", "maximum", "concurrent_exchange_api_key"],
    ) {
        if keys.len() as f64 > max {
            return Ok(Some((
                "executable_apikeys",
                format!("Your plan allows {max} exchange API keys per strategy."),
            )));
        }
    }
    let delay: f64 = field_text(p, "slice_delay").trim().parse().unwrap_or(0.0);
    let (lo, hi) = (
        plan_num(plan, &["strategies", "sleep_interval", "minimum"]).unwrap_or(1.0),
        plan_num(plan, &["strategies", "sleep_interval", "maximum"]).unwrap_or(f64::MAX),
    );
    if delay < lo || delay > hi {
        return Ok(Some((
            "slice_delay",
            format!("slice_delay must be {lo} to {hi} seconds on your plan."),
        )));
    }
    let values = arr(p, "executable_values");
    let (qlo, qhi) = (
        plan_num(plan, &["strategies", "qty_child", "minimum"]).unwrap_or(0.0),
        plan_num(plan, &["strategies", "qty_child", "maximum"]).unwrap_or(f64::MAX),
    );
    for (i, code) in codes.iter().enumerate() {
        let q = f64_at(&values, i).unwrap_or(0.0);
        if q <= qlo || q > qhi {
            return Ok(Some((
                "executable_values",
                format!("Quantities must be above {qlo} and at most {qhi} on your plan."),
            )));
        }
        if let Some(sym) = market.symbol(code.trim()) {
            if q < sym.min {
                return Ok(Some((
                    "executable_values",
                    format!("The smallest amount of {} is {}.", sym.code, sym.min),
                )));
            }
        }
    }
    let (olo, ohi) = (
        plan_num(plan, &["strategies", "price_offset", "minimum"]).unwrap_or(f64::MIN),
        plan_num(plan, &["strategies", "price_offset", "maximum"]).unwrap_or(f64::MAX),
    );
    let offsets = arr(p, "executable_priceoffset");
    if (0..codes.len()).any(|i| f64_at(&offsets, i).is_some_and(|o| o < olo || o > ohi)) {
        return Ok(Some((
            "executable_priceoffset",
            format!("Price offsets must be {olo} to {ohi} percent on your plan."),
        )));
    }
    let alg: u32 = field_text(p, "algorithm_id").trim().parse().unwrap_or(0);
    let per_slice = codes.len() as f64 * if alg == 3 { 2.0 } else { 1.0 };
    if let Some(ops) = plan_num(plan, &["strategies", "ratelimit", "orders_per_second"]) {
        if per_slice / delay.max(1.0) > ops {
            return Ok(Some((
                "slice_delay",
                format!(
                    "{per_slice} orders every {delay} s exceeds your plan's {ops} orders per second."
                ),
            )));
        }
    }
    Ok(None)
}

fn start(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let (id, p, mut row) = own_profile(cx, "id")?;
    let plan = cx.plan();
    let conn = cx.store().conn();
    let market = &cx.env.market;
    if row.state != State::Running {
        if let Some((param, msg)) =
            start_refusal(&conn, market, cx.user(), id, &p, &plan).map_err(sql)?
        {
            return Err(refused(param, msg));
        }
    }
    let codes = arr(&p, "executable_codes");
    let keys = arr(&p, "executable_apikeys");
    let mut usable = true;
    let mut problems = Vec::new();
    for (c, k) in codes.iter().zip(&keys) {
        let ex = market.symbol(c.trim()).map_or("", |s| s.exchange);
        let key: i64 = k.trim().parse().unwrap_or(0);
        if let Some(problem) = key_problem(&conn, cx.user(), key, ex).map_err(sql)? {
            usable = false;
            problems.push(problem);
        }
    }
    let (next, effects) = transition(
        row.state,
        Event::Start {
            keys_usable: usable,
        },
    )
    .map_err(|r| {
        let mut msg = r.message().to_owned();
        if let Some(p) = problems.first() {
            msg = format!("{msg} {p}");
        }
        refused("id", msg)
    })?;
    if effects.contains(&Effect::AlreadyRunning) {
        return Ok(json!({"id": id, "state": "running", "changed": false,
            "message": "The strategy is already running; nothing happened."}));
    }
    let mut rechecked = Vec::new();
    if effects.contains(&Effect::RecheckOrders) {
        let flagged = orders_where(
            &conn,
            "strategy_id = ?1 AND flagged = 1 ORDER BY id",
            &[&id],
        )
        .map_err(sql)?;
        for o in flagged {
            log_request(
                &conn,
                o.user_id,
                o.apikey_id,
                &o.exchange,
                "fetchOrder",
                &json!({"order": o.id.to_string(), "recheck": true}),
                cx.now(),
            )
            .map_err(sql)?;
            conn.execute(
                "UPDATE paper_orders SET flagged = 0, checks = checks + 1 WHERE id = ?1",
                [o.id],
            )
            .map_err(sql)?;
            rechecked.push(json!({"order": o.id.to_string(), "status": o.status, "filled": num(o.filled), "remaining": num((o.amount - o.filled).max(0.0))}));
        }
    }
    row.state = next;
    row.started_ms = cx.now();
    row.next_due_ms = cx.now();
    row.note = "started".into();
    save_row(&conn, &row).map_err(sql)?;
    Ok(
        json!({"id": id, "state": next.as_str(), "changed": true, "message": "The strategy is running.", "rechecked_orders": rechecked}),
    )
}

/// Stops strategy `id` with the effects of a stop transition (shared with key disabling).
pub(super) fn apply_stop(
    cx: &Cx<'_>,
    id: i64,
    effects: &[Effect],
    note: &str,
) -> rusqlite::Result<()> {
    let conn = cx.store().conn();
    stop_locked(&conn, cx.user(), id, effects, note, cx.now())
}

fn stop_locked(
    conn: &Connection,
    user: i64,
    id: i64,
    effects: &[Effect],
    note: &str,
    now: u64,
) -> rusqlite::Result<()> {
    apply_effects(conn, id, user, effects, now)?;
    let mut row = row_of(conn, user, id)?;
    row.state = State::Stopped;
    row.stopped_ms = now;
    row.note = note.into();
    save_row(conn, &row)?;
    if effects.contains(&Effect::UpdateOverview) {
        let ov = strategy_overview(conn, id)?;
        let text: Option<String> = conn
            .query_row(
                "SELECT fields FROM records WHERE id = ?1 AND kind = 'strategy_profile'",
                [id],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(Ok(Value::Object(mut m))) = text.map(|t| serde_json::from_str::<Value>(&t)) {
            m.insert("overview".into(), ov);
            conn.execute(
                "UPDATE records SET fields = ?1, updated_ms = ?2 WHERE id = ?3 AND kind = 'strategy_profile'",
                params![Value::Object(m).to_string(), ms(now), id],
            )?;
        }
    }
    Ok(())
}

fn strategy_overview(conn: &Connection, id: i64) -> rusqlite::Result<Value> {
    let orders = orders_where(conn, "strategy_id = ?1", &[&id])?;
    let tx: i64 = conn.query_row(
        "SELECT COUNT(*) FROM paper_transactions WHERE strategy_id = ?1",
        [id],
        |r| r.get(0),
    )?;
    let count = |s: &str| orders.iter().filter(|o| o.status == s).count();
    Ok(json!({
        "transactions": tx,
        "orders": orders.len(),
        "open": count("open") + count("pending"),
        "closed": count("closed"),
        "canceled": count("canceled"),
        "expired": count("expired"),
        "rejected": count("rejected"),
        "bought": num(orders.iter().filter(|o| o.side == Side::Buy).map(|o| o.filled).sum()),
        "sold": num(orders.iter().filter(|o| o.side == Side::Sell).map(|o| o.filled).sum()),
        "fees": num(orders.iter().map(|o| o.fee).sum()),
    }))
}

fn stop(cx: &Cx<'_>, event: Event) -> Result<Value, ApiError> {
    let (id, _, row) = own_profile(cx, "id")?;
    let (_, effects) = transition(row.state, event).map_err(|r| refusal("id", r))?;
    if effects.contains(&Effect::AlreadyStopped) {
        return Ok(
            json!({"id": id, "state": row.state.as_str(), "changed": false,
            "message": "The strategy is not running; nothing happened."}),
        );
    }
    let flagged = {
        let conn = cx.store().conn();
        live_orders(&conn, id).map_err(sql)?.len()
    };
    let note = match event {
        Event::SoftStop => "soft-stopped",
        Event::Stop { force: true } => "force-stopped",
        _ => "stopped",
    };
    apply_stop(cx, id, &effects, note).map_err(sql)?;
    let forced = effects.contains(&Effect::FlagOpenOrders);
    Ok(json!({
        "id": id,
        "state": "stopped",
        "changed": true,
        "force": forced,
        "orders_cancelled": if forced { 0 } else { flagged },
        "orders_left_open": if forced { flagged } else { 0 },
        "message": if forced {
            "Stopped at once; orders at the exchanges were not checked and stay open until you cancel them or start the strategy again."
        } else {
            "Stopped after cancelling the strategy's open orders."
        },
    }))
}

fn stop_all(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let force = cx.valid.boolean("force").unwrap_or(false);
    let running = {
        let conn = cx.store().conn();
        rows_where(
            &conn,
            "user_id = ?1 AND state = 'running' ORDER BY id",
            &[&cx.user()],
        )
        .map_err(sql)?
    };
    let mut stopped = Vec::new();
    for r in running {
        if let Ok((_, fx)) = transition(r.state, Event::StopAll { force }) {
            apply_stop(
                cx,
                r.id,
                &fx,
                if force { "force-stopped" } else { "stopped" },
            )
            .map_err(sql)?;
            stopped.push(r.id);
        }
    }
    Ok(json!({"stopped": stopped, "count": stopped.len(), "force": force}))
}

fn hard_reset(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let (id, _, row) = own_profile(cx, "id")?;
    let (_, effects) = transition(row.state, Event::HardReset).map_err(|r| refusal("id", r))?;
    let conn = cx.store().conn();
    let removed = apply_effects(&conn, id, cx.user(), &effects, cx.now()).map_err(sql)?;
    Ok(json!({"id": id, "state": "stopped", "transactions_deleted": removed, "slice": 0}))
}

pub(super) fn describe(
    conn: &Connection,
    id: i64,
    p: &Map<String, Value>,
    r: &Row,
) -> rusqlite::Result<Value> {
    let alg: u32 = field_text(p, "algorithm_id").trim().parse().unwrap_or(0);
    let tx: i64 = conn.query_row(
        "SELECT COUNT(*) FROM paper_transactions WHERE strategy_id = ?1",
        [id],
        |x| x.get(0),
    )?;
    Ok(json!({
        "id": id,
        "name": p.get("name").cloned().unwrap_or(Value::Null),
        "algorithm_id": field_text(p, "algorithm_id"),
        "algorithm": algorithm(alg).map_or(Value::Null, |a| json!(a.name)),
        "state": r.state.as_str(),
        "started_ms": r.started_ms,
        "stopped_ms": r.stopped_ms,
        "next_slice_ms": if r.state == State::Running { json!(r.next_due_ms) } else { Value::Null },
        "slices": r.slice,
        "slice_delay": field_text(p, "slice_delay"),
        "executables": arr(p, "executable_codes").len(),
        "transactions": tx,
        "position": r.position,
    }))
}

fn list_strategies(cx: &Cx<'_>, running_only: bool) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let mut out = Vec::new();
    for (id, p) in profiles_of(&conn, cx.user()).map_err(sql)? {
        let r = row_of(&conn, cx.user(), id).map_err(sql)?;
        if running_only && r.state != State::Running {
            continue;
        }
        out.push((r.position, id, describe(&conn, id, &p, &r).map_err(sql)?));
    }
    if running_only {
        out.sort_by_key(|(pos, id, _)| (*pos, *id));
        return Ok(Value::Array(out.into_iter().map(|(_, _, v)| v).collect()));
    }
    // Paged lists are newest first.
    out.sort_by_key(|(_, id, _)| std::cmp::Reverse(*id));
    Ok(paged(
        cx.ep,
        cx.valid,
        out.into_iter().map(|(_, _, v)| v).collect(),
    ))
}

/// A strategy transaction record: every field of the spec's record, all strings.
fn render_tx(
    id: i64,
    fields: &Map<String, Value>,
    created: u64,
    o: Option<&Order>,
    market: &Market,
) -> Value {
    let s = |k: &str| {
        fields.get(k).map_or_else(String::new, |v| {
            v.as_str().map_or_else(|| v.to_string(), str::to_owned)
        })
    };
    let mut m = Map::new();
    let mut put = |k: &str, v: String| {
        m.insert(k.to_owned(), Value::String(v));
    };
    put("id", id.to_string());
    put("time_created", (created / 1000).to_string());
    let updated = o.map_or(created, |o| {
        o.done_ms
            .max(
                o.trades
                    .last()
                    .and_then(|t| t["timestamp"].as_u64())
                    .unwrap_or(0),
            )
            .max(created)
    });
    put("last_updated", (updated / 1000).to_string());
    let live = o.is_some_and(|o| o.status == "open" || o.status == "pending");
    put("c_active", if live { "1" } else { "0" }.into());
    for k in [
        "c_order",
        "c_row",
        "c_symbol_code",
        "c_exchange",
        "c_symbol",
        "c_symbolid",
        "c_type",
        "c_type_orig",
        "c_side",
        "c_amount",
        "c_price_entry",
        "c_price_offset",
        "c_time_requested",
        "c_order_slice",
        "c_child_id",
        "c_spread_entry",
        "c_trace_order",
        "c_conditions",
        "custom_id",
        "c_max_time",
    ] {
        put(k, s(k));
    }
    match o {
        Some(o) => {
            let final_ = !live;
            put("c_lookup_status", if final_ { "1" } else { "0" }.into());
            put("c_lookup_count", o.checks.to_string());
            let price = o.price.unwrap_or(if o.filled > 0.0 {
                o.cost / o.filled
            } else {
                0.0
            });
            put("c_price", text(price));
            put("c_payload", o.to_json(market).to_string());
            put("c_time_orderplaced", o.send_ms.to_string());
            put("c_time_completed", o.done_ms.to_string());
            let requested: u64 = s("c_time_requested").parse().unwrap_or(o.send_ms);
            put(
                "c_time_journey",
                o.send_ms.saturating_sub(requested).to_string(),
            );
            put("c_order_id", o.id.to_string());
            put(
                "c_order_success",
                if o.status == "rejected" { "0" } else { "1" }.into(),
            );
            put(
                "c_order_failed",
                if o.status == "rejected" { "1" } else { "0" }.into(),
            );
            put("c_order_status", o.status.clone());
            put("c_order_remaining", text((o.amount - o.filled).max(0.0)));
            put("c_order_filled", text(o.filled));
            put("c_com", text(o.fee));
            let cancelled = o.status == "canceled" || o.status == "expired";
            put("c_cancel", if cancelled { "1" } else { "0" }.into());
            put(
                "c_cancel_time",
                if cancelled {
                    o.done_ms.to_string()
                } else {
                    "0".into()
                },
            );
        }
        None => {
            for k in [
                "c_lookup_status",
                "c_lookup_count",
                "c_price",
                "c_time_orderplaced",
                "c_time_completed",
                "c_time_journey",
                "c_order_id",
                "c_order_success",
                "c_order_remaining",
                "c_order_filled",
                "c_com",
                "c_cancel",
                "c_cancel_time",
            ] {
                put(k, "0".into());
            }
            put("c_payload", "{}".into());
            put("c_order_failed", "1".into());
            put("c_order_status", "unknown".into());
        }
    }
    Value::Object(m)
}

/// Which transactions to read.
pub(super) struct TxQuery<'a> {
    /// One strategy, or all of the user's.
    pub strategy: Option<i64>,
    /// Only orders of this trading code.
    pub code: Option<&'a str>,
    /// Only transactions whose order filled something (`remove_unfilled`).
    pub filled_only: bool,
    pub limit: u64,
    pub offset: u64,
}

/// One page of a user's transactions, newest first, rendered, with the strategy each
/// belongs to, and the total matching.
pub(super) fn transactions(
    conn: &Connection,
    market: &Market,
    user: i64,
    q: &TxQuery<'_>,
) -> rusqlite::Result<(Vec<(i64, Value)>, u64)> {
    const WHERE: &str = "FROM paper_transactions t JOIN paper_orders o ON o.id = t.order_id
         WHERE t.user_id = ?1 AND (?2 IS NULL OR t.strategy_id = ?2) AND (?3 IS NULL OR o.code = ?3)
             AND (?4 = 0 OR o.filled > 0)";
    let total: i64 = conn.query_row(
        &format!("SELECT COUNT(*) {WHERE}"),
        params![user, q.strategy, q.code, i64::from(q.filled_only)],
        |r| r.get(0),
    )?;
    let cols = super::exchange::prefixed_cols("o.");
    let mut stmt = conn.prepare(&format!(
        "SELECT {cols}, t.id, t.fields, t.created_ms, t.strategy_id {WHERE}
         ORDER BY t.id DESC LIMIT ?5 OFFSET ?6"
    ))?;
    let n = super::exchange::COLUMNS;
    let rows = stmt
        .query_map(
            params![
                user,
                q.strategy,
                q.code,
                i64::from(q.filled_only),
                ms(q.limit),
                ms(q.offset)
            ],
            |r| {
                Ok((
                    super::exchange::from_row(r)?,
                    r.get::<_, i64>(n)?,
                    r.get::<_, String>(n + 1)?,
                    r.get::<_, i64>(n + 2)?,
                    r.get::<_, i64>(n + 3)?,
                ))
            },
        )?
        .collect::<Result<Vec<_>, _>>()?;
    let out = rows
        .into_iter()
        .map(|(o, id, f, created, sid)| {
            let fields = match serde_json::from_str(&f) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            };
            (sid, render_tx(id, &fields, u(created), Some(&o), market))
        })
        .collect();
    Ok((out, u64::try_from(total).unwrap_or(0)))
}

fn list_transactions(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let (id, _, _) = own_profile(cx, "main_id")?;
    let page = trading_model::Page::of(cx.ep, cx.valid).unwrap_or(trading_model::Page {
        limit: 10,
        pagenumber: 1,
    });
    let conn = cx.store().conn();
    let q = TxQuery {
        strategy: Some(id),
        code: None,
        filled_only: cx.valid.boolean("remove_unfilled").unwrap_or(false),
        limit: u64::from(page.limit),
        offset: page.offset(),
    };
    let (rows, total) = transactions(&conn, &cx.env.market, cx.user(), &q).map_err(sql)?;
    Ok(json!({
        "main_id": id.to_string(),
        "transactions": rows.into_iter().map(|(_, t)| t).collect::<Vec<_>>(),
        "page": page.pagenumber,
        "showing": q.limit.min(total.saturating_sub(q.offset)),
        "total": total,
    }))
}

fn overview(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let profiles = profiles_of(&conn, cx.user()).map_err(sql)?;
    let mut active = 0;
    for (id, _) in &profiles {
        if row_of(&conn, cx.user(), *id).map_err(sql)?.state == State::Running {
            active += 1;
        }
    }
    let tx: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM paper_transactions WHERE user_id = ?1",
            [cx.user()],
            |r| r.get(0),
        )
        .map_err(sql)?;
    let orders = orders_where(
        &conn,
        "user_id = ?1 AND strategy_id IS NOT NULL",
        &[&cx.user()],
    )
    .map_err(sql)?;
    Ok(json!({
        "active": active,
        "inactive": profiles.len() - active,
        "total": profiles.len(),
        "transactions": tx,
        "orders_open": orders.iter().filter(|o| o.status == "open" || o.status == "pending").count(),
        "orders_flagged": orders.iter().filter(|o| o.flagged).count(),
        "orders_filled": orders.iter().filter(|o| o.status == "closed").count(),
        "fees": num(orders.iter().map(|o| o.fee).sum()),
    }))
}

fn debug(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let mut out = Vec::new();
    for (id, _) in profiles_of(&conn, cx.user()).map_err(sql)? {
        let r = row_of(&conn, cx.user(), id).map_err(sql)?;
        let live = live_orders(&conn, id).map_err(sql)?;
        out.push(json!({
            "id": id,
            "state": r.state.as_str(),
            "slice": r.slice,
            "started_ms": r.started_ms,
            "next_slice_ms": r.next_due_ms,
            "stopped_ms": r.stopped_ms,
            "last_event": r.note,
            "open_orders": live.iter().map(|o| o.id.to_string()).collect::<Vec<_>>(),
            "flagged_orders": live.iter().filter(|o| o.flagged).map(|o| o.id.to_string()).collect::<Vec<_>>(),
        }));
    }
    Ok(Value::Array(out))
}

fn list_algorithms(cx: &Cx<'_>) -> Value {
    let plan = cx.plan();
    let excluded = plan["strategies"]["algos_excluded"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Value::Array(
        ALGORITHMS
            .iter()
            .filter(|a| !excluded.iter().any(|e| e.as_str() == Some(a.name)))
            .map(|a| json!({"id": a.id.to_string(), "group_name": a.group_name, "name": a.name, "description": a.description}))
            .collect(),
    )
}

fn options(cx: &Cx<'_>) -> Value {
    let plan = cx.plan();
    let s = &plan["strategies"];
    json!({
        "algorithms": list_algorithms(cx),
        "executable_priceoffsettype": ["", "ob1", "ob2", "ob3", "ob4", "ob5"],
        "condition_orderbooklevels": ["mid", "bid1", "bid2", "bid3", "bid4", "bid5", "ask1", "ask2", "ask3", "ask4", "ask5"],
        "condition_value_forms": [">N", ">=N", "<N", "<=N", "=N", "N (same as >=N)"],
        "order_types": ["market", "limit"],
        "slice_delay_seconds": s["sleep_interval"],
        "qty_child": s["qty_child"],
        "price_offset_percent": s["price_offset"],
        "maximum": s["maximum"],
        "orders_per_second": s["ratelimit"]["orders_per_second"],
    })
}

fn duplicate(cx: &Cx<'_>) -> Result<Value, ApiError> {
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

fn edit_order(cx: &Cx<'_>) -> Result<Value, ApiError> {
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

fn edit_component(cx: &Cx<'_>) -> Result<Value, ApiError> {
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

fn books(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let market = &cx.env.market;
    let mut codes: Vec<String> = Vec::new();
    if let Some(c) = cx.valid.text("code") {
        let c = c.trim().to_ascii_lowercase();
        if market.symbol(&c).is_none() {
            return Err(refused("code", "Unknown trading code."));
        }
        codes.push(c);
    } else {
        let conn = cx.store().conn();
        for (_, p) in profiles_of(&conn, cx.user()).map_err(sql)? {
            for c in arr(&p, "executable_codes")
                .into_iter()
                .chain(arr(&p, "condition_codes"))
            {
                let c = c.trim().to_ascii_lowercase();
                if !codes.contains(&c) {
                    codes.push(c);
                }
            }
        }
    }
    let mut out = Map::new();
    for c in codes {
        if let Some(b) = market.book(&c, cx.now()) {
            let side = |l: &[trading_model::market::Level]| {
                l.iter()
                    .map(|x| json!([num(x.price), num(x.qty)]))
                    .collect::<Vec<_>>()
            };
            out.insert(c, json!({"time_ms": b.time_ms, "bids": side(&b.bids), "asks": side(&b.asks), "mid": num(b.mid())}));
        }
    }
    Ok(Value::Object(out))
}

/// Runs every due slice of every running strategy, each at its own scheduled time.
pub(super) fn run_due(store: &Store, market: &Market, now: u64) -> rusqlite::Result<()> {
    let due = rows_where(
        &store.conn(),
        "state = 'running' AND next_due_ms <= ?1 ORDER BY next_due_ms, id",
        &[&ms(now)],
    )?;
    for mut r in due {
        let plan = match store.user(r.user_id) {
            Ok(Some(u)) => trading_model::plans::plan_details(&u.plan),
            _ => continue,
        };
        let duration_ms = plan_num(&plan, &["strategies", "maximum", "duration"])
            .map_or(u64::MAX, |d| (d * 1000.0) as u64);
        let conn = store.conn();
        let Some((p, _)) = profile(&conn, r.user_id, r.id)? else {
            conn.execute("DELETE FROM paper_strategies WHERE id = ?1", [r.id])?;
            continue;
        };
        let delay_ms = field_text(&p, "slice_delay")
            .trim()
            .parse::<u64>()
            .unwrap_or(1)
            .clamp(1, 86_400 * 365)
            * 1000;
        let end = r.started_ms.saturating_add(duration_ms);
        let mut runs = 0;
        while r.next_due_ms <= now && runs < MAX_SLICES_PER_TICK {
            let t = r.next_due_ms;
            if t >= end {
                let (_, fx) = transition(State::Running, Event::DurationElapsed)
                    .unwrap_or((State::Stopped, vec![]));
                stop_locked(&conn, r.user_id, r.id, &fx, "plan duration elapsed", end)?;
                r = row_of(&conn, r.user_id, r.id)?;
                break;
            }
            r.note = run_slice(&conn, market, &r, &p, t, now)?;
            r.slice += 1;
            r.next_due_ms = t + delay_ms;
            runs += 1;
        }
        if r.state == State::Running {
            save_row(&conn, &r)?;
        }
    }
    Ok(())
}

/// One slice at time `t`: conditions, then one order per planned order, each with its
/// transaction record. Returns a note for `data/debug`.
fn run_slice(
    conn: &Connection,
    market: &Market,
    r: &Row,
    p: &Map<String, Value>,
    t: u64,
    now: u64,
) -> rusqlite::Result<String> {
    let ccodes = arr(p, "condition_codes");
    let noconditions = matches!(p.get("noconditions"), Some(Value::Bool(true)))
        || matches!(p.get("noconditions"), Some(Value::String(s)) if s == "true" || s == "1");
    if !noconditions {
        let cvalues = arr(p, "condition_values");
        let side1 = arr(p, "condition_orderbooklevel_side1");
        let side2 = arr(p, "condition_orderbooklevel_side2");
        for (i, code) in ccodes.iter().enumerate() {
            let (Some(book), Some(cond)) = (
                market.book(code.trim(), t),
                cvalues.get(i).and_then(|v| Condition::parse(v)),
            ) else {
                return Ok(format!("slice {}: condition {i} unreadable", r.slice));
            };
            let a =
                level_price(&book, side1.get(i).map_or("", String::as_str)).unwrap_or(book.mid());
            let x = match side2.get(i).filter(|s| !s.trim().is_empty()) {
                Some(l) => a - level_price(&book, l).unwrap_or(a),
                None => a,
            };
            if !cond.holds(x) {
                return Ok(format!("slice {}: condition {i} not met ({x})", r.slice));
            }
        }
    }
    let alg: u32 = field_text(p, "algorithm_id").trim().parse().unwrap_or(0);
    let level = level_index(&field_text(p, "executable_priceoffsettype")).unwrap_or(0);
    let codes = arr(p, "executable_codes");
    let keys = arr(p, "executable_apikeys");
    let values = arr(p, "executable_values");
    let offsets = arr(p, "executable_priceoffset");
    let exacts = arr(p, "executable_priceexact");
    let lives = arr(p, "executable_maximumtimelive");
    let mut placed = 0;
    for (row, code) in codes.iter().enumerate() {
        let Some(sym) = market.symbol(code.trim()) else {
            continue;
        };
        let Some(book) = market.book(&sym.code, t) else {
            continue;
        };
        let key: i64 = keys
            .get(row)
            .and_then(|k| k.trim().parse().ok())
            .unwrap_or(0);
        let qty = sym.round_amount(f64_at(&values, row).unwrap_or(0.0));
        let offset = f64_at(&offsets, row).unwrap_or(0.0);
        let exact = f64_at(&exacts, row).filter(|x| *x > 0.0);
        let live = f64_at(&lives, row).map_or(0, |x| x.max(0.0) as u64);
        for planned in plan(alg, r.slice, row, &book, level, offset, exact) {
            let seq: i64 = conn.query_row(
                "SELECT COUNT(*) FROM paper_orders WHERE strategy_id = ?1",
                [r.id],
                |x| x.get(0),
            )?;
            let client = format!("execute{}{:04}", r.id, seq + 1);
            let kind = if planned.price.is_some() {
                "limit"
            } else {
                "market"
            };
            let o = place(
                conn,
                market,
                &NewOrder {
                    user: r.user_id,
                    key,
                    exchange: sym.exchange,
                    code: &sym.code,
                    kind,
                    side: planned.side,
                    amount: qty,
                    price: planned.price.map(|x| sym.round_price(x)),
                    send_ms: t,
                    expire_after: live,
                    strategy_id: Some(r.id),
                    client_id: client.clone(),
                },
                now,
            )?;
            let fields = json!({
                "c_order": (seq + 1).to_string(),
                "c_row": row.to_string(),
                "c_symbol_code": sym.code,
                "c_exchange": sym.exchange,
                "c_symbol": sym.pair(),
                "c_symbolid": sym.id.to_string(),
                "c_type": kind,
                "c_type_orig": kind,
                "c_side": planned.side.as_str(),
                "c_amount": text(qty),
                "c_price_entry": text(planned.reference),
                "c_price_offset": text(offset),
                "c_time_requested": t.to_string(),
                "c_order_slice": r.slice.to_string(),
                "c_child_id": "0",
                "c_spread_entry": text(book.asks[0].price - book.bids[0].price),
                "c_trace_order": format!("{}-{}-{}", r.id, r.slice, row),
                "c_conditions": Value::Array(ccodes.iter().map(|c| json!(c)).collect()).to_string(),
                "custom_id": client,
                "c_max_time": live.to_string(),
            });
            conn.execute(
                "INSERT INTO paper_transactions (user_id, strategy_id, order_id, fields, created_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![r.user_id, r.id, o.id, fields.to_string(), ms(t)],
            )?;
            placed += 1;
        }
    }
    Ok(format!("slice {} at {}: {placed} orders", r.slice, iso(t)))
}
