//! Paper orders: the stored order (ccxt's unified order shape), sending it to the
//! simulated books at its time, filling resting limit orders, placing and cancelling, and
//! the worker that runs what is due.

use serde_json::{Map, Value, json};
use trading_model::market::{Market, Side};
use trading_model::orders::{Fill, summarize, take};

use super::balances::{ensure_balances, key_problem};
use super::call_context::{iso, num};
use crate::store::{NewOrder, Order, Orders, PaperDb, Store, StoreError};

/// Most book snapshots a resting order is checked against per tick (one per second; a
/// longer gap is sampled evenly so a jump of days stays cheap).
const MAX_STEPS: u64 = 3_600;

impl Order {
    /// The ccxt unified order (what `c_payload` holds).
    pub fn to_json(&self, market: &Market) -> Value {
        let sym = market.symbol(&self.code);
        let pair = sym.map_or_else(|| self.code.clone(), |s| s.pair());
        let quote = sym.map_or("", |s| s.quote);
        let remaining = (self.amount - self.filled).max(0.0);
        let average = if self.filled > 0.0 {
            Some(self.cost / self.filled)
        } else {
            None
        };
        let last_trade = self
            .trades
            .last()
            .and_then(|t| t["timestamp"].as_u64())
            .map_or(Value::Null, |t| json!(t));
        json!({
            "id": self.id.to_string(),
            "clientOrderId": self.client_id,
            "timestamp": self.send_ms,
            "datetime": iso(self.send_ms),
            "lastTradeTimestamp": last_trade,
            "symbol": pair,
            "type": self.kind,
            "side": self.side.as_str(),
            "price": self.price.map_or_else(|| average.map_or(Value::Null, num), num),
            "average": average.map_or(Value::Null, num),
            "amount": num(self.amount),
            "filled": num(self.filled),
            "remaining": num(if remaining < trading_model::orders::DUST { 0.0 } else { remaining }),
            "cost": num(self.cost),
            "status": self.status,
            "fee": {"cost": num(self.fee), "currency": quote},
            "trades": self.trades,
            "info": {
                "code": self.code,
                "exchange": self.exchange,
                "apikey": self.apikey_id.to_string(),
                "strategy_id": self.strategy_id.map_or(Value::Null, |s| json!(s.to_string())),
                "created_ms": self.created_ms,
                "expire_ms": self.expire_ms,
                "completed_ms": self.done_ms,
                "flagged": self.flagged,
                "checks": self.checks,
            },
        })
    }

    pub(crate) fn is_live(&self) -> bool {
        self.status == "pending" || self.status == "open"
    }
}

/// Applies `fills` at time `t` to the order and the key's balances.
fn apply_fills(
    conn: &PaperDb<'_>,
    market: &Market,
    o: &mut Order,
    fills: &[Fill],
    t: u64,
) -> Result<(), StoreError> {
    let Some(sym) = market.symbol(&o.code) else {
        return Ok(());
    };
    let rate = sym.exchange_info().fee;
    for f in fills {
        let cost = f.price * f.qty;
        let fee = cost * rate;
        o.filled += f.qty;
        o.cost += cost;
        o.fee += fee;
        let n = o.trades.len() + 1;
        o.trades.push(json!({
            "id": format!("{}-{n}", o.id),
            "order": o.id.to_string(),
            "timestamp": t,
            "datetime": iso(t),
            "symbol": sym.pair(),
            "side": o.side.as_str(),
            "takerOrMaker": if o.kind == "market" { "taker" } else { "maker" },
            "price": num(f.price),
            "amount": num(f.qty),
            "cost": num(cost),
            "fee": {"cost": num(fee), "currency": sym.quote},
        }));
        let (base, quote) = match o.side {
            Side::Buy => (f.qty, -cost - fee),
            Side::Sell => (-f.qty, cost - fee),
        };
        conn.add_balance(o.apikey_id, sym.base, base)?;
        conn.add_balance(o.apikey_id, sym.quote, quote)?;
    }
    if o.amount - o.filled <= trading_model::orders::DUST {
        o.status = "closed".into();
        o.done_ms = t;
    }
    Ok(())
}

