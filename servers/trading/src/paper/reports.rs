//! Account statistics and the finance lists, computed by `trading_model::paper_reports`
//! from the recorded paper orders and strategy transactions; this file reads the orders
//! and shapes the answers.

use serde_json::{Value, json};
use trading_model::paper_reports::{self as model, OrderView, Trade};
use trading_model::{ApiError, typed};

use super::call_context::{Cx, iso, num, paged, sql};
use crate::context::{NO_RECORD, refused};
use crate::store::{Order, Orders};

pub(super) fn call(cx: &Cx<'_>, path: &str) -> Result<Value, ApiError> {
    match path {
        "statistics/account-pnl" => account_pnl(cx),
        "finance/list-commissions-paid" => commissions(cx),
        "finance/list-recent-transactions" => recent(cx),
        "finance/list-top-strategy-pnl" => top_strategies(cx),
        "finance/import-orders-list" => import_list(cx),
        "finance/import-orders-settings" => import_settings(cx),
        _ => Err(refused("path", "unhandled")),
    }
}

/// What the model needs of a stored order; unreadable trade fields count as 0.
fn view(o: &Order) -> OrderView<'_> {
    OrderView {
        id: o.id,
        code: &o.code,
        side: o.side,
        filled: o.filled,
        fee: o.fee,
        send_ms: o.send_ms,
        done_ms: o.done_ms,
        trades: o
            .trades
            .iter()
            .map(|t| Trade {
                time_ms: t["timestamp"].as_u64().unwrap_or(0),
                amount: t["amount"].as_f64().unwrap_or(0.0),
                price: t["price"].as_f64().unwrap_or(0.0),
                fee: t["fee"]["cost"].as_f64().unwrap_or(0.0),
            })
            .collect(),
    }
}

fn views(orders: &[Order]) -> Vec<OrderView<'_>> {
    orders.iter().map(view).collect()
}

fn account_pnl(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let orders = conn.orders(Orders::OfUser(cx.user())).map_err(sql)?;
    let market = &cx.env.market;
    let now = cx.now();
    let pnl = model::account_pnl(market, &views(&orders), now);
    let symbols: Vec<Value> = pnl
        .codes
        .iter()
        .map(|c| {
            let sym = market.symbol(c.code);
            let p = &c.position;
            json!({
                "code": c.code,
                "symbol": sym.map(|s| s.pair()),
                "currency": sym.map(|s| s.quote),
                "bought": num(p.bought),
                "sold": num(p.sold),
                "position": num(p.qty),
                "average_cost": num(p.avg),
                "realised": num(p.realised),
                "fees": num(p.fees),
                "realised_net": num(c.realised_net()),
                "mark_price": num(c.mark_price),
                "unrealised": num(c.unrealised),
            })
        })
        .collect();
    let t = pnl.total_usd;
    Ok(json!({
        "method": "average cost per trading code; fees subtracted from realised",
        "time_ms": now,
        "orders": orders.len(),
        "fills": pnl.fills,
        "symbols": symbols,
        "total_usd": {"realised_net": num(t.realised_net), "fees": num(t.fees), "unrealised": num(t.unrealised)},
    }))
}

fn commissions(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let given = typed::FinanceListCommissionsPaid::from_valid(cx.valid)?;
    let sub = given.subaccount_id.trim().to_owned();
    let conn = cx.store().paper();
    // `0` names the primary account itself; sub-accounts hold no exchange keys in this
    // sandbox, so they have paid no commissions.
    let orders = if sub == "0" {
        conn.orders(Orders::WithFeesOfUser(cx.user()))
            .map_err(sql)?
    } else {
        let id: i64 = sub
            .parse()
            .map_err(|_| refused("subaccount_id", NO_RECORD))?;
        if !conn.has_subaccount(cx.user(), id).map_err(sql)? {
            return Err(refused("subaccount_id", NO_RECORD));
        }
        Vec::new()
    };
    let market = &cx.env.market;
    let rows = orders
        .iter()
        .map(|o| {
            let c = model::commission(market, &view(o));
            json!({
                "order": o.id.to_string(),
                "code": o.code,
                "exchange": o.exchange,
                "side": o.side.as_str(),
                "fee": num(o.fee),
                "currency": market.symbol(&o.code).map(|s| s.quote),
                "fee_usd": num(c.fee_usd),
                "strategy_id": o.strategy_id.map(|s| s.to_string()),
                "time_ms": c.time_ms,
            })
        })
        .collect();
    Ok(paged(cx.ep, cx.valid, rows))
}

fn recent(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let orders = conn.orders(Orders::OfUser(cx.user())).map_err(sql)?;
    // The rows echo the stored trade JSON as recorded.
    let rows: Vec<Value> = model::recent(&views(&orders))
        .into_iter()
        .map(|f| {
            let o = &orders[f.order];
            let (tr, t) = (&o.trades[f.trade], f.time_ms);
            json!({
                "id": tr["id"], "order": o.id.to_string(), "code": o.code, "exchange": o.exchange,
                "symbol": tr["symbol"], "side": o.side.as_str(), "price": tr["price"], "amount": tr["amount"],
                "cost": tr["cost"], "fee": tr["fee"], "strategy_id": o.strategy_id.map(|s| s.to_string()),
                "time_ms": t, "datetime": iso(t),
            })
        })
        .collect();
    Ok(paged(cx.ep, cx.valid, rows))
}

fn top_strategies(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let market = &cx.env.market;
    let now = cx.now();
    let mut rows = Vec::new();
    for (id, p) in conn.profiles_of(cx.user()).map_err(sql)? {
        let orders = conn.orders(Orders::OfStrategy(id)).map_err(sql)?;
        let name = p.get("name").cloned().unwrap_or(Value::Null);
        rows.push((model::strategy_pnl(market, id, &views(&orders), now), name));
    }
    model::rank(&mut rows);
    let rows = rows
        .into_iter()
        .map(|(s, name)| {
            json!({
                "id": s.id,
                "name": name,
                "realised_net_usd": num(s.realised_net_usd),
                "fees_usd": num(s.fees_usd),
                "orders": s.orders,
                "filled_orders": s.filled_orders,
            })
        })
        .collect();
    Ok(paged(cx.ep, cx.valid, rows))
}

fn import_list(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let orders = conn.orders(Orders::ManualOfUser(cx.user())).map_err(sql)?;
    Ok(Value::Array(
        orders.iter().map(|o| o.to_json(&cx.env.market)).collect(),
    ))
}

fn import_settings(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let mut out = Vec::new();
    for (id, f) in conn.keys_of(cx.user()).map_err(sql)? {
        let n = conn.manual_order_count(id).map_err(sql)?;
        let status = f
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("active")
            .to_owned();
        out.push(json!({
            "apikey": id,
            "exchange": f.get("exchange"),
            "label": f.get("label"),
            "status": status,
            "import_enabled": status == "active",
            "orders_available": n,
        }));
    }
    Ok(Value::Array(out))
}
