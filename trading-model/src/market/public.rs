//! The answers of the public market-data endpoints, built from the simulated books: quotes,
//! trackers, trades, spreads, arbitrage, pair matching, charts and wallets. What it
//! deliberately does not do: no parameter reading or storage; the server hands in the
//! typed parameters, the page and the clock reading.

use serde_json::{Value, json};

use super::{Book, Market, Symbol};
use crate::errors::ApiError;
use crate::paging::{Page, PageInfo};
use crate::typed::{
    PublicBitcoinPriceTracker, PublicFetchSpreadData, PublicFetchSymbolPrice,
    PublicFetchSymbolTrades, PublicMatchPair, PublicSpreadsList, PublicTradingviewCharts,
};

/// Book snapshots per candle minute in `fetch-spread-data` (every 10 s): enough to find
/// the extremes of a one-minute candle while keeping a whole day cheap.
const SPREAD_SAMPLE_S: u64 = 10;
/// Most trades answered by `fetch-symbol-trades`.
const TRADES_MAX: usize = 100;

/// `{records, page, showing, total}` as every paged list answers.
pub fn paged(records: Vec<Value>, info: PageInfo) -> Value {
    json!({"records": records, "page": info.page, "showing": info.showing, "total": info.total})
}

/// The refusal of a trading code that is not listed.
pub fn unknown_code(param: &str, code: &str) -> ApiError {
    ApiError::refused(
        param,
        format!("Unknown trading code {code}; system/symbols lists the codes."),
    )
}

/// A symbol record as the spec shows it.
pub fn symbol_record(s: &Symbol) -> Value {
    json!({
        "id": s.id, "symbol": s.pair(), "quote": s.quote, "base": s.base,
        "min": s.min, "pp": s.pp, "pa": s.pa,
    })
}

/// Rounds for display without losing the precision a price needs.
pub fn r8(x: f64) -> f64 {
    (x * 1e8).round() / 1e8
}

/// `public/spreads-list`: one page of the spread combinations containing the filter, in
/// alphabetical order.
pub fn spreads_list(m: &Market, page: Page, p: &PublicSpreadsList) -> Value {
    let filter = p
        .spread_includes
        .as_deref()
        .map(|s| s.trim().to_ascii_lowercase())
        .unwrap_or_default();
    // Paging lists newest first; combinations have no age, so the reversed
    // input keeps them in alphabetical order on the page.
    let mut all: Vec<String> = combinations(m)
        .into_iter()
        .filter(|c| c.contains(&filter))
        .collect();
    all.reverse();
    let (rows, info) = page.apply(&all);
    json!({
        "combinations": rows, "page": info.page, "showing": info.showing, "total": info.total,
    })
}

/// `public/supported-wallets`: the assets a wallet can hold, with their decimals.
pub fn supported_wallets(now: u64) -> Value {
    json!({
        "last_updated": now / 1000,
        "supported": super::assets()
            .filter(|(t, _)| *t != "USD")
            .map(|(t, name)| json!({"symbol": t, "name": name, "decimals": decimals(t)}))
            .collect::<Vec<_>>(),
    })
}

/// Decimals of a wallet balance, as the assets' own networks use them.
fn decimals(ticker: &str) -> u32 {
    match ticker {
        "ETH" => 18,
        "SOL" => 9,
        "XRP" | "ADA" | "USDT" => 6,
        _ => 8,
    }
}

fn book_of(m: &Market, s: &Symbol, now: u64) -> Book {
    // Every listed code has a book; the fallback only keeps the types honest.
    m.book(&s.code, now).unwrap_or(Book {
        code: s.code.clone(),
        time_ms: now,
        bids: vec![],
        asks: vec![],
    })
}

/// `public/spreads/data`: best bid, ask and spread of every listed code.
pub fn spreads_data(m: &Market, now: u64) -> Value {
    Value::Array(
        m.symbols()
            .iter()
            .filter_map(|s| {
                let b = book_of(m, s, now);
                let (bid, ask) = (b.bids.first()?.price, b.asks.first()?.price);
                Some(json!({
                    "code": s.code, "exchange": s.exchange, "symbol": s.pair(),
                    "bid": bid, "ask": ask, "spread": r8(ask - bid),
                    "spread_bps": r8((ask - bid) / ((ask + bid) / 2.0) * 10_000.0),
                    "time": b.time_ms / 1000,
                }))
            })
            .collect(),
    )
}

