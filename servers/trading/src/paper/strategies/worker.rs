//! The strategy worker: runs the due slices of running strategies as paper orders on
//! the injected clock.

use serde_json::{Map, Value, json};
use trading_model::market::Market;
use trading_model::strategy::{
    Condition, Event, State, level_index, level_price, plan, transition,
};
use trading_model::strategy_profile::{Profile, number_at};

use super::lifecycle::{plan_num, stop_locked};
use crate::paper::call_context::{iso, text};
use crate::paper::orders::place;
use crate::store::{NewOrder, PaperDb, Store, StoreError, Strategies, StrategyRow};

/// Slices one tick runs per strategy at most (a clock jump of days is caught up over
/// several ticks instead of stalling one request).
const MAX_SLICES_PER_TICK: u64 = 2_000;

/// Runs every due slice of every running strategy, each at its own scheduled time.
pub(crate) fn run_due(store: &Store, market: &Market, now: u64) -> Result<(), StoreError> {
    let due = store.paper().strategies(Strategies::Due(now))?;
    for mut r in due {
        let plan = match store.user(r.user_id) {
            Ok(Some(u)) => trading_model::plans::plan_details(&u.plan),
            _ => continue,
        };
        let duration_ms = plan_num(&plan, &["strategies", "maximum", "duration"])
            .map_or(u64::MAX, |d| (d * 1000.0) as u64);
        let conn = store.paper();
        let Some((p, _)) = conn.profile(r.user_id, r.id)? else {
            conn.delete_strategy(r.id)?;
            continue;
        };
        let delay_ms = Profile::new(&p)
            .text("slice_delay")
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
                r = conn.row_of(r.user_id, r.id)?;
                break;
            }
            r.note = run_slice(&conn, market, &r, &p, t, now)?;
            r.slice += 1;
            r.next_due_ms = t + delay_ms;
            runs += 1;
        }
        if r.state == State::Running {
            conn.save_row(&r)?;
        }
    }
    Ok(())
}

/// One slice at time `t`: conditions, then one order per planned order, each with its
/// transaction record. Returns a note for `data/debug`.
fn run_slice(
    conn: &PaperDb<'_>,
    market: &Market,
    r: &StrategyRow,
    p: &Map<String, Value>,
    t: u64,
    now: u64,
) -> Result<String, StoreError> {
    let ccodes = Profile::new(p).list("condition_codes");
    let noconditions = matches!(p.get("noconditions"), Some(Value::Bool(true)))
        || matches!(p.get("noconditions"), Some(Value::String(s)) if s == "true" || s == "1");
    if !noconditions {
        let cvalues = Profile::new(p).list("condition_values");
        let side1 = Profile::new(p).list("condition_orderbooklevel_side1");
        let side2 = Profile::new(p).list("condition_orderbooklevel_side2");
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
    let alg: u32 = Profile::new(p)
        .text("algorithm_id")
        .trim()
        .parse()
        .unwrap_or(0);
    let level = level_index(&Profile::new(p).text("executable_priceoffsettype")).unwrap_or(0);
    let codes = Profile::new(p).list("executable_codes");
    let keys = Profile::new(p).list("executable_apikeys");
    let values = Profile::new(p).list("executable_values");
    let offsets = Profile::new(p).list("executable_priceoffset");
    let exacts = Profile::new(p).list("executable_priceexact");
    let lives = Profile::new(p).list("executable_maximumtimelive");
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
        let qty = sym.round_amount(number_at(&values, row).unwrap_or(0.0));
        let offset = number_at(&offsets, row).unwrap_or(0.0);
        let exact = number_at(&exacts, row).filter(|x| *x > 0.0);
        let live = number_at(&lives, row).map_or(0, |x| x.max(0.0) as u64);
        for planned in plan(alg, r.slice, row, &book, level, offset, exact) {
            let seq = conn.orders_of_strategy_count(r.id)?;
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
            conn.insert_transaction(r.user_id, r.id, o.id, &fields, t)?;
            placed += 1;
        }
    }
    Ok(format!("slice {} at {}: {placed} orders", r.slice, iso(t)))
}
