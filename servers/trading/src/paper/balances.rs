//! Paper balances and the exchange keys they belong to: each key's simulated balances,
//! the key's fields and problems, and the log of requests sent through it.

use rusqlite::{OptionalExtension, params};
use serde_json::{Map, Value};
use trading_model::market::{Market, ORIGIN_S};

use crate::context::ms;
use crate::store::PaperDb;

/// Starting paper balance of every asset on a new exchange key, in US dollars at the start
/// of the simulated history (so it depends on the seed only).
const START_USD: f64 = 10_000.0;

/// Fields of one of `user`'s exchange keys, read with the caller's connection.
pub(crate) fn key_fields(
    conn: &PaperDb<'_>,
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
pub(crate) fn key_problem(
    conn: &PaperDb<'_>,
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

pub(crate) fn log_request(
    conn: &PaperDb<'_>,
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
pub(crate) fn ensure_balances(
    conn: &PaperDb<'_>,
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

pub(crate) fn balance(conn: &PaperDb<'_>, key: i64, asset: &str) -> rusqlite::Result<f64> {
    Ok(conn
        .query_row(
            "SELECT amount FROM paper_balances WHERE apikey_id = ?1 AND asset = ?2",
            params![key, asset],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0.0))
}

pub(crate) fn add_balance(
    conn: &PaperDb<'_>,
    key: i64,
    asset: &str,
    delta: f64,
) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO paper_balances (apikey_id, asset, amount) VALUES (?1, ?2, ?3)
         ON CONFLICT (apikey_id, asset) DO UPDATE SET amount = amount + ?3",
        params![key, asset, delta],
    )?;
    Ok(())
}

/// Every exchange key of the caller as `(id, fields)`, oldest first.
pub(crate) fn keys_of(
    conn: &PaperDb<'_>,
    user: i64,
) -> rusqlite::Result<Vec<(i64, Map<String, Value>)>> {
    records_of(conn, "exchange_api_key", user)
}

/// Every generic record of `kind` of the caller as `(id, fields)`, oldest first; rows
/// whose fields are not a JSON object are skipped.
pub(crate) fn records_of(
    conn: &PaperDb<'_>,
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
