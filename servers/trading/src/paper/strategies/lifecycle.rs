//! Starting and stopping strategies through the state machine of
//! `trading_model::strategy`, and applying its effects to the store.

use serde_json::{Map, Value, json};
use trading_model::market::{Market, Side};
use trading_model::strategy::{Effect, Event, Refusal, State, transition};
use trading_model::strategy_profile::{Profile, number_at};
use trading_model::{ApiError, typed};

use super::rows::own_profile;
use crate::context::refused;
use crate::paper::balances::key_problem;
use crate::paper::call_context::{Cx, num, sql};
use crate::paper::orders::cancel;
use crate::store::{Order, Orders, PaperDb, StoreError, Strategies};

/// Applies the state machine's effects; returns the number of transactions deleted.
pub(crate) fn apply_effects(
    conn: &PaperDb<'_>,
    id: i64,
    user: i64,
    effects: &[Effect],
    now: u64,
) -> Result<usize, StoreError> {
    let mut removed = 0;
    for e in effects {
        match e {
            Effect::CancelOpenOrders => {
                for mut o in live_orders(conn, id)? {
                    cancel(conn, &mut o, now)?;
                }
            }
            Effect::FlagOpenOrders => {
                conn.flag_live_orders(id)?;
            }
            Effect::ClearTransactions => {
                removed += conn.delete_transactions(id)?;
            }
            Effect::ResetVariables => {
                let mut r = conn.row_of(user, id)?;
                r.slice = 0;
                r.started_ms = 0;
                r.next_due_ms = 0;
                r.stopped_ms = 0;
                r.note = "reset".into();
                conn.save_row(&r)?;
            }
            Effect::DeleteStrategy => {
                conn.delete_strategy(id)?;
                // The exchange keeps the orders; they no longer belong to a strategy.
                conn.release_orders(id)?;
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

pub(crate) fn live_orders(conn: &PaperDb<'_>, strategy: i64) -> Result<Vec<Order>, StoreError> {
    conn.orders(Orders::LiveOfStrategy(strategy))
}

pub(crate) fn plan_num(plan: &Value, path: &[&str]) -> Option<f64> {
    let mut v = plan;
    for p in path {
        v = v.get(*p)?;
    }
    v.as_f64()
}

/// Plan limits a strategy must meet to start (`None`: fine).
fn start_refusal(
    conn: &PaperDb<'_>,
    market: &Market,
    user: i64,
    id: i64,
    p: &Map<String, Value>,
    plan: &Value,
) -> Result<Option<(&'static str, String)>, StoreError> {
    let codes = Profile::new(p).list("executable_codes");
    if Profile::new(p).text("algorithm_id").is_empty() || codes.is_empty() {
        return Ok(Some((
            "id",
            "The profile has no algorithm or no executables yet; edit it first.".into(),
        )));
    }
    let running = conn
        .strategies(Strategies::RunningOfUserExcept(user, id))?
        .len();
    if let Some(max) = plan_num(plan, &["strategies", "maximum", "strategies"]) {
        if running as f64 >= max {
            return Ok(Some((
                "id",
                format!("Your plan runs at most {max} strategies at once."),
            )));
        }
    }
    let keys = Profile::new(p).key_ids();
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
    let delay: f64 = Profile::new(p)
        .text("slice_delay")
        .trim()
        .parse()
        .unwrap_or(0.0);
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
    let values = Profile::new(p).list("executable_values");
    let (qlo, qhi) = (
        plan_num(plan, &["strategies", "qty_child", "minimum"]).unwrap_or(0.0),
        plan_num(plan, &["strategies", "qty_child", "maximum"]).unwrap_or(f64::MAX),
    );
    for (i, code) in codes.iter().enumerate() {
        let q = number_at(&values, i).unwrap_or(0.0);
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
    let offsets = Profile::new(p).list("executable_priceoffset");
    if (0..codes.len()).any(|i| number_at(&offsets, i).is_some_and(|o| o < olo || o > ohi)) {
        return Ok(Some((
            "executable_priceoffset",
            format!("Price offsets must be {olo} to {ohi} percent on your plan."),
        )));
    }
    let alg: u32 = Profile::new(p)
        .text("algorithm_id")
        .trim()
        .parse()
        .unwrap_or(0);
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

pub(crate) fn start(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let given = typed::StrategyStart::from_valid(cx.valid)?;
    let (id, p, mut row) = own_profile(cx, "id", &given.id)?;
    let plan = cx.plan();
    let conn = cx.store().paper();
    let market = &cx.env.market;
    if row.state != State::Running {
        if let Some((param, msg)) =
            start_refusal(&conn, market, cx.user(), id, &p, &plan).map_err(sql)?
        {
            return Err(refused(param, msg));
        }
    }
    let codes = Profile::new(&p).list("executable_codes");
    let keys = Profile::new(&p).list("executable_apikeys");
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
        let flagged = conn.orders(Orders::FlaggedOfStrategy(id)).map_err(sql)?;
        for o in flagged {
            conn.log_request(
                o.user_id,
                o.apikey_id,
                &o.exchange,
                "fetchOrder",
                &json!({"order": o.id.to_string(), "recheck": true}),
                cx.now(),
            )
            .map_err(sql)?;
            conn.mark_rechecked(o.id).map_err(sql)?;
            rechecked.push(json!({"order": o.id.to_string(), "status": o.status, "filled": num(o.filled), "remaining": num((o.amount - o.filled).max(0.0))}));
        }
    }
    row.state = next;
    row.started_ms = cx.now();
    row.next_due_ms = cx.now();
    row.note = "started".into();
    conn.save_row(&row).map_err(sql)?;
    Ok(
        json!({"id": id, "state": next.as_str(), "changed": true, "message": "The strategy is running.", "rechecked_orders": rechecked}),
    )
}

/// Stops strategy `id` with the effects of a stop transition (shared with key disabling).
pub(crate) fn apply_stop(
    cx: &Cx<'_>,
    id: i64,
    effects: &[Effect],
    note: &str,
) -> Result<(), StoreError> {
    let conn = cx.store().paper();
    stop_locked(&conn, cx.user(), id, effects, note, cx.now())
}

pub(crate) fn stop_locked(
    conn: &PaperDb<'_>,
    user: i64,
    id: i64,
    effects: &[Effect],
    note: &str,
    now: u64,
) -> Result<(), StoreError> {
    apply_effects(conn, id, user, effects, now)?;
    let mut row = conn.row_of(user, id)?;
    row.state = State::Stopped;
    row.stopped_ms = now;
    row.note = note.into();
    conn.save_row(&row)?;
    if effects.contains(&Effect::UpdateOverview) {
        let ov = strategy_overview(conn, id)?;
        conn.set_profile_overview(id, ov, now)?;
    }
    Ok(())
}

fn strategy_overview(conn: &PaperDb<'_>, id: i64) -> Result<Value, StoreError> {
    let orders = conn.orders(Orders::OfStrategy(id))?;
    let tx = conn.transaction_count(id)?;
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

/// Stops the strategy named by `given` (the `id` parameter).
pub(crate) fn stop(cx: &Cx<'_>, given: &str, event: Event) -> Result<Value, ApiError> {
    let (id, _, row) = own_profile(cx, "id", given)?;
    let (_, effects) = transition(row.state, event).map_err(|r| refusal("id", r))?;
    if effects.contains(&Effect::AlreadyStopped) {
        return Ok(
            json!({"id": id, "state": row.state.as_str(), "changed": false,
            "message": "The strategy is not running; nothing happened."}),
        );
    }
    let flagged = {
        let conn = cx.store().paper();
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

pub(crate) fn stop_all(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let force = typed::StrategyStopAllStrategies::from_valid(cx.valid)?.force;
    let force = force.unwrap_or(false);
    let running = {
        let conn = cx.store().paper();
        conn.strategies(Strategies::RunningOfUser(cx.user()))
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

pub(crate) fn hard_reset(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let given = typed::StrategyHardReset::from_valid(cx.valid)?;
    let (id, _, row) = own_profile(cx, "id", &given.id)?;
    let (_, effects) = transition(row.state, Event::HardReset).map_err(|r| refusal("id", r))?;
    let conn = cx.store().paper();
    let removed = apply_effects(&conn, id, cx.user(), &effects, cx.now()).map_err(sql)?;
    Ok(json!({"id": id, "state": "stopped", "transactions_deleted": removed, "slice": 0}))
}

pub(crate) fn refusal(param: &str, r: Refusal) -> ApiError {
    refused(param, r.message())
}
