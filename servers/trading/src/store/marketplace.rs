//! The signal marketplace's repository: signals, their iterations (opened and closed at
//! market prices) and subscriptions, which the marketplace reads across accounts.

use rusqlite::{OptionalExtension, params};
use serde_json::{Value, json};
use trading_model::signal_payload::SignalPayload;

use super::database::{Store, StoreError, ms};

/// Tables this module keeps (run at every start; must be idempotent). Signals, their
/// iterations and subscriptions have their own tables because the marketplace reads them
/// across accounts; the per-account rest lives in the generic `records` table.
// The tables keep the `extras_` prefix of the module that first held the marketplace, so
// existing data directories load unchanged.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS extras_signals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL REFERENCES users(id),
    developer_key TEXT NOT NULL,
    name TEXT NOT NULL,
    code TEXT NOT NULL,
    side TEXT NOT NULL,
    description TEXT NOT NULL,
    custom TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS extras_signals_owner ON extras_signals (user_id, id);
CREATE TABLE IF NOT EXISTS extras_iterations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    signal_id INTEGER NOT NULL,
    number INTEGER NOT NULL,
    side TEXT NOT NULL,
    opened_ms INTEGER NOT NULL,
    open_price REAL NOT NULL,
    closed_ms INTEGER,
    close_price REAL
);
CREATE INDEX IF NOT EXISTS extras_iterations_signal ON extras_iterations (signal_id, id);
CREATE TABLE IF NOT EXISTS extras_subscriptions (
    user_id INTEGER NOT NULL REFERENCES users(id),
    signal_id INTEGER NOT NULL,
    since_ms INTEGER NOT NULL,
    PRIMARY KEY (user_id, signal_id)
);
-- Ids above 1000, like every other record id of the sandbox.
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'extras_signals', 1000 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'extras_signals');
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'extras_iterations', 1000 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'extras_iterations');
";

#[derive(Debug, Clone)]
pub(crate) struct Signal {
    pub(crate) id: i64,
    pub(crate) user_id: i64,
    pub(crate) name: String,
    pub(crate) code: String,
    pub(crate) side: String,
    pub(crate) description: String,
    pub(crate) custom: Vec<String>,
    pub(crate) created_ms: u64,
    pub(crate) updated_ms: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct Iteration {
    pub(crate) id: i64,
    pub(crate) signal_id: i64,
    pub(crate) number: i64,
    pub(crate) side: String,
    pub(crate) opened_ms: u64,
    pub(crate) open_price: f64,
    pub(crate) closed_ms: Option<u64>,
    pub(crate) close_price: Option<f64>,
}

const SIGNAL_COLUMNS: &str =
    "id, user_id, name, code, side, description, custom, created_ms, updated_ms";

fn signal_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Signal> {
    let custom: String = r.get(6)?;
    Ok(Signal {
        id: r.get(0)?,
        user_id: r.get(1)?,
        name: r.get(2)?,
        code: r.get(3)?,
        side: r.get(4)?,
        description: r.get(5)?,
        custom: serde_json::from_str(&custom).unwrap_or_default(),
        created_ms: u64::try_from(r.get::<_, i64>(7)?).unwrap_or(0),
        updated_ms: u64::try_from(r.get::<_, i64>(8)?).unwrap_or(0),
    })
}

fn iteration_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Iteration> {
    Ok(Iteration {
        id: r.get(0)?,
        signal_id: r.get(1)?,
        number: r.get(2)?,
        side: r.get(3)?,
        opened_ms: u64::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
        open_price: r.get(5)?,
        closed_ms: r
            .get::<_, Option<i64>>(6)?
            .map(|v| u64::try_from(v).unwrap_or(0)),
        close_price: r.get(7)?,
    })
}

impl Store {
    pub(crate) fn insert_signal(
        &self,
        user: i64,
        key: &str,
        p: &SignalPayload,
        now: u64,
    ) -> Result<i64, StoreError> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO extras_signals (user_id, developer_key, name, code, side, description, custom, created_ms, updated_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
            params![
                user,
                key,
                p.name,
                p.code,
                p.side,
                p.description,
                json!(p.custom).to_string(),
                ms(now)
            ],
        )?;
        Ok(conn.last_insert_rowid())
    }

