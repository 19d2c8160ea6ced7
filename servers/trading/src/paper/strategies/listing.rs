//! What strategies report: lists, transactions, overview, debug data, the algorithms,
//! options and books.

use serde_json::{Map, Value, json};
use trading_model::market::Market;
use trading_model::strategy::{ALGORITHMS, State, algorithm};
use trading_model::strategy_profile::Profile;
use trading_model::tx_record::{self, OrderFacts};
use trading_model::{ApiError, typed};

use super::lifecycle::live_orders;
use super::rows::own_profile;

use crate::context::refused;
use crate::paper::call_context::{Cx, num, paged, sql};
use crate::store::{Orders, PaperDb, StoreError, StrategyRow};

pub(crate) fn describe(
    conn: &PaperDb<'_>,
    id: i64,
    p: &Map<String, Value>,
    r: &StrategyRow,
) -> Result<Value, StoreError> {
    let alg: u32 = Profile::new(p)
        .text("algorithm_id")
        .trim()
        .parse()
        .unwrap_or(0);
    let tx = conn.transaction_count(id)?;
    Ok(json!({
        "id": id,
        "name": p.get("name").cloned().unwrap_or(Value::Null),
        "algorithm_id": Profile::new(p).text("algorithm_id"),
        "algorithm": algorithm(alg).map_or(Value::Null, |a| json!(a.name)),
        "state": r.state.as_str(),
        "started_ms": r.started_ms,
        "stopped_ms": r.stopped_ms,
        "next_slice_ms": if r.state == State::Running { json!(r.next_due_ms) } else { Value::Null },
        "slices": r.slice,
        "slice_delay": Profile::new(p).text("slice_delay"),
        "executables": Profile::new(p).list("executable_codes").len(),
        "transactions": tx,
        "position": r.position,
    }))
}

pub(crate) fn list_strategies(cx: &Cx<'_>, running_only: bool) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let mut out = Vec::new();
    for (id, p) in conn.profiles_of(cx.user()).map_err(sql)? {
        let r = conn.row_of(cx.user(), id).map_err(sql)?;
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

/// Which transactions to read.
pub(crate) struct TxQuery<'a> {
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
pub(crate) fn transactions(
    conn: &PaperDb<'_>,
    market: &Market,
    user: i64,
    q: &TxQuery<'_>,
) -> Result<(Vec<(i64, Value)>, u64), StoreError> {
    let (rows, total) =
        conn.transaction_page(user, q.strategy, q.code, q.filled_only, q.limit, q.offset)?;
    let out = rows
        .into_iter()
        .map(|t| {
            let o = &t.order;
            let facts = OrderFacts {
                id: o.id,
                status: &o.status,
                checks: o.checks,
                price: o.price,
                amount: o.amount,
                filled: o.filled,
                cost: o.cost,
                fee: o.fee,
                send_ms: o.send_ms,
                done_ms: o.done_ms,
                last_trade_ms: o.trades.last().and_then(|t| t["timestamp"].as_u64()),
                payload: o.to_json(market).to_string(),
            };
            let rendered = tx_record::render(t.id, &t.fields, t.created_ms, Some(&facts));
            (t.strategy_id, rendered)
        })
        .collect();
    Ok((out, total))
}

pub(crate) fn list_transactions(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let given = typed::StrategyListStrategyTransactions::from_valid(cx.valid)?;
    let (id, _, _) = own_profile(cx, "main_id", &given.main_id)?;
    let page = trading_model::Page::of(cx.ep, cx.valid).unwrap_or(trading_model::Page {
        limit: 10,
        pagenumber: 1,
    });
    let conn = cx.store().paper();
    let q = TxQuery {
        strategy: Some(id),
        code: None,
        filled_only: given.remove_unfilled.unwrap_or(false),
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

pub(crate) fn overview(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let profiles = conn.profiles_of(cx.user()).map_err(sql)?;
    let mut active = 0;
    for (id, _) in &profiles {
        if conn.row_of(cx.user(), *id).map_err(sql)?.state == State::Running {
            active += 1;
        }
    }
    let tx = conn.user_transaction_count(cx.user()).map_err(sql)?;
    let orders = conn
        .orders(Orders::OfStrategiesOfUser(cx.user()))
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

pub(crate) fn debug(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let mut out = Vec::new();
    for (id, _) in conn.profiles_of(cx.user()).map_err(sql)? {
        let r = conn.row_of(cx.user(), id).map_err(sql)?;
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

pub(crate) fn list_algorithms(cx: &Cx<'_>) -> Value {
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

pub(crate) fn options(cx: &Cx<'_>) -> Value {
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

pub(crate) fn books(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let market = &cx.env.market;
    let mut codes: Vec<String> = Vec::new();
    if let Some(c) = typed::StrategyBooks::from_valid(cx.valid)?.code {
        let c = c.trim().to_ascii_lowercase();
        if market.symbol(&c).is_none() {
            return Err(refused("code", "Unknown trading code."));
        }
        codes.push(c);
    } else {
        let conn = cx.store().paper();
        for (_, p) in conn.profiles_of(cx.user()).map_err(sql)? {
            for c in Profile::new(&p)
                .list("executable_codes")
                .into_iter()
                .chain(Profile::new(&p).list("condition_codes"))
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
