//! The simulated exchanges: exchange-key checks, paper orders (placed, delayed, repeated,
//! filled against the seeded books, expired, cancelled), paper balances per exchange key,
//! the request log and predefined exchange queries.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value, json};
use trading_model::ApiError;
use trading_model::market::{Market, ORIGIN_S, Side};
use trading_model::orders::{Fill, summarize, take};
use trading_model::strategy::{Event, State, transition};

use super::{Cx, NO_RECORD, db, iso, ms, num, refused, sql};
use crate::store::Store;

/// Starting paper balance of every asset on a new exchange key, in US dollars at the start
/// of the simulated history (so it depends on the seed only).
const START_USD: f64 = 10_000.0;

/// Most book snapshots a resting order is checked against per tick (one per second; a
/// longer gap is sampled evenly so a jump of days stays cheap).
const MAX_STEPS: u64 = 3_600;

/// Predefined `exchange-query/create-query` types.
const QUERY_TYPES: [&str; 4] = ["balance", "open_orders", "closed_orders", "trades"];

pub(super) fn call(cx: &Cx<'_>, path: &str) -> Result<Value, ApiError> {
    match path {
        "exchange-api-keys/test" => test_key(cx),
        "exchange-api-keys/delete" => delete_key(cx),
        "exchange-query/order-create" => order_create(cx),
        "exchange-query/list-open-orders" => list_orders(cx, true),
        "exchange-query/list-closed-orders" => list_orders(cx, false),
        "exchange-query/order-check" => order_check(cx),
        "exchange-query/order-cancel" => order_cancel(cx),
        "exchange-query/list-balances" => list_balances(cx),
        "exchange-query/list-exchange-requests" => list_requests(cx),
        "exchange-query/create-query" => create_query(cx),
        _ => Err(refused("path", "unhandled")),
    }
}

/// A paper order.
#[derive(Debug, Clone)]
pub(super) struct Order {
    pub id: i64,
    pub user_id: i64,
    pub apikey_id: i64,
    pub exchange: String,
    pub code: String,
    pub kind: String,
    pub side: Side,
    pub amount: f64,
    pub price: Option<f64>,
    pub status: String,
    pub created_ms: u64,
    pub send_ms: u64,
    /// 0: never expires.
    pub expire_ms: u64,
    /// Next time the engine looks at it (send time while pending, next second while open).
    pub due_ms: u64,
    /// When it reached a final status (0 while pending or open).
    pub done_ms: u64,
    pub filled: f64,
    pub cost: f64,
    pub fee: f64,
    pub trades: Vec<Value>,
    pub strategy_id: Option<i64>,
    /// Left open by a force stop; a later start re-checks it.
    pub flagged: bool,
    pub checks: i64,
    pub client_id: String,
}

const COLS: &str = "id, user_id, apikey_id, exchange, code, type, side, amount, price, status, \
    created_ms, send_ms, expire_ms, due_ms, done_ms, filled, cost, fee, trades, strategy_id, \
    flagged, checks, client_id";

/// Number of order columns [`from_row`] reads.
pub(super) const COLUMNS: usize = 23;

