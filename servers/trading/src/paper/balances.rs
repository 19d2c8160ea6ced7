//! Paper balances and the exchange keys they belong to: each key's simulated balances,
//! the key's fields and problems, and the log of requests sent through it.

use serde_json::Value;
use trading_model::market::{Market, ORIGIN_S};

use crate::store::{PaperDb, StoreError};

/// Starting paper balance of every asset on a new exchange key, in US dollars at the start
/// of the simulated history (so it depends on the seed only).
const START_USD: f64 = 10_000.0;

/// Why a key cannot trade on `exchange` now, or `None` when it can.
pub(crate) fn key_problem(
    conn: &PaperDb<'_>,
    user: i64,
    id: i64,
    exchange: &str,
) -> Result<Option<String>, StoreError> {
    Ok(match conn.key_fields(user, id)? {
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

/// Seeds a key's paper balances on first use: every asset traded on its exchange, worth
/// [`START_USD`] at the origin of the simulated history.
pub(crate) fn ensure_balances(
    conn: &PaperDb<'_>,
    market: &Market,
    key: i64,
    exchange: &str,
) -> Result<(), StoreError> {
    if conn.has_balances(key)? {
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
        conn.seed_balance(key, a, amount)?;
    }
    Ok(())
}
