//! Paper orders as stored: one row per order in ccxt's unified shape (its trades as a
//! JSON list), read and saved for paper trading.

use rusqlite::params;
use serde_json::Value;
use trading_model::market::Side;

use super::database::{StoreError, ms, unsigned};
use super::paper::PaperDb;

/// A paper order.
#[derive(Debug, Clone)]
pub struct Order {
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

pub const COLS: &str = "id, user_id, apikey_id, exchange, code, type, side, amount, price, status, \
    created_ms, send_ms, expire_ms, due_ms, done_ms, filled, cost, fee, trades, strategy_id, \
    flagged, checks, client_id";

/// Number of order columns [`from_row`] reads.
pub const COLUMNS: usize = 23;

/// The order columns with a table prefix, for joins.
pub fn prefixed_cols(prefix: &str) -> String {
    COLS.split(", ")
        .map(|c| format!("{prefix}{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Order> {
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
        created_ms: unsigned(r.get(10)?),
        send_ms: unsigned(r.get(11)?),
        expire_ms: unsigned(r.get(12)?),
        due_ms: unsigned(r.get(13)?),
        done_ms: unsigned(r.get(14)?),
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

/// Which paper orders to read, and in which order.
#[derive(Debug, Clone, Copy)]
pub enum Orders {
    /// A user's, oldest first.
    OfUser(i64),
    /// A user's that paid a fee, newest first.
    WithFeesOfUser(i64),
    /// A user's placed by hand (not by a strategy), newest first.
    ManualOfUser(i64),
    /// A user's placed by strategies.
    OfStrategiesOfUser(i64),
    /// A user's pending or open ones, newest first.
    LiveOfUser(i64),
    /// A user's closed, cancelled, expired or rejected ones, newest first.
    DoneOfUser(i64),
    /// A strategy's, oldest first.
    OfStrategy(i64),
    /// A strategy's pending or open ones, oldest first.
    LiveOfStrategy(i64),
    /// A strategy's flagged ones (left open by a force stop), oldest first.
    FlaggedOfStrategy(i64),
    /// An exchange key's, newest first.
    OfKey(i64),
    /// An exchange key's pending or open ones.
    LiveOfKey(i64),
    /// An exchange key's open ones.
    OpenOfKey(i64),
    /// Pending or open ones due at or before this time (ms), soonest first.
    Due(u64),
}

impl PaperDb<'_> {
    /// The orders `which` names.
    pub fn orders(&self, which: Orders) -> Result<Vec<Order>, StoreError> {
        let (cond, id) = match which {
            Orders::OfUser(u) => ("user_id = ?1 ORDER BY id", u),
            Orders::WithFeesOfUser(u) => ("user_id = ?1 AND fee > 0 ORDER BY id DESC", u),
            Orders::ManualOfUser(u) => ("user_id = ?1 AND strategy_id IS NULL ORDER BY id DESC", u),
            Orders::OfStrategiesOfUser(u) => ("user_id = ?1 AND strategy_id IS NOT NULL", u),
            Orders::LiveOfUser(u) => (
                "user_id = ?1 AND status IN ('pending', 'open') ORDER BY id DESC",
                u,
            ),
            Orders::DoneOfUser(u) => (
                "user_id = ?1 AND status IN ('closed', 'canceled', 'expired', 'rejected')
                 ORDER BY id DESC",
                u,
            ),
            Orders::OfStrategy(s) => ("strategy_id = ?1 ORDER BY id", s),
            Orders::LiveOfStrategy(s) => (
                "strategy_id = ?1 AND status IN ('pending', 'open') ORDER BY id",
                s,
            ),
            Orders::FlaggedOfStrategy(s) => ("strategy_id = ?1 AND flagged = 1 ORDER BY id", s),
            Orders::OfKey(k) => ("apikey_id = ?1 ORDER BY id DESC", k),
            Orders::LiveOfKey(k) => ("apikey_id = ?1 AND status IN ('pending', 'open')", k),
            Orders::OpenOfKey(k) => ("apikey_id = ?1 AND status = 'open'", k),
            Orders::Due(t) => (
                "status IN ('pending', 'open') AND due_ms <= ?1 ORDER BY due_ms, id",
                ms(t),
            ),
        };
        self.orders_where(cond, &[&id])
    }

    fn orders_where(
        &self,
        cond: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<Order>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT {COLS} FROM paper_orders WHERE {cond}"))?;
        let rows = stmt.query_map(args, from_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    pub fn order_by_id(&self, id: i64) -> Result<Option<Order>, StoreError> {
        Ok(self.orders_where("id = ?1", &[&id])?.into_iter().next())
    }

    pub fn save(&self, o: &Order) -> Result<(), StoreError> {
        self.conn.execute(
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

    /// How many orders strategy `strategy` has placed.
    pub fn orders_of_strategy_count(&self, strategy: i64) -> Result<i64, StoreError> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*) FROM paper_orders WHERE strategy_id = ?1",
            [strategy],
            |r| r.get(0),
        )?)
    }

    /// Flags the live orders of `strategy` (left open by a force stop).
    pub fn flag_live_orders(&self, strategy: i64) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE paper_orders SET flagged = 1
             WHERE strategy_id = ?1 AND status IN ('pending', 'open')",
            [strategy],
        )?;
        Ok(())
    }

    /// Detaches the orders of a deleted strategy (the exchange keeps them).
    pub fn release_orders(&self, strategy: i64) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE paper_orders SET strategy_id = NULL, flagged = 0 WHERE strategy_id = ?1",
            [strategy],
        )?;
        Ok(())
    }

    /// Clears an order's flag after a re-check and counts the check.
    pub fn mark_rechecked(&self, order: i64) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE paper_orders SET flagged = 0, checks = checks + 1 WHERE id = ?1",
            [order],
        )?;
        Ok(())
    }

    /// Orders placed through key `key` by hand (not by a strategy).
    pub fn manual_order_count(&self, key: i64) -> Result<i64, StoreError> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*) FROM paper_orders WHERE apikey_id = ?1 AND strategy_id IS NULL",
            [key],
            |r| r.get(0),
        )?)
    }
}

/// What an order asks for.
pub struct NewOrder<'a> {
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

impl PaperDb<'_> {
    /// Records a new pending order; `expire_ms` 0 never expires.
    pub fn insert_order(
        &self,
        n: &NewOrder<'_>,
        expire_ms: u64,
        now: u64,
    ) -> Result<Order, StoreError> {
        self.conn.execute(
            "INSERT INTO paper_orders (user_id, apikey_id, exchange, code, type, side, amount,
                 price, status, created_ms, send_ms, expire_ms, due_ms, done_ms, filled, cost,
                 fee, trades, strategy_id, flagged, checks, client_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, ?10, ?11, ?10, 0, 0, 0, 0,
                 '[]', ?12, 0, 0, ?13)",
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
        let id = self.conn.last_insert_rowid();
        Ok(self
            .order_by_id(id)?
            .ok_or(rusqlite::Error::QueryReturnedNoRows)?)
    }

    /// Sets an order's client id (the exchange's own when the caller gave none).
    pub fn set_client_id(&self, id: i64, client_id: &str) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE paper_orders SET client_id = ?2 WHERE id = ?1",
            params![id, client_id],
        )?;
        Ok(())
    }
}