/// The order columns with a table prefix, for joins.
pub(super) fn prefixed_cols(prefix: &str) -> String {
    COLS.split(", ")
        .map(|c| format!("{prefix}{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

pub(super) fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Order> {
    let trades: String = r.get(18)?;
    let side: String = r.get(6)?;
    Ok(Order {
        id: r.get(0)?,
        user_id: r.get(1)?,
        apikey_id: r.get(2)?,
        exchange: r.get(3)?,
        code: r.get(4)?,
        kind: r.get(5)?,
        side: if side == "sell" {
            Side::Sell
        } else {
            Side::Buy
        },
        amount: r.get(7)?,
        price: r.get(8)?,
        status: r.get(9)?,
        created_ms: u(r.get(10)?),
        send_ms: u(r.get(11)?),
        expire_ms: u(r.get(12)?),
        due_ms: u(r.get(13)?),
        done_ms: u(r.get(14)?),
        filled: r.get(15)?,
        cost: r.get(16)?,
        fee: r.get(17)?,
        trades: serde_json::from_str(&trades).unwrap_or_default(),
        strategy_id: r.get(19)?,
        flagged: r.get::<_, i64>(20)? != 0,
        checks: r.get(21)?,
        client_id: r.get(22)?,
    })
}

pub(super) fn orders_where(
    conn: &Connection,
    cond: &str,
    args: &[&dyn rusqlite::ToSql],
) -> rusqlite::Result<Vec<Order>> {
    let mut stmt = conn.prepare(&format!("SELECT {COLS} FROM paper_orders WHERE {cond}"))?;
    let rows = stmt.query_map(args, from_row)?;
    rows.collect()
}

pub(super) fn order_by_id(conn: &Connection, id: i64) -> rusqlite::Result<Option<Order>> {
    Ok(orders_where(conn, "id = ?1", &[&id])?.into_iter().next())
}

fn save(conn: &Connection, o: &Order) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE paper_orders SET status = ?2, due_ms = ?3, done_ms = ?4, filled = ?5, cost = ?6,
             fee = ?7, trades = ?8, flagged = ?9, checks = ?10 WHERE id = ?1",
        params![
            o.id,
            o.status,
            ms(o.due_ms),
            ms(o.done_ms),
            o.filled,
            o.cost,
            o.fee,
            Value::Array(o.trades.clone()).to_string(),
            i64::from(o.flagged),
            o.checks
        ],
    )?;
    Ok(())
}

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

    fn is_live(&self) -> bool {
        self.status == "pending" || self.status == "open"
    }
}

/// Fields of one of `user`'s exchange keys, read with the caller's connection.
pub(super) fn key_fields(
    conn: &Connection,
    user: i64,
    id: i64,
) -> rusqlite::Result<Option<Map<String, Value>>> {
    let text: Option<String> = conn
        .query_row(
            "SELECT fields FROM records WHERE kind = 'exchange_api_key' AND user_id = ?1 AND id = ?2",
            params![user, id],
            |r| r.get(0),
        )
        .optional()?;
    Ok(text.and_then(|t| match serde_json::from_str(&t) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }))
}

/// Why a key cannot trade on `exchange` now, or `None` when it can.
pub(super) fn key_problem(
    conn: &Connection,
    user: i64,
    id: i64,
    exchange: &str,
) -> rusqlite::Result<Option<String>> {
    Ok(match key_fields(conn, user, id)? {
        None => Some(format!(
            "Exchange API key {id} is not a key of this account."
        )),
        Some(f) => {
            let status = f.get("status").and_then(Value::as_str).unwrap_or("active");
            let ex = f.get("exchange").and_then(Value::as_str).unwrap_or("");
            if status != "active" {
                Some(format!("Exchange API key {id} is {status}."))
            } else if ex != exchange {
                Some(format!(
                    "Exchange API key {id} is for {ex}, not for {exchange}."
                ))
            } else {
                None
            }
        }
    })
}

pub(super) fn log_request(
    conn: &Connection,
    user: i64,
    key: i64,
    exchange: &str,
    request: &str,
    detail: &Value,
    t: u64,
) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO paper_requests (user_id, apikey_id, exchange, request, detail, time_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![user, key, exchange, request, detail.to_string(), ms(t)],
    )?;
    Ok(())
}

/// Seeds a key's paper balances on first use: every asset traded on its exchange, worth
/// [`START_USD`] at the origin of the simulated history.
fn ensure_balances(
    conn: &Connection,
    market: &Market,
    key: i64,
    exchange: &str,
) -> rusqlite::Result<()> {
    let have: i64 = conn.query_row(
        "SELECT COUNT(*) FROM paper_balances WHERE apikey_id = ?1",
        [key],
        |r| r.get(0),
    )?;
    if have > 0 {
        return Ok(());
    }
    let mut assets: Vec<&str> = Vec::new();
    for s in market.symbols_of(exchange) {
        for a in [s.base, s.quote] {
            if !assets.contains(&a) {
                assets.push(a);
            }
        }
    }
    for a in assets {
        let usd = market.asset_usd(a, ORIGIN_S * 1000).unwrap_or(1.0);
        let amount = (START_USD / usd * 1e8).round() / 1e8;
        conn.execute(
            "INSERT OR IGNORE INTO paper_balances (apikey_id, asset, amount) VALUES (?1, ?2, ?3)",
            params![key, a, amount],
        )?;
    }
    Ok(())
}

