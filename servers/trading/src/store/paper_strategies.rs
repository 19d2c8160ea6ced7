//! Strategies as stored: one row per strategy profile (its state, schedule and progress),
//! and the profiles themselves (generic records of kind `strategy_profile`).

use rusqlite::{OptionalExtension, params};
use serde_json::{Map, Value};
use trading_model::strategy::State;

use super::database::{StoreError, ms, unsigned};
use super::paper::PaperDb;
use super::paper_balances::FieldRecords;
use super::paper_orders::{COLUMNS, Order, from_row, prefixed_cols};

/// The strategy row of a profile.
#[derive(Debug, Clone)]
pub struct StrategyRow {
    pub id: i64,
    pub user_id: i64,
    pub state: State,
    pub started_ms: u64,
    pub next_due_ms: u64,
    pub slice: u64,
    pub position: i64,
    pub stopped_ms: u64,
    pub note: String,
}

fn row_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<StrategyRow> {
    Ok(StrategyRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        state: State::parse(&r.get::<_, String>(2)?),
        started_ms: unsigned(r.get(3)?),
        next_due_ms: unsigned(r.get(4)?),
        slice: unsigned(r.get(5)?),
        position: r.get(6)?,
        stopped_ms: unsigned(r.get(7)?),
        note: r.get(8)?,
    })
}

const ROW_COLS: &str =
    "id, user_id, state, started_ms, next_due_ms, slice, position, stopped_ms, note";

/// A strategy profile's fields and its creation time.
pub type StoredProfile = (Map<String, Value>, u64);

/// Which strategy rows to read.
#[derive(Debug, Clone, Copy)]
pub enum Strategies {
    /// A user's running strategies, by id.
    RunningOfUser(i64),
    /// A user's running strategies other than this one.
    RunningOfUserExcept(i64, i64),
    /// Running strategies due at or before this time (ms), soonest first.
    Due(u64),
}

/// A strategy transaction as stored, with the order it recorded.
#[derive(Debug, Clone)]
pub struct StoredTransaction {
    /// Its id.
    pub id: i64,
    /// The strategy it belongs to.
    pub strategy_id: i64,
    /// The order, as it is now.
    pub order: Order,
    /// The transaction record's fields when it was made.
    pub fields: Map<String, Value>,
    /// When it was made.
    pub created_ms: u64,
}

