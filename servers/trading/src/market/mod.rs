//! Market data from the simulated exchanges: system symbols, exchanges, rates, status and
//! announcements, the public market endpoints, trending news, the exchange index,
//! backtesting and the option calculator.
//!
//! Every answer is computed from `env.market` (a pure function of seed and time) at
//! `env.now_ms`, or from the invented news of `trading_model::market::news`; nothing is
//! canned and nothing is cached, so moving the clock moves every answer and equal seeds
//! give equal answers. The only stored data read here are other modules' records
//! (published articles, news keywords); this module writes nothing.
//!
//! Deliberately not done: live updates (no websocket), order matching (the paper module),
//! and keyword storage (the generic resources own `trending-news-*-keyword`).

mod answers;
mod backtest;
mod news;
mod public;

use serde_json::{Value, json};
use trading_model::market::Market;
use trading_model::{ApiError, Endpoint, Page, Valid, typed};

use crate::context::RequestContext;
use crate::market::answers::{page, paged, r8, symbol_record, unknown_exchange};
use trading_model::market::health::{exchange_health, exchange_status, rating, status, unit};

const PATHS: &[&str] = &[
    "system/rates",
    "system/exchange-health",
    "system/information",
    "system/symbols",
    "system/status",
    "system/list-announcements",
    "system/exchanges",
    "system/unique-symbols",
    "public/spreads/data",
    "public/fetch-symbol-price",
    "public/bitcoin-price-tracker",
    "public/fetch-symbol-trades",
    "public/realtime-bitcoin-profit",
    "public/exchange-information",
    "public/tradingview-charts",
    "public/match-pair",
    "public/fetch-spread-data",
    "public/spreads-list",
    "public/bitcoin-information",
    "public/supported-wallets",
    "public/fetch-articles",
    "public/trending-news-data",
    "public/trending-news-watchlist",
    "public/trending-news-sources",
    "public/trending-news-statistics",
    "public/trending-news-source-impact",
    "exchangeindex/announcements",
    "exchangeindex/exchanges",
    "exchangeindex/relevant-news",
    "exchangeindex/symbols",
    "backtesting/orderbook-data",
    "backtesting/technical-indicators",
    "backtesting/availability",
    "tests/black-scholes-implied-volatility-calculator",
];

/// Whether this module answers `path`.
pub(crate) fn handles(path: &str) -> bool {
    PATHS.contains(&path)
}

/// Answers `ep` if this module handles it.
pub(crate) fn call(
    ep: &Endpoint,
    valid: &Valid,
    env: &RequestContext,
) -> Option<Result<Value, ApiError>> {
    let path = ep.path.as_str();
    let m = &*env.market;
    let now = env.now_ms;
    let result = match path {
        "system/rates" => Ok(rates(m, now)),
        "system/exchange-health" => Ok(exchange_health(m, now)),
        "system/information" => Ok(json!({
            "time": now / 1000,
            "supported": {
                "exchanges": m.exchanges().iter().map(|e| e.code).collect::<Vec<_>>(),
                "symbols": m.symbols().iter().map(|s| s.code.as_str()).collect::<Vec<_>>(),
            },
        })),
        "system/symbols" => typed::SystemSymbols::from_valid(valid)
            .and_then(|p| system_symbols(m, p.exchange.as_deref())),
        "system/status" => Ok(status(m, now)),
        "system/list-announcements" => Ok(list_announcements(m, now, page(ep, valid))),
        "system/exchanges" => Ok(Value::Array(
            m.exchanges()
                .iter()
                .map(|e| json!({"code": e.code, "name": e.name}))
                .collect(),
        )),
        "system/unique-symbols" => Ok(unique_symbols(m)),
        "exchangeindex/announcements" => Ok(recent_announcements(m, now)),
        "exchangeindex/exchanges" => Ok(index_exchanges(m, now)),
        "exchangeindex/symbols" => index_symbols(m, now, valid, page(ep, valid)),
        "exchangeindex/relevant-news" => news::relevant(m, now, valid),
        p if p.starts_with("public/trending-news") => news::call(p, valid, env),
        p if p.starts_with("public/") => public::call(p, ep, valid, env),
        _ => backtest::call(path, valid, env),
    };
    Some(result)
}

fn rates(m: &Market, now: u64) -> Value {
    let mut rates = serde_json::Map::new();
    for (ticker, _) in trading_model::market::assets() {
        if let Some(usd) = m.asset_usd(ticker, now) {
            rates.insert(ticker.into(), json!(r8(usd)));
        }
    }
    json!({"base": "USD", "time": now / 1000, "rates": rates})
}

// ---- incidents ----------------------------------------------------------------------

fn index_exchanges(m: &Market, now: u64) -> Value {
    let now_s = now / 1000;
    Value::Array(
        m.exchanges()
            .iter()
            .map(|e| {
                let (status, issues) = exchange_status(m, e.code, now_s);
                let (incidents, rating) = rating(m, e, now_s);
                json!({
                    "code": e.code, "name": e.name, "status": status, "issues": issues,
                    "rating": rating, "fee": e.fee, "symbols": m.symbols_of(e.code).count(),
                    "incidents_30_days": incidents, "needs_password": e.needs_password,
                })
            })
            .collect(),
    )
}