fn balance(conn: &Connection, key: i64, asset: &str) -> rusqlite::Result<f64> {
    Ok(conn
        .query_row(
            "SELECT amount FROM paper_balances WHERE apikey_id = ?1 AND asset = ?2",
            params![key, asset],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0.0))
}

fn add_balance(conn: &Connection, key: i64, asset: &str, delta: f64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO paper_balances (apikey_id, asset, amount) VALUES (?1, ?2, ?3)
         ON CONFLICT (apikey_id, asset) DO UPDATE SET amount = amount + ?3",
        params![key, asset, delta],
    )?;
    Ok(())
}

/// Applies `fills` at time `t` to the order and the key's balances.
fn apply_fills(
    conn: &Connection,
    market: &Market,
    o: &mut Order,
    fills: &[Fill],
    t: u64,
) -> rusqlite::Result<()> {
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
        add_balance(conn, o.apikey_id, sym.base, base)?;
        add_balance(conn, o.apikey_id, sym.quote, quote)?;
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
fn send(conn: &Connection, market: &Market, o: &mut Order, t: u64) -> rusqlite::Result<()> {
    let problem = key_problem(conn, o.user_id, o.apikey_id, &o.exchange)?;
    let book = market.book(&o.code, t);
    let (Some(book), Some(sym)) = (book, market.symbol(&o.code)) else {
        o.status = "rejected".into();
        o.done_ms = t;
        return Ok(());
    };
    log_request(
        conn,
        o.user_id,
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
        log_request(
            conn,
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
            balance(conn, o.apikey_id, sym.quote)? + 1e-9 >= need
        }
        Side::Sell => balance(conn, o.apikey_id, sym.base)? + 1e-9 >= o.amount,
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
fn check_open(conn: &Connection, market: &Market, o: &mut Order, now: u64) -> rusqlite::Result<()> {
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
pub(super) fn run_due(store: &Store, market: &Market, now: u64) -> rusqlite::Result<()> {
    let conn = store.conn();
    let due = orders_where(
        &conn,
        "status IN ('pending', 'open') AND due_ms <= ?1 ORDER BY due_ms, id",
        &[&ms(now)],
    )?;
    for mut o in due {
        if o.status == "pending" {
            let t = o.send_ms;
            send(&conn, market, &mut o, t)?;
        }
        if o.status == "open" {
            check_open(&conn, market, &mut o, now)?;
        }
        save(&conn, &o)?;
    }
    Ok(())
}

/// What an order asks for.
pub(super) struct NewOrder<'a> {
    pub user: i64,
    pub key: i64,
    pub exchange: &'a str,
    pub code: &'a str,
    pub kind: &'a str,
    pub side: Side,
    pub amount: f64,
    pub price: Option<f64>,
    pub send_ms: u64,
    pub expire_after: u64,
    pub strategy_id: Option<i64>,
    pub client_id: String,
}

/// Records an order and sends it at once when its send time has come.
pub(super) fn place(
    conn: &Connection,
    market: &Market,
    n: &NewOrder<'_>,
    now: u64,
) -> rusqlite::Result<Order> {
    let expire_ms = if n.kind == "limit" && n.expire_after > 0 {
        n.send_ms.saturating_add(n.expire_after)
    } else {
        0
    };
    conn.execute(
        "INSERT INTO paper_orders (user_id, apikey_id, exchange, code, type, side, amount, price,
             status, created_ms, send_ms, expire_ms, due_ms, done_ms, filled, cost, fee, trades,
             strategy_id, flagged, checks, client_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, ?10, ?11, ?10, 0, 0, 0, 0, '[]',
             ?12, 0, 0, ?13)",
        params![
            n.user,
            n.key,
            n.exchange,
            n.code,
            n.kind,
            n.side.as_str(),
            n.amount,
            n.price,
            ms(now),
            ms(n.send_ms),
            ms(expire_ms),
            n.strategy_id,
            n.client_id
        ],
    )?;
    let id = conn.last_insert_rowid();
    let mut o = order_by_id(conn, id)?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
    if o.client_id.is_empty() {
        o.client_id = format!("paper{id}");
        conn.execute(
            "UPDATE paper_orders SET client_id = ?2 WHERE id = ?1",
            params![id, o.client_id],
        )?;
    }
    if o.send_ms <= now {
        let t = o.send_ms;
        send(conn, market, &mut o, t)?;
        if o.status == "open" {
            check_open(conn, market, &mut o, now)?;
        }
        save(conn, &o)?;
    }
    Ok(o)
}

/// Cancels a live order at `t` (logged as a request to its exchange).
pub(super) fn cancel(conn: &Connection, o: &mut Order, t: u64) -> rusqlite::Result<()> {
    log_request(
        conn,
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
    save(conn, o)
}

fn decimal(cx: &Cx<'_>, name: &str) -> Result<Option<f64>, ApiError> {
    match cx.valid.text(name) {
        None => Ok(None),
        Some(t) => match t.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(Some(v)),
            _ => Err(refused(name, format!("{name} must be a positive number."))),
        },
    }
}

fn order_create(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let market = &cx.env.market;
    let key = cx.id("apikey")?;
    let code = cx
        .valid
        .text("code")
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let Some(sym) = market.symbol(&code) else {
        return Err(refused("code", "Unknown trading code."));
    };
    let exchange = sym.exchange;
    let kind = cx.valid.text("ordertype").unwrap_or("market").to_owned();
    let side = match cx
        .valid
        .text("side")
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("buy") => Side::Buy,
        Some("sell") => Side::Sell,
        _ => return Err(refused("side", "side must be buy or sell.")),
    };
    let amount = sym.round_amount(decimal(cx, "quantity")?.unwrap_or(0.0));
    if amount < sym.min || amount <= 0.0 || !amount.is_finite() {
        return Err(refused(
            "quantity",
            format!("The smallest amount of {} is {}.", sym.code, sym.min),
        ));
    }
    let price = decimal(cx, "price")?.map(|p| sym.round_price(p));
    if price.is_some_and(|p| !p.is_finite() || p <= 0.0) {
        return Err(refused("price", "price must be a positive number."));
    }
    if kind == "limit" && price.is_none() {
        return Err(refused("price", "A limit order needs a price."));
    }
    let repeat = cx.valid.integer("repeat_times").unwrap_or(1);
    if !(1..=10).contains(&repeat) {
        return Err(refused("repeat_times", "repeat_times is 1 to 10."));
    }
    let interval = cx.valid.integer("repeat_interval").unwrap_or(10_000);
    if interval < 1 {
        return Err(refused(
            "repeat_interval",
            "repeat_interval is at least 1 ms.",
        ));
    }
    let expire_after = cx.valid.integer("expire_after").unwrap_or(0);
    if expire_after < 0 {
        return Err(refused("expire_after", "expire_after cannot be negative."));
    }
    let now = cx.now();
    let first = cx
        .valid
        .integer("order_send_time")
        .map_or(now, |t| u64::try_from(t).unwrap_or(0).max(now));
    let conn = cx.store().conn();
    if let Some(problem) = key_problem(&conn, cx.user(), key, exchange).map_err(sql)? {
        return Err(refused("apikey", problem));
    }
    let mut out = Vec::new();
    for i in 0..repeat {
        let n = NewOrder {
            user: cx.user(),
            key,
            exchange,
            code: &sym.code,
            kind: &kind,
            side,
            amount,
            price: if kind == "limit" { price } else { None },
            send_ms: first
                .saturating_add(u64::try_from(i.saturating_mul(interval)).unwrap_or(u64::MAX)),
            expire_after: u64::try_from(expire_after).unwrap_or(0),
            strategy_id: None,
            client_id: String::new(),
        };
        out.push(place(&conn, market, &n, now).map_err(sql)?.to_json(market));
    }
    Ok(json!({"orders": out, "count": out.len()}))
}

fn own_order(cx: &Cx<'_>, conn: &Connection) -> Result<Order, ApiError> {
    let id = cx.id("id")?;
    match order_by_id(conn, id).map_err(sql)? {
        Some(o) if o.user_id == cx.user() => Ok(o),
        _ => Err(refused("id", NO_RECORD)),
    }
}

fn list_orders(cx: &Cx<'_>, open: bool) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let statuses = if open {
        "('pending', 'open')"
    } else {
        "('closed', 'canceled', 'expired', 'rejected')"
    };
    let key = cx
        .valid
        .text("apikey")
        .and_then(|s| s.trim().parse::<i64>().ok());
    let code = cx.valid.text("code").map(|c| c.trim().to_ascii_lowercase());
    let rows = orders_where(
        &conn,
        &format!("user_id = ?1 AND status IN {statuses} ORDER BY id DESC"),
        &[&cx.user()],
    )
    .map_err(sql)?;
    Ok(Value::Array(
        rows.iter()
            .filter(|o| key.is_none_or(|k| o.apikey_id == k))
            .filter(|o| code.as_deref().is_none_or(|c| o.code == c))
            .map(|o| o.to_json(&cx.env.market))
            .collect(),
    ))
}

