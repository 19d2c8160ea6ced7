//! Paper trading's repository: the tables of orders, strategies, their transactions,
//! exchange requests, balances and exports, and [`PaperDb`], the handle paper trading
//! runs its statements through. A handle holds the database for one unit of work (an
//! order's fill and the balances it moves change together).

use std::sync::MutexGuard;

use rusqlite::Connection;

use super::database::{Store, StoreError, unsigned};

/// Tables this module keeps (run at every start; idempotent). Ids start above 1000 like
/// the records' (several id parameters have a minimum length of 2).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS paper_orders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL,
    apikey_id INTEGER NOT NULL,
    exchange TEXT NOT NULL,
    code TEXT NOT NULL,
    type TEXT NOT NULL,
    side TEXT NOT NULL,
    amount REAL NOT NULL,
    price REAL,
    status TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    send_ms INTEGER NOT NULL,
    expire_ms INTEGER NOT NULL,
    due_ms INTEGER NOT NULL,
    done_ms INTEGER NOT NULL,
    filled REAL NOT NULL,
    cost REAL NOT NULL,
    fee REAL NOT NULL,
    trades TEXT NOT NULL,
    strategy_id INTEGER,
    flagged INTEGER NOT NULL,
    checks INTEGER NOT NULL,
    client_id TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS paper_orders_due ON paper_orders (status, due_ms);
CREATE INDEX IF NOT EXISTS paper_orders_owner ON paper_orders (user_id, id);
CREATE TABLE IF NOT EXISTS paper_strategies (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL,
    state TEXT NOT NULL,
    started_ms INTEGER NOT NULL,
    next_due_ms INTEGER NOT NULL,
    slice INTEGER NOT NULL,
    position INTEGER NOT NULL,
    stopped_ms INTEGER NOT NULL,
    note TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS paper_strategies_due ON paper_strategies (state, next_due_ms);
CREATE TABLE IF NOT EXISTS paper_transactions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL,
    strategy_id INTEGER NOT NULL,
    order_id INTEGER NOT NULL,
    fields TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS paper_transactions_owner ON paper_transactions (user_id, strategy_id, id);
CREATE TABLE IF NOT EXISTS paper_requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL,
    apikey_id INTEGER NOT NULL,
    exchange TEXT NOT NULL,
    request TEXT NOT NULL,
    detail TEXT NOT NULL,
    time_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS paper_requests_owner ON paper_requests (user_id, id);
CREATE TABLE IF NOT EXISTS paper_balances (
    apikey_id INTEGER NOT NULL,
    asset TEXT NOT NULL,
    amount REAL NOT NULL,
    PRIMARY KEY (apikey_id, asset)
);
CREATE TABLE IF NOT EXISTS paper_exports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL,
    system TEXT NOT NULL,
    type TEXT NOT NULL,
    symbol TEXT NOT NULL,
    rows INTEGER NOT NULL,
    filename TEXT NOT NULL,
    content BLOB NOT NULL,
    created_ms INTEGER NOT NULL,
    ready_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL
);
INSERT INTO sqlite_sequence (name, seq) SELECT 'paper_orders', 1000
    WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'paper_orders');
INSERT INTO sqlite_sequence (name, seq) SELECT 'paper_transactions', 1000
    WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'paper_transactions');
INSERT INTO sqlite_sequence (name, seq) SELECT 'paper_requests', 1000
    WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'paper_requests');
INSERT INTO sqlite_sequence (name, seq) SELECT 'paper_exports', 1000
    WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'paper_exports');
";

/// Paper trading's access to the database for one unit of work.
pub struct PaperDb<'a> {
    pub(super) conn: MutexGuard<'a, Connection>,
}

impl Store {
    /// A handle for paper trading's statements; the database is held until it is dropped.
    pub fn paper(&self) -> PaperDb<'_> {
        PaperDb { conn: self.conn() }
    }
}

impl PaperDb<'_> {
    /// When the next delayed or resting order, or running strategy, is due.
    pub fn next_due_ms(&self) -> Result<Option<u64>, StoreError> {
        let due: Option<i64> = self.conn.query_row(
            "SELECT MIN(t) FROM (
                 SELECT MIN(due_ms) AS t FROM paper_orders WHERE status IN ('pending', 'open')
                 UNION ALL
                 SELECT MIN(next_due_ms) AS t FROM paper_strategies WHERE state = 'running')",
            [],
            |r| r.get(0),
        )?;
        Ok(due.map(unsigned))
    }
}
