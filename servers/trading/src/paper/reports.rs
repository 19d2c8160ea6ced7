//! Account statistics and the finance lists, computed from the recorded paper orders and
//! strategy transactions.
//!
//! Realised profit and loss uses the average-cost method per trading code, fees
//! subtracted; amounts are in each code's quote asset and converted to US dollars at the
//! current simulated price for totals.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use trading_model::market::Market;
use trading_model::orders::Position;
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

/// Fills of `orders` oldest first as `(time, order, trade)`.
fn fills(orders: &[Order]) -> Vec<(u64, &Order, &Value)> {
    let mut out: Vec<(u64, &Order, &Value)> = orders
        .iter()
        .flat_map(|o| {
            o.trades
                .iter()
                .map(move |t| (t["timestamp"].as_u64().unwrap_or(0), o, t))
        })
        .collect();
    out.sort_by_key(|(t, o, _)| (*t, o.id));
    out
}

fn positions(orders: &[Order]) -> BTreeMap<String, Position> {
    let mut out: BTreeMap<String, Position> = BTreeMap::new();
    for (_, o, t) in fills(orders) {
        let p = out.entry(o.code.clone()).or_default();
        p.trade(
            o.side,
            t["amount"].as_f64().unwrap_or(0.0),
            t["price"].as_f64().unwrap_or(0.0),
            t["fee"]["cost"].as_f64().unwrap_or(0.0),
        );
    }
    out
}

fn usd(market: &Market, code: &str, amount: f64, now: u64) -> f64 {
    let rate = market
        .symbol(code)
        .and_then(|s| market.asset_usd(s.quote, now))
        .unwrap_or(1.0);
    amount * rate
}

fn account_pnl(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let orders = conn.orders(Orders::OfUser(cx.user())).map_err(sql)?;
    let market = &cx.env.market;
    let now = cx.now();
    let mut symbols = Vec::new();
    let (mut r_usd, mut f_usd, mut u_usd) = (0.0, 0.0, 0.0);
    for (code, p) in positions(&orders) {
        let mid = market.mid(&code, now).unwrap_or(0.0);
        let unrealised = if p.qty == 0.0 {
            0.0
        } else {
            (mid - p.avg) * p.qty
        };
        let sym = market.symbol(&code);
        r_usd += usd(market, &code, p.realised - p.fees, now);
        f_usd += usd(market, &code, p.fees, now);
        u_usd += usd(market, &code, unrealised, now);
        symbols.push(json!({
            "code": code,
            "symbol": sym.map(|s| s.pair()),
            "currency": sym.map(|s| s.quote),
            "bought": num(p.bought),
            "sold": num(p.sold),
            "position": num(p.qty),
            "average_cost": num(p.avg),
            "realised": num(p.realised),
            "fees": num(p.fees),
            "realised_net": num(p.realised - p.fees),
            "mark_price": num(mid),
            "unrealised": num(unrealised),
        }));
    }
    Ok(json!({
        "method": "average cost per trading code; fees subtracted from realised",
        "time_ms": now,
        "orders": orders.len(),
        "fills": fills(&orders).len(),
        "symbols": symbols,
        "total_usd": {"realised_net": num(r_usd), "fees": num(f_usd), "unrealised": num(u_usd)},
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
            json!({
                "order": o.id.to_string(),
                "code": o.code,
                "exchange": o.exchange,
                "side": o.side.as_str(),
                "fee": num(o.fee),
                "currency": market.symbol(&o.code).map(|s| s.quote),
                "fee_usd": num(usd(market, &o.code, o.fee, o.done_ms.max(o.send_ms))),
                "strategy_id": o.strategy_id.map(|s| s.to_string()),
                "time_ms": o.done_ms.max(o.send_ms),
            })
        })
        .collect();
    Ok(paged(cx.ep, cx.valid, rows))
}

fn recent(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let orders = conn.orders(Orders::OfUser(cx.user())).map_err(sql)?;
    let rows: Vec<Value> = fills(&orders)
        .into_iter()
        .rev()
        .map(|(t, o, tr)| {
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
        let (mut realised, mut fees) = (0.0, 0.0);
        for (code, pos) in positions(&orders) {
            realised += usd(market, &code, pos.realised - pos.fees, now);
            fees += usd(market, &code, pos.fees, now);
        }
        rows.push((
            realised,
            id,
            json!({
                "id": id,
                "name": p.get("name").cloned().unwrap_or(Value::Null),
                "realised_net_usd": num(realised),
                "fees_usd": num(fees),
                "orders": orders.len(),
                "filled_orders": orders.iter().filter(|o| o.filled > 0.0).count(),
            }),
        ));
    }
    // Best first; the paging convention's "newest first" has no meaning for a ranking.
    rows.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok(paged(
        cx.ep,
        cx.valid,
        rows.into_iter().map(|(_, _, v)| v).collect(),
    ))
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