fn order_check(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let mut o = own_order(cx, &conn)?;
    o.checks += 1;
    log_request(
        &conn,
        o.user_id,
        o.apikey_id,
        &o.exchange,
        "fetchOrder",
        &json!({"order": o.id.to_string()}),
        cx.now(),
    )
    .map_err(sql)?;
    save(&conn, &o).map_err(sql)?;
    Ok(o.to_json(&cx.env.market))
}

fn order_cancel(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let mut o = own_order(cx, &conn)?;
    if !o.is_live() {
        return Err(refused(
            "id",
            format!(
                "The order is {}; only open or pending orders can be cancelled.",
                o.status
            ),
        ));
    }
    cancel(&conn, &mut o, cx.now()).map_err(sql)?;
    Ok(o.to_json(&cx.env.market))
}

/// Every exchange key of the caller as `(id, fields)`, oldest first.
pub(super) fn keys_of(
    conn: &Connection,
    user: i64,
) -> rusqlite::Result<Vec<(i64, Map<String, Value>)>> {
    records_of(conn, "exchange_api_key", user)
}

/// Every generic record of `kind` of the caller as `(id, fields)`, oldest first; rows
/// whose fields are not a JSON object are skipped.
pub(super) fn records_of(
    conn: &Connection,
    kind: &str,
    user: i64,
) -> rusqlite::Result<Vec<(i64, Map<String, Value>)>> {
    let mut stmt = conn
        .prepare("SELECT id, fields FROM records WHERE kind = ?1 AND user_id = ?2 ORDER BY id")?;
    let rows = stmt.query_map(rusqlite::params![kind, user], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, text) = row?;
        if let Ok(Value::Object(m)) = serde_json::from_str(&text) {
            out.push((id, m));
        }
    }
    Ok(out)
}