impl PaperDb<'_> {
    /// The strategy rows `which` names.
    pub fn strategies(&self, which: Strategies) -> Result<Vec<StrategyRow>, StoreError> {
        match which {
            Strategies::RunningOfUser(u) => {
                self.rows_where("user_id = ?1 AND state = 'running' ORDER BY id", &[&u])
            }
            Strategies::RunningOfUserExcept(u, id) => self.rows_where(
                "user_id = ?1 AND state = 'running' AND id != ?2",
                &[&u, &id],
            ),
            Strategies::Due(t) => self.rows_where(
                "state = 'running' AND next_due_ms <= ?1 ORDER BY next_due_ms, id",
                &[&ms(t)],
            ),
        }
    }

    fn rows_where(
        &self,
        cond: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<StrategyRow>, StoreError> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {ROW_COLS} FROM paper_strategies WHERE {cond}"
        ))?;
        let rows = stmt.query_map(args, row_from)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    pub fn save_row(&self, r: &StrategyRow) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO paper_strategies (id, user_id, state, started_ms, next_due_ms, slice, position, stopped_ms, note)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (id) DO UPDATE SET state = ?3, started_ms = ?4, next_due_ms = ?5, slice = ?6,
                 position = ?7, stopped_ms = ?8, note = ?9",
            params![
                r.id,
                r.user_id,
                r.state.as_str(),
                ms(r.started_ms),
                ms(r.next_due_ms),
                ms(r.slice),
                r.position,
                ms(r.stopped_ms),
                r.note
            ],
        )?;
        Ok(())
    }

    /// The row of profile `id` (a fresh stopped one when it never ran).
    pub fn row_of(&self, user: i64, id: i64) -> Result<StrategyRow, StoreError> {
        Ok(self
            .rows_where("id = ?1 AND user_id = ?2", &[&id, &user])?
            .into_iter()
            .next()
            .unwrap_or(StrategyRow {
                id,
                user_id: user,
                state: State::Stopped,
                started_ms: 0,
                next_due_ms: 0,
                slice: 0,
                position: id,
                stopped_ms: 0,
                note: String::new(),
            }))
    }

    pub fn profile(&self, user: i64, id: i64) -> Result<Option<StoredProfile>, StoreError> {
        let row: Option<(String, i64)> = self.conn
            .query_row(
                "SELECT fields, created_ms FROM records WHERE kind = 'strategy_profile' AND user_id = ?1 AND id = ?2",
                params![user, id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        Ok(row.and_then(|(t, c)| match serde_json::from_str(&t) {
            Ok(Value::Object(m)) => Some((m, unsigned(c))),
            _ => None,
        }))
    }

    pub fn profiles_of(&self, user: i64) -> Result<FieldRecords, StoreError> {
        self.records_of("strategy_profile", user)
    }

    /// Running strategies of `user_id`.
    pub fn running_strategies(&self, user_id: i64) -> Result<u64, StoreError> {
        let n: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM paper_strategies WHERE user_id = ?1 AND state = 'running'",
            [user_id],
            |r| r.get(0),
        )?;
        Ok(unsigned(n))
    }

    /// Forgets strategy `id`'s row.
    pub fn delete_strategy(&self, id: i64) -> Result<(), StoreError> {
        self.conn
            .execute("DELETE FROM paper_strategies WHERE id = ?1", [id])?;
        Ok(())
    }

    /// Records one strategy transaction (its fields as the API answers them) for order
    /// `order`.
    pub fn insert_transaction(
        &self,
        user_id: i64,
        strategy: i64,
        order: i64,
        fields: &Value,
        t: u64,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO paper_transactions (user_id, strategy_id, order_id, fields, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![user_id, strategy, order, fields.to_string(), ms(t)],
        )?;
        Ok(())
    }

    /// Deletes strategy `strategy`'s transactions; returns how many.
    pub fn delete_transactions(&self, strategy: i64) -> Result<usize, StoreError> {
        Ok(self.conn.execute(
            "DELETE FROM paper_transactions WHERE strategy_id = ?1",
            [strategy],
        )?)
    }

    /// How many transactions strategy `strategy` has.
    pub fn transaction_count(&self, strategy: i64) -> Result<i64, StoreError> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*) FROM paper_transactions WHERE strategy_id = ?1",
            [strategy],
            |r| r.get(0),
        )?)
    }

    /// Stores a strategy's overview in its profile (answered with the profile).
    pub fn set_profile_overview(
        &self,
        id: i64,
        overview: Value,
        now: u64,
    ) -> Result<(), StoreError> {
        let text: Option<String> = self
            .conn
            .query_row(
                "SELECT fields FROM records WHERE id = ?1 AND kind = 'strategy_profile'",
                [id],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(Ok(Value::Object(mut m))) = text.map(|t| serde_json::from_str::<Value>(&t)) {
            m.insert("overview".into(), overview);
            self.conn.execute(
                "UPDATE records SET fields = ?1, updated_ms = ?2
                 WHERE id = ?3 AND kind = 'strategy_profile'",
                params![Value::Object(m).to_string(), ms(now), id],
            )?;
        }
        Ok(())
    }

    /// One page of `user`'s strategy transactions, newest first, each with its order,
    /// and how many match: of one strategy or all, of one trading code or all, and only
    /// those whose order filled something when `filled_only`.
    pub fn transaction_page(
        &self,
        user: i64,
        strategy: Option<i64>,
        code: Option<&str>,
        filled_only: bool,
        limit: u64,
        offset: u64,
    ) -> Result<(Vec<StoredTransaction>, u64), StoreError> {
        const WHERE: &str = "FROM paper_transactions t JOIN paper_orders o ON o.id = t.order_id
             WHERE t.user_id = ?1 AND (?2 IS NULL OR t.strategy_id = ?2)
                 AND (?3 IS NULL OR o.code = ?3) AND (?4 = 0 OR o.filled > 0)";
        let total: i64 = self.conn.query_row(
            &format!("SELECT COUNT(*) {WHERE}"),
            params![user, strategy, code, i64::from(filled_only)],
            |r| r.get(0),
        )?;
        let cols = prefixed_cols("o.");
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {cols}, t.id, t.fields, t.created_ms, t.strategy_id {WHERE}
             ORDER BY t.id DESC LIMIT ?5 OFFSET ?6"
        ))?;
        let n = COLUMNS;
        let rows = stmt
            .query_map(
                params![
                    user,
                    strategy,
                    code,
                    i64::from(filled_only),
                    ms(limit),
                    ms(offset)
                ],
                |r| {
                    let fields: String = r.get(n + 1)?;
                    Ok(StoredTransaction {
                        order: from_row(r)?,
                        id: r.get(n)?,
                        fields: match serde_json::from_str(&fields) {
                            Ok(Value::Object(m)) => m,
                            _ => Map::new(),
                        },
                        created_ms: unsigned(r.get(n + 2)?),
                        strategy_id: r.get(n + 3)?,
                    })
                },
            )?
            .collect::<Result<Vec<_>, _>>()?;
        Ok((rows, unsigned(total)))
    }

    /// How many strategy transactions `user` has.
    pub fn user_transaction_count(&self, user: i64) -> Result<i64, StoreError> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*) FROM paper_transactions WHERE user_id = ?1",
            [user],
            |r| r.get(0),
        )?)
    }
}