    pub(crate) fn signal(&self, id: i64) -> Result<Option<Signal>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                &format!("SELECT {SIGNAL_COLUMNS} FROM extras_signals WHERE id = ?1"),
                [id],
                signal_row,
            )
            .optional()?)
    }

    /// Signals oldest first, of one developer or of everybody.
    pub(crate) fn signals(&self, owner: Option<i64>) -> Result<Vec<Signal>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {SIGNAL_COLUMNS} FROM extras_signals WHERE ?1 IS NULL OR user_id = ?1 ORDER BY id"
        ))?;
        let rows = stmt
            .query_map([owner], signal_row)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    pub(crate) fn update_signal(&self, s: &Signal, now: u64) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE extras_signals SET name = ?1, custom = ?2, updated_ms = ?3 WHERE id = ?4",
            params![s.name, json!(s.custom).to_string(), ms(now), s.id],
        )?;
        Ok(())
    }

    /// Iterations of a signal, oldest first.
    pub(crate) fn iterations(&self, signal: i64) -> Result<Vec<Iteration>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, signal_id, number, side, opened_ms, open_price, closed_ms, close_price
             FROM extras_iterations WHERE signal_id = ?1 ORDER BY id",
        )?;
        let rows = stmt
            .query_map([signal], iteration_row)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    pub(crate) fn open_iteration(
        &self,
        signal: i64,
        number: i64,
        side: &str,
        now: u64,
        price: f64,
    ) -> Result<i64, StoreError> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO extras_iterations (signal_id, number, side, opened_ms, open_price)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![signal, number, side, ms(now), price],
        )?;
        Ok(conn.last_insert_rowid())
    }

    pub(crate) fn close_iteration(&self, id: i64, now: u64, price: f64) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE extras_iterations SET closed_ms = ?1, close_price = ?2 WHERE id = ?3",
            params![ms(now), price, id],
        )?;
        Ok(())
    }

    pub(crate) fn delete_iterations(&self, signal: i64) -> Result<usize, StoreError> {
        Ok(self.conn().execute(
            "DELETE FROM extras_iterations WHERE signal_id = ?1",
            [signal],
        )?)
    }

    pub(crate) fn delete_signal(&self, signal: i64) -> Result<(), StoreError> {
        let conn = self.conn();
        conn.execute(
            "DELETE FROM extras_iterations WHERE signal_id = ?1",
            [signal],
        )?;
        conn.execute(
            "DELETE FROM extras_subscriptions WHERE signal_id = ?1",
            [signal],
        )?;
        conn.execute("DELETE FROM extras_signals WHERE id = ?1", [signal])?;
        Ok(())
    }

    /// `(signal id, since)` of a user's subscriptions, oldest first.
    pub(crate) fn subscriptions(&self, user: i64) -> Result<Vec<(i64, u64)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT signal_id, since_ms FROM extras_subscriptions WHERE user_id = ?1 ORDER BY since_ms, signal_id",
        )?;
        let rows = stmt
            .query_map([user], |r| {
                Ok((r.get(0)?, u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0)))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    pub(crate) fn subscribers(&self, signal: i64) -> Result<u64, StoreError> {
        let n: i64 = self.conn().query_row(
            "SELECT COUNT(*) FROM extras_subscriptions WHERE signal_id = ?1",
            [signal],
            |r| r.get(0),
        )?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Subscribes (`Some(since)`) or unsubscribes (`None`); false when nothing changed.
    pub(crate) fn set_subscription(
        &self,
        user: i64,
        signal: i64,
        since: Option<u64>,
    ) -> Result<bool, StoreError> {
        let conn = self.conn();
        let n = match since {
            Some(t) => conn.execute(
                "INSERT OR IGNORE INTO extras_subscriptions (user_id, signal_id, since_ms) VALUES (?1, ?2, ?3)",
                params![user, signal, ms(t)],
            )?,
            None => conn.execute(
                "DELETE FROM extras_subscriptions WHERE user_id = ?1 AND signal_id = ?2",
                params![user, signal],
            )?,
        };
        Ok(n == 1)
    }

    /// Users enrolled in a competition, in order of enrolment.
    pub(crate) fn entrants(&self, competition: i64) -> Result<Vec<i64>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT user_id, fields FROM records WHERE kind = 'competition_entry' ORDER BY id",
        )?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows
            .into_iter()
            .filter(|(_, f)| {
                serde_json::from_str::<Value>(f)
                    .ok()
                    .and_then(|v| v["competition_id"].as_i64())
                    == Some(competition)
            })
            .map(|(u, _)| u)
            .collect())
    }

    /// `(developer, result in percent)` of every iteration closed in `[from, to)`.
    pub(crate) fn closed_results(&self, from: u64, to: u64) -> Result<Vec<(i64, f64)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT s.user_id, i.side, i.open_price, i.close_price FROM extras_iterations i
             JOIN extras_signals s ON s.id = i.signal_id
             WHERE i.closed_ms >= ?1 AND i.closed_ms < ?2",
        )?;
        let rows = stmt
            .query_map(params![ms(from), ms(to)], |r| {
                let side: String = r.get(1)?;
                let open: f64 = r.get(2)?;
                let close: f64 = r.get(3)?;
                let change = (close / open - 1.0) * 100.0;
                Ok((r.get(0)?, if side == "sell" { -change } else { change }))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }
}