fn balances_of(
    conn: &Connection,
    market: &Market,
    key: i64,
    exchange: &str,
) -> rusqlite::Result<Value> {
    ensure_balances(conn, market, key, exchange)?;
    let open = orders_where(conn, "apikey_id = ?1 AND status = 'open'", &[&key])?;
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
    let mut stmt = conn
        .prepare("SELECT asset, amount FROM paper_balances WHERE apikey_id = ?1 ORDER BY asset")?;
    let rows = stmt.query_map([key], |r| Ok((r.get::<_, String>(0)?, r.get::<_, f64>(1)?)))?;
    let mut out = Map::new();
    for row in rows {
        let (asset, total) = row?;
        let u = used.get(&asset).copied().unwrap_or(0.0).min(total.max(0.0));
        out.insert(
            asset,
            json!({"free": num(total - u), "used": num(u), "total": num(total)}),
        );
    }
    Ok(Value::Object(out))
}

fn list_balances(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let only = cx
        .valid
        .text("apikey")
        .and_then(|s| s.trim().parse::<i64>().ok());
    let mut out = Vec::new();
    for (id, f) in keys_of(&conn, cx.user()).map_err(sql)? {
        if only.is_some_and(|k| k != id) {
            continue;
        }
        let exchange = f
            .get("exchange")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let balances = balances_of(&conn, &cx.env.market, id, &exchange).map_err(sql)?;
        log_request(
            &conn,
            cx.user(),
            id,
            &exchange,
            "fetchBalance",
            &json!({}),
            cx.now(),
        )
        .map_err(sql)?;
        out.push(json!({
            "apikey": id,
            "exchange": exchange,
            "label": f.get("label").cloned().unwrap_or(Value::Null),
            "status": f.get("status").cloned().unwrap_or(json!("active")),
            "balances": balances,
        }));
    }
    if let Some(k) = only {
        if out.is_empty() {
            return Err(refused(
                "apikey",
                format!("Exchange API key {k} is not a key of this account."),
            ));
        }
    }
    Ok(Value::Array(out))
}