/// A prepared export file.
#[derive(Debug, Clone)]
pub struct Export {
    pub id: i64,
    pub system: String,
    pub kind: String,
    pub symbol: String,
    pub rows: i64,
    pub filename: String,
    pub content: Vec<u8>,
    pub created: u64,
    pub ready: u64,
    pub expires: u64,
}

impl PaperDb<'_> {
    /// `user`'s exports (or only export `id`), newest first.
    pub fn exports(&self, user: i64, id: Option<i64>) -> Result<Vec<Export>, StoreError> {
        let mut stmt = self.conn.prepare(
        "SELECT id, system, type, symbol, rows, filename, content, created_ms, ready_ms, expires_ms
         FROM paper_exports WHERE user_id = ?1 AND (?2 IS NULL OR id = ?2) ORDER BY id DESC",
    )?;
        let rows = stmt.query_map(params![user, id], |r| {
            Ok(Export {
                id: r.get(0)?,
                system: r.get(1)?,
                kind: r.get(2)?,
                symbol: r.get(3)?,
                rows: r.get(4)?,
                filename: r.get(5)?,
                content: r.get(6)?,
                created: unsigned(r.get(7)?),
                ready: unsigned(r.get(8)?),
                expires: unsigned(r.get(9)?),
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Records an export being prepared; returns its id.
    pub fn insert_export(&self, user: i64, e: &Export) -> Result<i64, StoreError> {
        self.conn.execute(
            "INSERT INTO paper_exports (user_id, system, type, symbol, rows, filename, content,
                 created_ms, ready_ms, expires_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                user,
                e.system,
                e.kind,
                e.symbol,
                e.rows,
                e.filename,
                e.content,
                ms(e.created),
                ms(e.ready),
                ms(e.expires)
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Names an export's file (its name carries its id).
    pub fn set_export_filename(&self, id: i64, filename: &str) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE paper_exports SET filename = ?2 WHERE id = ?1",
            params![id, filename],
        )?;
        Ok(())
    }
}