fn system_symbols(m: &Market, exchange: Option<&str>) -> Result<Value, ApiError> {
    let mut out = serde_json::Map::new();
    if let Some(code) = exchange {
        let code = code.trim().to_ascii_lowercase();
        if m.exchange(&code).is_none() {
            return Err(unknown_exchange(m, "exchange"));
        }
    }
    for e in m.exchanges() {
        if exchange.is_some_and(|x| !x.trim().eq_ignore_ascii_case(e.code)) {
            continue;
        }
        out.insert(
            e.code.into(),
            m.symbols_of(e.code).map(symbol_record).collect(),
        );
    }
    Ok(Value::Object(out))
}

fn unique_symbols(m: &Market) -> Value {
    let mut pairs: Vec<(String, &str, &str, Vec<&str>)> = Vec::new();
    for s in m.symbols() {
        match pairs.iter_mut().find(|p| p.0 == s.pair()) {
            Some(p) => p.3.push(s.exchange),
            None => pairs.push((s.pair(), s.base, s.quote, vec![s.exchange])),
        }
    }
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    Value::Array(
        pairs
            .into_iter()
            .map(|(symbol, base, quote, ex)| {
                json!({"symbol": symbol, "base": base, "quote": quote, "count": ex.len(), "exchanges": ex})
            })
            .collect(),
    )
}

fn index_symbols(m: &Market, now: u64, valid: &Valid, page: Page) -> Result<Value, ApiError> {
    let p = typed::ExchangeindexSymbols::from_valid(valid)?;
    let code = p.exchange.trim().to_ascii_lowercase();
    if m.exchange(&code).is_none() {
        return Err(unknown_exchange(m, "exchange"));
    }
    let rows: Vec<Value> = m
        .symbols_of(&code)
        .map(|s| {
            let mut r = symbol_record(s);
            r["code"] = json!(s.code);
            if let Some(b) = m.book(&s.code, now) {
                r["bid"] = json!(b.bids[0].price);
                r["ask"] = json!(b.asks[0].price);
            }
            r
        })
        .collect();
    let (records, info) = page.apply(&rows);
    Ok(paged(records, info))
}

// ---- announcements ------------------------------------------------------------------

/// One announcement a week since the market's origin, of a seeded kind.
const ANNOUNCE_S: u64 = 7 * 86_400;

fn announcement(m: &Market, n: u64) -> Value {
    let time = trading_model::market::ORIGIN_S
        + n * ANNOUNCE_S
        + (unit(m.seed(), 10, n) * (ANNOUNCE_S / 2) as f64) as u64;
    let syms = m.symbols();
    let sym = &syms[(unit(m.seed(), 11, n) * syms.len() as f64) as usize % syms.len()];
    let e = sym.exchange_info();
    let (kind, title, body) = match (unit(m.seed(), 12, n) * 3.0) as u32 {
        0 => (
            "listing",
            format!("{} lists {}", e.name, sym.pair()),
            format!(
                "Trading of {} opens on {} under the code {}; the smallest order is {} {}.",
                sym.pair(),
                e.name,
                sym.code,
                sym.min,
                sym.base
            ),
        ),
        1 => {
            let hours = 1 + (unit(m.seed(), 13, n) * 4.0) as u64;
            (
                "maintenance",
                format!("{} scheduled maintenance", e.name),
                format!(
                    "{} pauses order entry for about {hours} hour(s) starting {} (Unix seconds); strategies using it skip their orders meanwhile.",
                    e.name,
                    time + 86_400
                ),
            )
        }
        _ => (
            "fees",
            format!("{} fee schedule confirmed", e.name),
            format!(
                "Taker fees on {} stay at {} % of the traded value for all sandbox plans.",
                e.name,
                e.fee * 100.0
            ),
        ),
    };
    json!({
        "id": n + 1, "time": time, "type": kind, "exchange": e.code,
        "title": title, "body": body,
    })
}

/// Announcements published by `now_s`, as a count (their ids are 1..=count).
fn announcement_count(m: &Market, now_s: u64) -> u64 {
    let origin = trading_model::market::ORIGIN_S;
    if now_s < origin {
        return 0;
    }
    let mut n = (now_s - origin) / ANNOUNCE_S + 1;
    // The newest week's announcement may still lie ahead within its week.
    while n > 0 && announcement(m, n - 1)["time"].as_u64().unwrap_or(0) > now_s {
        n -= 1;
    }
    n
}

fn list_announcements(m: &Market, now: u64, page: Page) -> Value {
    let total = announcement_count(m, now / 1000);
    let skip = page.offset();
    let records: Vec<Value> = (0..u64::from(page.limit))
        .map_while(|i| total.checked_sub(skip + i + 1))
        .map(|n| announcement(m, n))
        .collect();
    json!({
        "showing": records.len(), "records": records,
        "page": page.pagenumber, "total": total,
    })
}

/// The exchange index shows the announcements of the last 30 days, newest first.
fn recent_announcements(m: &Market, now: u64) -> Value {
    let now_s = now / 1000;
    let total = announcement_count(m, now_s);
    Value::Array(
        (0..total)
            .rev()
            .map(|n| announcement(m, n))
            .take_while(|a| a["time"].as_u64().unwrap_or(0) + 30 * 86_400 > now_s)
            .collect(),
    )
}