/// `public/fetch-symbol-price`: best bid and ask of each known code; unknown ones are
/// noted, and refused when none is known.
pub fn fetch_symbol_price(
    m: &Market,
    now: u64,
    p: &PublicFetchSymbolPrice,
) -> Result<Value, ApiError> {
    let codes = &p.code;
    let mut out = serde_json::Map::new();
    let mut unknown = Vec::new();
    for c in codes {
        let code = c.to_ascii_lowercase();
        match m.book(&code, now) {
            Some(b) => {
                let t = b.time_ms / 1000;
                out.insert(
                    code,
                    json!({
                        "bids": {"price": b.bids[0].price, "qty": b.bids[0].qty, "time": t},
                        "asks": {"price": b.asks[0].price, "qty": b.asks[0].qty, "time": t},
                    }),
                );
            }
            None => unknown.push(code),
        }
    }
    if out.is_empty() {
        return Err(ApiError::refused(
            "code",
            format!(
                "No known trading code among {}; system/symbols lists the codes.",
                unknown.join(",")
            ),
        ));
    }
    let mut notes =
        "Best bid and ask of the simulated book; books change once a second.".to_owned();
    if !unknown.is_empty() {
        notes.push_str(&format!(" Unknown codes skipped: {}.", unknown.join(",")));
    }
    out.insert("notes".into(), json!(notes));
    Ok(Value::Object(out))
}