/// Sends a pending order at its send time `t`: the key is re-checked, balances must cover
/// it, a market order takes what the book holds (the rest is cancelled, as
/// immediate-or-cancel), a limit order takes what crosses and rests.
fn send(conn: &PaperDb<'_>, market: &Market, o: &mut Order, t: u64) -> Result<(), StoreError> {
    let problem = key_problem(conn, o.user_id, o.apikey_id, &o.exchange)?;
    let book = market.book(&o.code, t);
    let (Some(book), Some(sym)) = (book, market.symbol(&o.code)) else {
        o.status = "rejected".into();
        o.done_ms = t;
        return Ok(());
    };
    conn.log_request(o.user_id,
        o.apikey_id,
        &o.exchange,
        "createOrder",
        &json!({"order": o.id.to_string(), "symbol": sym.pair(), "type": o.kind, "side": o.side.as_str(),
                "amount": num(o.amount), "price": o.price.map_or(Value::Null, num)}),
        t,
    )?;
    if let Some(reason) = problem {
        o.status = "rejected".into();
        o.done_ms = t;
        conn.log_request(
            o.user_id,
            o.apikey_id,
            &o.exchange,
            "rejected",
            &json!({"order": o.id.to_string(), "reason": reason}),
            t,
        )?;
        return Ok(());
    }
    ensure_balances(conn, market, o.apikey_id, &o.exchange)?;
    let limit = if o.kind == "limit" { o.price } else { None };
    let fills = take(&book, o.side, o.amount, limit);
    let affordable = match o.side {
        Side::Buy => {
            let s = summarize(o.amount, &fills);
            let need = match o.price {
                Some(p) if o.kind == "limit" => p * o.amount,
                _ => s.cost,
            } * (1.0 + sym.exchange_info().fee);
            conn.balance(o.apikey_id, sym.quote)? + 1e-9 >= need
        }
        Side::Sell => conn.balance(o.apikey_id, sym.base)? + 1e-9 >= o.amount,
    };
    if !affordable {
        o.status = "rejected".into();
        o.done_ms = t;
        return Ok(());
    }
    o.status = "open".into();
    apply_fills(conn, market, o, &fills, t)?;
    if o.status == "open" {
        if o.kind == "market" {
            o.status = "canceled".into();
            o.done_ms = t;
        } else {
            o.due_ms = t + 1000;
        }
    }
    Ok(())
}

/// Checks a resting limit order against every book snapshot from its due time to `now`.
fn check_open(
    conn: &PaperDb<'_>,
    market: &Market,
    o: &mut Order,
    now: u64,
) -> Result<(), StoreError> {
    let gap = now.saturating_sub(o.due_ms);
    let step = (gap / MAX_STEPS).max(1000);
    let mut t = o.due_ms;
    while t <= now && o.status == "open" {
        if o.expire_ms > 0 && t >= o.expire_ms {
            o.status = "expired".into();
            o.done_ms = o.expire_ms;
            break;
        }
        if let Some(book) = market.book(&o.code, t) {
            let fills = take(&book, o.side, o.amount - o.filled, o.price);
            apply_fills(conn, market, o, &fills, t)?;
        }
        t += step;
    }
    o.due_ms = t;
    Ok(())
}

/// Sends due pending orders and checks due open ones, oldest first.
pub(crate) fn run_due(store: &Store, market: &Market, now: u64) -> Result<(), StoreError> {
    let conn = store.paper();
    let due = conn.orders(Orders::Due(now))?;
    for mut o in due {
        if o.status == "pending" {
            let t = o.send_ms;
            send(&conn, market, &mut o, t)?;
        }
        if o.status == "open" {
            check_open(&conn, market, &mut o, now)?;
        }
        conn.save(&o)?;
    }
    Ok(())
}

/// Records an order and sends it at once when its send time has come.
pub(crate) fn place(
    conn: &PaperDb<'_>,
    market: &Market,
    n: &NewOrder<'_>,
    now: u64,
) -> Result<Order, StoreError> {
    let expire_ms = if n.kind == "limit" && n.expire_after > 0 {
        n.send_ms.saturating_add(n.expire_after)
    } else {
        0
    };
    let mut o = conn.insert_order(n, expire_ms, now)?;
    if o.client_id.is_empty() {
        o.client_id = format!("paper{}", o.id);
        conn.set_client_id(o.id, &o.client_id)?;
    }
    if o.send_ms <= now {
        let t = o.send_ms;
        send(conn, market, &mut o, t)?;
        if o.status == "open" {
            check_open(conn, market, &mut o, now)?;
        }
        conn.save(&o)?;
    }
    Ok(o)
}

/// Cancels a live order at `t` (logged as a request to its exchange).
pub(crate) fn cancel(conn: &PaperDb<'_>, o: &mut Order, t: u64) -> Result<(), StoreError> {
    conn.log_request(
        o.user_id,
        o.apikey_id,
        &o.exchange,
        "cancelOrder",
        &json!({"order": o.id.to_string()}),
        t,
    )?;
    o.status = "canceled".into();
    o.done_ms = t;
    o.flagged = false;
    conn.save(o)
}

pub(crate) fn balances_of(
    conn: &PaperDb<'_>,
    market: &Market,
    key: i64,
    exchange: &str,
) -> Result<Value, StoreError> {
    ensure_balances(conn, market, key, exchange)?;
    let open = conn.orders(Orders::OpenOfKey(key))?;
    let mut used: std::collections::BTreeMap<String, f64> = Default::default();
    for o in &open {
        let Some(sym) = market.symbol(&o.code) else {
            continue;
        };
        let left = o.amount - o.filled;
        match o.side {
            Side::Buy => {
                *used.entry(sym.quote.into()).or_default() += left * o.price.unwrap_or(0.0)
            }
            Side::Sell => *used.entry(sym.base.into()).or_default() += left,
        }
    }
    let mut out = Map::new();
    for (asset, total) in conn.balances(key)? {
        let u = used.get(&asset).copied().unwrap_or(0.0).min(total.max(0.0));
        out.insert(
            asset,
            json!({"free": num(total - u), "used": num(u), "total": num(total)}),
        );
    }
    Ok(Value::Object(out))
}