fn list_requests(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let mut stmt = conn
        .prepare(
            "SELECT id, apikey_id, exchange, request, detail, time_ms FROM paper_requests
             WHERE user_id = ?1 ORDER BY id DESC LIMIT ?2",
        )
        .map_err(sql)?;
    let limit = cx.valid.integer("limit").unwrap_or(100).clamp(1, 1000);
    let rows = stmt
        .query_map(params![cx.user(), limit], |r| {
            let detail: String = r.get(4)?;
            let t: i64 = r.get(5)?;
            Ok(json!({
                "id": r.get::<_, i64>(0)?,
                "apikey": r.get::<_, i64>(1)?,
                "exchange": r.get::<_, String>(2)?,
                "request": r.get::<_, String>(3)?,
                "detail": serde_json::from_str::<Value>(&detail).unwrap_or(Value::Null),
                "time_ms": t,
                "datetime": iso(u(t)),
            }))
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    Ok(Value::Array(rows))
}

/// `create-query`: runs a predefined query through the key against its simulated exchange
/// and stores the query with the answer it got.
fn create_query(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let key = cx.id("apikey")?;
    let kind = cx
        .valid
        .text("exchange_query")
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let (exchange, result) = {
        let conn = cx.store().conn();
        let Some(f) = key_fields(&conn, cx.user(), key).map_err(sql)? else {
            return Err(refused("apikey", NO_RECORD));
        };
        let exchange = f
            .get("exchange")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if !QUERY_TYPES.contains(&kind.as_str()) {
            return Err(ApiError::validation(trading_model::ValidationFailure {
                missing_information: vec![json!({"parameter": "exchange_query",
                    "error": "Unknown predefined query.", "supported": QUERY_TYPES})],
                ..Default::default()
            }));
        }
        let market = &cx.env.market;
        let result = match kind.as_str() {
            "balance" => balances_of(&conn, market, key, &exchange).map_err(sql)?,
            "trades" => {
                let rows =
                    orders_where(&conn, "apikey_id = ?1 ORDER BY id DESC", &[&key]).map_err(sql)?;
                Value::Array(rows.iter().flat_map(|o| o.trades.clone()).collect())
            }
            k => {
                let open = k == "open_orders";
                let rows =
                    orders_where(&conn, "apikey_id = ?1 ORDER BY id DESC", &[&key]).map_err(sql)?;
                Value::Array(
                    rows.iter()
                        .filter(|o| o.is_live() == open)
                        .map(|o| o.to_json(market))
                        .collect(),
                )
            }
        };
        log_request(
            &conn,
            cx.user(),
            key,
            &exchange,
            &format!("query:{kind}"),
            &json!({}),
            cx.now(),
        )
        .map_err(sql)?;
        (exchange, result)
    };
    let mut fields = Map::new();
    fields.insert("apikey".into(), json!(key.to_string()));
    fields.insert("exchange_query".into(), json!(kind));
    fields.insert("exchange".into(), json!(exchange));
    fields.insert("result".into(), result);
    fields.insert("run_ms".into(), json!(cx.now()));
    let rec = cx
        .store()
        .insert_record("exchange_query", cx.user(), &fields, None, cx.now())
        .map_err(db)?;
    Ok(crate::resources::answer(&rec))
}

/// The simulated exchange's verdict on stored credentials: token and secret must be
/// printable key material (letters, digits, `-`, `_`), the secret must differ from the
/// token, and exchanges that need a passphrase must have one.
fn verdict(
    market: &Market,
    exchange: &str,
    sealed: &Map<String, Value>,
) -> Vec<(&'static str, bool)> {
    let get = |k: &str| sealed.get(k).and_then(Value::as_str).unwrap_or("");
    let shaped = |s: &str| {
        s.len() >= 5
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let needs = market.exchange(exchange).is_some_and(|e| e.needs_password);
    vec![
        ("exchange_known", market.exchange(exchange).is_some()),
        ("token_shape", shaped(get("token"))),
        ("secret_shape", shaped(get("secret"))),
        ("secret_differs_from_token", get("token") != get("secret")),
        (
            "password_present",
            !needs || !get("password").trim().is_empty(),
        ),
    ]
}

fn test_key(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let id = cx.id("id")?;
    let store = cx.store();
    let rec = store
        .get_record("exchange_api_key", cx.user(), id)
        .map_err(db)?
        .ok_or_else(|| refused("id", NO_RECORD))?;
    let sealed = store
        .sealed_fields("exchange_api_key", cx.user(), id)
        .map_err(db)?
        .unwrap_or_default();
    let exchange = rec
        .fields
        .get("exchange")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let checks = verdict(&cx.env.market, &exchange, &sealed);
    let passed = checks.iter().all(|(_, ok)| *ok);
    let was = rec
        .fields
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("active")
        .to_owned();
    // A key the exchange rejected stays disabled: its credentials cannot change (edit only
    // relabels), so a later pass would be the same stored secret.
    let status = if passed && was == "active" {
        "active"
    } else {
        "disabled"
    };
    let mut stopped = Vec::new();
    {
        let conn = store.conn();
        log_request(
            &conn,
            cx.user(),
            id,
            &exchange,
            "testCredentials",
            &json!({"passed": passed}),
            cx.now(),
        )
        .map_err(sql)?;
    }
    if status == "disabled" && was != "disabled" {
        let mut changes = Map::new();
        changes.insert("status".into(), json!("disabled"));
        store
            .update_record("exchange_api_key", cx.user(), id, &changes, cx.now())
            .map_err(db)?;
        // Strategies trading through it stop at once; their orders stay flagged.
        for s in super::strategies::running_using_key(store, cx.user(), id).map_err(sql)? {
            if let Ok((State::Stopped, fx)) = transition(State::Running, Event::KeyDisabled) {
                super::strategies::apply_stop(cx, s, &fx, "exchange API key disabled")
                    .map_err(sql)?;
                stopped.push(s);
            }
        }
    }
    Ok(json!({
        "id": id,
        "exchange": exchange,
        "valid": passed,
        "status": status,
        "checks": checks.iter().map(|(name, ok)| json!({"check": name, "passed": ok})).collect::<Vec<_>>(),
        "stopped_strategies": stopped,
        "message": if passed { "The exchange accepted the credentials." } else { "The exchange rejected the credentials; the key is disabled." },
    }))
}

fn delete_key(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let id = cx.id("id")?;
    let store = cx.store();
    if store
        .get_record("exchange_api_key", cx.user(), id)
        .map_err(db)?
        .is_none()
    {
        return Err(refused("id", NO_RECORD));
    }
    let users = super::strategies::running_using_key(store, cx.user(), id).map_err(sql)?;
    if !users.is_empty() {
        return Err(ApiError::validation(trading_model::ValidationFailure {
            missing_information: vec![json!({
                "parameter": "id",
                "error": "A running strategy uses this exchange API key; stop it first.",
                "strategies": users,
            })],
            ..Default::default()
        }));
    }
    store
        .delete_record("exchange_api_key", cx.user(), id)
        .map_err(db)?;
    let conn = store.conn();
    // Orders of a deleted key could never be managed again: the exchange cancels them.
    let live = orders_where(
        &conn,
        "apikey_id = ?1 AND status IN ('pending', 'open')",
        &[&id],
    )
    .map_err(sql)?;
    let cancelled = live.len();
    for mut o in live {
        cancel(&conn, &mut o, cx.now()).map_err(sql)?;
    }
    conn.execute("DELETE FROM paper_balances WHERE apikey_id = ?1", [id])
        .map_err(sql)?;
    Ok(json!({"id": id, "deleted": true, "orders_cancelled": cancelled}))
}