/// `public/bitcoin-price-tracker`: best bid and ask of every BTC market, at the start of
/// the current `interval` (milliseconds).
pub fn price_tracker(m: &Market, now: u64, p: &PublicBitcoinPriceTracker) -> Value {
    let interval = p.interval.parse::<u64>().unwrap_or(1000).max(1);
    let at = now - now % interval;
    let filter = p
        .symbol_filter
        .as_deref()
        .map(|s| s.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let (mut bids, mut asks) = (serde_json::Map::new(), serde_json::Map::new());
    for s in m.symbols() {
        if (s.base != "BTC" && s.quote != "BTC") || !s.code.contains(&filter) {
            continue;
        }
        let b = book_of(m, s, at);
        let t = b.time_ms / 1000;
        if let (Some(bid), Some(ask)) = (b.bids.first(), b.asks.first()) {
            bids.insert(s.code.clone(), json!([bid.price, bid.qty, t]));
            asks.insert(s.code.clone(), json!([ask.price, ask.qty, t]));
        }
    }
    json!({"lastupdated": at, "interval": interval, "bids": bids, "asks": asks})
}

/// `public/fetch-symbol-trades`: the newest public trades of one code (last minute) or of
/// every BTC market (last ten seconds), optionally of one book side.
pub fn fetch_trades(m: &Market, now: u64, p: &PublicFetchSymbolTrades) -> Result<Value, ApiError> {
    let side = p.side.as_str();
    let (codes, window_ms): (Vec<&Symbol>, u64) = match p.symbol.as_deref() {
        Some(c) => (
            vec![m.symbol(c).ok_or_else(|| unknown_code("symbol", c))?],
            60_000,
        ),
        // Without a symbol: the last ten seconds of every BTC market.
        None => (
            m.symbols()
                .iter()
                .filter(|s| s.base == "BTC" || s.quote == "BTC")
                .collect(),
            10_000,
        ),
    };
    let mut rows = Vec::new();
    for s in codes {
        for t in m.trades(&s.code, now.saturating_sub(window_ms), now + 1, 10_000) {
            // A taker buy lifts an ask; a taker sell hits a bid.
            let book_side = match t.side {
                crate::market::Side::Buy => "asks",
                crate::market::Side::Sell => "bids",
            };
            if side != "both" && side != book_side {
                continue;
            }
            rows.push((t.time_ms, t.id, s, t, book_side));
        }
    }
    rows.sort_by_key(|b| std::cmp::Reverse((b.0, b.1)));
    rows.truncate(TRADES_MAX);
    Ok(Value::Array(
        rows.into_iter()
            .map(|(_, _, s, t, book_side)| {
                json!({
                    "code": s.code, "id": t.id, "time": t.time_ms / 1000, "time_ms": t.time_ms,
                    "price": t.price, "qty": t.qty, "side": t.side.as_str(), "book_side": book_side,
                })
            })
            .collect(),
    ))
}

/// Opportunities now: buy at one exchange's best ask, sell at another's best bid for the
/// same pair, both paying taker fees. Only positive returns, ascending by return so that
/// paging (newest first) shows the best first.
pub fn arbitrage(m: &Market, now: u64) -> Vec<Value> {
    let mut out: Vec<(f64, Value)> = Vec::new();
    let syms = m.symbols();
    let books: Vec<Book> = syms.iter().map(|s| book_of(m, s, now)).collect();
    for (i, buy) in syms.iter().enumerate() {
        for (j, sell) in syms.iter().enumerate() {
            if i == j || buy.pair() != sell.pair() {
                continue;
            }
            let (Some(ask), Some(bid)) = (books[i].asks.first(), books[j].bids.first()) else {
                continue;
            };
            let cost = ask.price * (1.0 + buy.exchange_info().fee);
            let proceeds = bid.price * (1.0 - sell.exchange_info().fee);
            let ret = (proceeds - cost) / cost;
            if ret <= 0.0 {
                continue;
            }
            let qty = ask.qty.min(bid.qty);
            out.push((
                ret,
                json!({
                    "symbol": buy.pair(),
                    "buy": {"exchange": buy.exchange, "code": buy.code, "price": ask.price, "qty": ask.qty, "fee": buy.exchange_info().fee},
                    "sell": {"exchange": sell.exchange, "code": sell.code, "price": bid.price, "qty": bid.qty, "fee": sell.exchange_info().fee},
                    "qty": qty,
                    "return_percent": r8(ret * 100.0),
                    "profit": r8((proceeds - cost) * qty),
                    "profit_asset": buy.quote,
                    "time": now / 1000,
                }),
            ));
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out.into_iter().map(|(_, v)| v).collect()
}

/// `public/exchange-information`: each exchange's status and rating now.
pub fn exchange_information(m: &Market, now: u64) -> Value {
    let now_s = now / 1000;
    Value::Array(
        m.exchanges()
            .iter()
            .map(|e| {
                let (status, _) = crate::market::health::exchange_status(m, e.code, now_s);
                let (_, rating) = crate::market::health::rating(m, e, now_s);
                json!({"exchange": e.code, "name": e.name, "status": status, "rating": rating})
            })
            .collect(),
    )
}

/// `public/tradingview-charts`: a self-contained chart embed for one code.
pub fn tradingview(m: &Market, p: &PublicTradingviewCharts) -> Result<Value, ApiError> {
    let code = p.symbol.as_str();
    let s = m.symbol(code).ok_or_else(|| unknown_code("symbol", code))?;
    let id = format!("chart-{}", s.code);
    // Our own minimal embed: a container plus a loader that polls this sandbox's
    // backtesting candles and draws them on a canvas. No third-party script is loaded.
    let include = format!(
        "<div id=\"{id}\" style=\"width:100%;height:400px\"></div>\n<script>(function(){{\
var el=document.getElementById('{id}');var c=document.createElement('canvas');\
c.width=el.clientWidth||600;c.height=400;el.appendChild(c);\
var body='exchange={ex}&symbol={pair}&type=spot&interval=1m&timeto='+Math.floor(Date.now()/1000)\
+'&timefrom='+(Math.floor(Date.now()/1000)-3600);\
fetch('/api/v2/backtesting/technical-indicators',{{method:'POST',headers:{{'Content-Type':'application/x-www-form-urlencoded'}},body:body}})\
.then(function(r){{return r.json()}}).then(function(j){{var k=j.data.candles||[];if(!k.length)return;\
var lo=Math.min.apply(null,k.map(function(x){{return x.low}})),hi=Math.max.apply(null,k.map(function(x){{return x.high}}));\
var g=c.getContext('2d'),w=c.width/k.length;k.forEach(function(x,i){{\
var y=function(v){{return c.height-(v-lo)/(hi-lo||1)*c.height}};\
g.strokeStyle=x.close>=x.open?'#2a9d8f':'#e76f51';g.beginPath();\
g.moveTo(i*w+w/2,y(x.high));g.lineTo(i*w+w/2,y(x.low));g.stroke();\
g.fillStyle=g.strokeStyle;g.fillRect(i*w+1,Math.min(y(x.open),y(x.close)),w-2,Math.abs(y(x.open)-y(x.close))||1);}});}});\
}})();</script>",
        ex = s.exchange,
        pair = s.pair().replace('/', "%2F"),
    );
    Ok(json!({
        "symbol": s.code, "exchange": s.exchange, "pair": s.pair(),
        "container": id, "include": include,
    }))
}

/// Every ordered pair of codes of the same pair on two exchanges, as `<code>+<code>`.
pub fn combinations(m: &Market) -> Vec<String> {
    let syms = m.symbols();
    let mut out = Vec::new();
    for a in syms {
        for b in syms {
            if a.code != b.code && a.pair() == b.pair() {
                out.push(format!("{}+{}", a.code, b.code));
            }
        }
    }
    out.sort();
    out
}

/// `public/match-pair`: for each requested pair (one page of them), the exchanges that
/// list it and the spread combinations it allows.
pub fn match_pair(m: &Market, page: Page, given: &PublicMatchPair) -> Value {
    let pairs: Vec<String> = given.code.iter().map(|p| p.to_ascii_uppercase()).collect();
    // Pages run over the requested pairs, in the order given.
    let mut requested = pairs.clone();
    requested.dedup();
    requested.reverse();
    let (rows, info) = page.apply(&requested);
    let mut out = serde_json::Map::new();
    for pair in rows {
        let listed: Vec<&Symbol> = m
            .symbols()
            .iter()
            .filter(|s| format!("{}{}", s.base, s.quote) == pair)
            .collect();
        let mut detail = serde_json::Map::new();
        for s in &listed {
            detail.insert(s.exchange.into(), symbol_record(s));
        }
        let combos: Vec<String> = listed
            .iter()
            .flat_map(|a| {
                listed
                    .iter()
                    .filter(move |b| a.code != b.code)
                    .map(move |b| format!("{}+{}", a.code, b.code))
            })
            .collect();
        out.insert(
            pair.clone(),
            json!({
                "pair": listed.first().map_or(pair.clone(), |s| s.pair()),
                "count": listed.len(),
                "active": listed.iter().map(|s| s.exchange_info().name).collect::<Vec<_>>(),
                "detail": detail,
                "possible_combinations": combos,
            }),
        );
    }
    out.insert(
        "paging".into(),
        json!({"page": info.page, "showing": info.showing, "total": info.total}),
    );
    Value::Object(out)
}

/// The Unix second a `YYYY-MM-DD` day (already checked by validation) starts at.
/// `None` for text that is not such a date or a day before 1970.
pub fn day_start_s(date: &str) -> Option<u64> {
    let b = date.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = &date[r];
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in_month = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if !(1..=days_in_month).contains(&d) {
        return None;
    }
    // Days from 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's
    // days_from_civil), so no calendar crate is needed.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400).ok()
}

/// `public/fetch-spread-data`: one-minute candles of the price difference and ratio of
/// two codes over a day (today by default), or only its latest minute.
pub fn fetch_spread_data(
    m: &Market,
    now: u64,
    p: &PublicFetchSpreadData,
) -> Result<Value, ApiError> {
    let combo = p.combination.as_str();
    let (a, b) = combo
        .split_once('+')
        .ok_or_else(|| ApiError::refused("combination", "Expected <code>+<code>."))?;
    let sa = m
        .symbol(a.trim())
        .ok_or_else(|| unknown_code("combination", a))?;
    let sb = m
        .symbol(b.trim())
        .ok_or_else(|| unknown_code("combination", b))?;
    let now_s = now / 1000;
    let day = match p.date.as_deref() {
        // Validation passed the date's form, so a day that has no Unix time is before 1970.
        Some(d) => day_start_s(d).unwrap_or(0),
        None => now_s - now_s % 86_400,
    };
    if day > now_s {
        return Err(ApiError::refused("date", "The date lies in the future."));
    }
    if day < super::ORIGIN_S {
        return Err(ApiError::refused(
            "date",
            format!(
                "History starts at 2015-01-01 ({} in Unix seconds).",
                super::ORIGIN_S
            ),
        ));
    }
    let end = (day + 86_400).min(now_s + 1);
    let latest = p.latestonly.unwrap_or(false);
    let start = if latest {
        (end - 1) - (end - 1) % 60
    } else {
        day
    };
    let mut price = Vec::new();
    let mut ratio = Vec::new();
    let mut t = start;
    while t < end {
        let ba = book_of(m, sa, t * 1000);
        let bb = book_of(m, sb, t * 1000);
        if let (Some(ask), Some(bid)) = (ba.asks.first(), bb.bids.first()) {
            price.push((t, ask.price - bid.price));
            ratio.push((t, ask.price / bid.price));
        }
        t += SPREAD_SAMPLE_S;
    }
    let cp = crate::market::analytics::candles(&price, 60);
    let cr = crate::market::analytics::candles(&ratio, 60);
    let ohlc = |c: &crate::market::analytics::Candle| json!({"open": r8(c.open), "close": r8(c.close), "high": r8(c.high), "low": r8(c.low), "time": c.time});
    let rows: Vec<Value> = cp
        .iter()
        .zip(&cr)
        .map(|(p, r)| json!({"price": ohlc(p), "ratio": ohlc(r)}))
        .collect();
    Ok(Value::Array(rows))
}

/// `public/bitcoin-information`: BTC's reference price, its day, and its markets.
pub fn bitcoin_information(m: &Market, now: u64) -> Value {
    let usd = |t: u64| m.asset_usd("BTC", t).unwrap_or(0.0);
    let price = usd(now);
    let day_ago = usd(now.saturating_sub(86_400_000));
    // The day's range from five-minute samples of the reference rate.
    let samples: Vec<f64> = (0..=288)
        .map(|i| usd(now.saturating_sub(i * 300_000)))
        .collect();
    let high = samples.iter().copied().fold(f64::MIN, f64::max);
    let low = samples.iter().copied().fold(f64::MAX, f64::min);
    let markets: Vec<Value> = m
        .symbols()
        .iter()
        .filter(|s| s.base == "BTC")
        .map(|s| {
            let b = book_of(m, s, now);
            json!({
                "code": s.code, "exchange": s.exchange, "quote": s.quote,
                "bid": b.bids.first().map(|l| l.price), "ask": b.asks.first().map(|l| l.price),
            })
        })
        .collect();
    json!({
        "symbol": "BTC", "name": "Bitcoin", "time": now / 1000,
        "price_usd": r8(price), "change_24h": r8(price - day_ago),
        "change_24h_percent": r8((price / day_ago - 1.0) * 100.0),
        "high_24h": r8(high), "low_24h": r8(low), "markets": markets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_start_at_utc_midnight() {
        assert_eq!(day_start_s("1970-01-01"), Some(0));
        assert_eq!(day_start_s("2020-05-29"), Some(1_590_710_400));
        assert_eq!(day_start_s("2000-03-01"), Some(951_868_800));
        assert_eq!(day_start_s("2024-02-29"), Some(1_709_164_800));
        assert_eq!(day_start_s("1969-12-31"), None);
        assert_eq!(day_start_s("2023-02-29"), None);
    }

    #[test]
    fn combinations_pair_codes_across_exchanges() {
        let m = Market::new(7);
        let all = combinations(&m);
        assert!(!all.is_empty());
        for c in &all {
            let (a, b) = c.split_once('+').unwrap();
            let (sa, sb) = (m.symbol(a).unwrap(), m.symbol(b).unwrap());
            assert!(a != b && sa.pair() == sb.pair(), "{c}");
        }
    }

    #[test]
    fn unknown_codes_are_refused_only_when_none_is_known() {
        let m = Market::new(7);
        let known = m.symbols()[0].code.clone();
        let p = |codes: &[&str]| PublicFetchSymbolPrice {
            code: codes.iter().map(|c| (*c).to_owned()).collect(),
        };
        let some = fetch_symbol_price(&m, 1_767_225_600_000, &p(&[&known, "x-y"])).unwrap();
        assert!(some[known.as_str()]["bids"]["price"].is_f64());
        assert!(some["notes"].as_str().unwrap().contains("x-y"));
        assert!(fetch_symbol_price(&m, 1_767_225_600_000, &p(&["x-y"])).is_err());
    }

    #[test]
    fn arbitrage_is_positive_and_ascending() {
        let m = Market::new(7);
        let rows = arbitrage(&m, 1_767_225_600_000);
        let returns: Vec<f64> = rows
            .iter()
            .map(|r| r["return_percent"].as_f64().unwrap())
            .collect();
        assert!(returns.iter().all(|r| *r > 0.0));
        assert!(returns.windows(2).all(|w| w[0] <= w[1]));
    }
}
