//! Paper trading's exchange keys (read from the generic records), each key's paper
//! balances, and the log of requests sent through a key.

use rusqlite::{OptionalExtension, params};
use serde_json::{Map, Value};

use super::database::{StoreError, ms, unsigned};
use super::paper::PaperDb;

/// One request sent through a key, as logged.
#[derive(Debug, Clone)]
pub struct Request {
    /// Log id.
    pub id: i64,
    /// The key it went through.
    pub apikey_id: i64,
    /// The key's exchange.
    pub exchange: String,
    /// What was asked (`createOrder`, `fetchOrder`, ...).
    pub request: String,
    /// Its parameters and answer.
    pub detail: Value,
    /// When.
    pub time_ms: u64,
}

/// Records of one kind as `(id, fields)`.
pub type FieldRecords = Vec<(i64, Map<String, Value>)>;

impl PaperDb<'_> {
    /// Fields of one of `user`'s exchange keys, read with the caller's connection.
    pub fn key_fields(&self, user: i64, id: i64) -> Result<Option<Map<String, Value>>, StoreError> {
        let text: Option<String> = self.conn
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

    pub fn log_request(
        &self,
        user: i64,
        key: i64,
        exchange: &str,
        request: &str,
        detail: &Value,
        t: u64,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO paper_requests (user_id, apikey_id, exchange, request, detail, time_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![user, key, exchange, request, detail.to_string(), ms(t)],
        )?;
        Ok(())
    }

    pub fn balance(&self, key: i64, asset: &str) -> Result<f64, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT amount FROM paper_balances WHERE apikey_id = ?1 AND asset = ?2",
                params![key, asset],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(0.0))
    }

    pub fn add_balance(&self, key: i64, asset: &str, delta: f64) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO paper_balances (apikey_id, asset, amount) VALUES (?1, ?2, ?3)
             ON CONFLICT (apikey_id, asset) DO UPDATE SET amount = amount + ?3",
            params![key, asset, delta],
        )?;
        Ok(())
    }

    /// Every exchange key of the caller as `(id, fields)`, oldest first.
    pub fn keys_of(&self, user: i64) -> Result<FieldRecords, StoreError> {
        self.records_of("exchange_api_key", user)
    }

    /// Every generic record of `kind` of the caller as `(id, fields)`, oldest first; rows
    /// whose fields are not a JSON object are skipped.
    pub fn records_of(&self, kind: &str, user: i64) -> Result<FieldRecords, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT id, fields FROM records WHERE kind = ?1 AND user_id = ?2 ORDER BY id",
        )?;
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

    /// Whether key `key` has paper balances yet.
    pub fn has_balances(&self, key: i64) -> Result<bool, StoreError> {
        let n: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM paper_balances WHERE apikey_id = ?1",
            [key],
            |r| r.get(0),
        )?;
        Ok(n > 0)
    }

    /// Sets a starting balance of key `key` unless it has one for `asset`.
    pub fn seed_balance(&self, key: i64, asset: &str, amount: f64) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT OR IGNORE INTO paper_balances (apikey_id, asset, amount) VALUES (?1, ?2, ?3)",
            params![key, asset, amount],
        )?;
        Ok(())
    }

    /// Forgets every paper balance of key `key` (the key was deleted).
    pub fn delete_balances(&self, key: i64) -> Result<(), StoreError> {
        self.conn
            .execute("DELETE FROM paper_balances WHERE apikey_id = ?1", [key])?;
        Ok(())
    }

    /// Whether `user` has sub-account `id`.
    pub fn has_subaccount(&self, user: i64, id: i64) -> Result<bool, StoreError> {
        let n: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM records WHERE kind = 'subaccount' AND user_id = ?1 AND id = ?2",
            params![user, id],
            |r| r.get(0),
        )?;
        Ok(n > 0)
    }

    /// The newest `limit` requests sent through `user`'s keys, newest first.
    pub fn requests(&self, user: i64, limit: i64) -> Result<Vec<Request>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT id, apikey_id, exchange, request, detail, time_ms FROM paper_requests
             WHERE user_id = ?1 ORDER BY id DESC LIMIT ?2",
        )?;
        let rows = stmt
            .query_map(params![user, limit], |r| {
                let detail: String = r.get(4)?;
                Ok(Request {
                    id: r.get(0)?,
                    apikey_id: r.get(1)?,
                    exchange: r.get(2)?,
                    request: r.get(3)?,
                    detail: serde_json::from_str(&detail).unwrap_or(Value::Null),
                    time_ms: unsigned(r.get(5)?),
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Every paper balance of key `key` as `(asset, amount)`, by asset.
    pub fn balances(&self, key: i64) -> Result<Vec<(String, f64)>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT asset, amount FROM paper_balances WHERE apikey_id = ?1 ORDER BY asset",
        )?;
        let rows = stmt
            .query_map([key], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }
}
