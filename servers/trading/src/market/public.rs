//! The public market-data endpoints: quotes, trackers, trades, spreads, arbitrage, pair
//! matching, wallets and published articles, all read from the simulated books.

use serde_json::{Value, json};
use trading_model::market::{Book, Market, Symbol};
use trading_model::{ApiError, Endpoint, Valid, typed};

use super::answers::{page, paged, r8, symbol_record, unknown_code};
use crate::context::{RequestContext, refused};

/// Book snapshots per candle minute in `fetch-spread-data` (every 10 s): enough to find
/// the extremes of a one-minute candle while keeping a whole day cheap.
const SPREAD_SAMPLE_S: u64 = 10;
/// Most trades answered by `fetch-symbol-trades`.
const TRADES_MAX: usize = 100;

pub(super) fn call(
    path: &str,
    ep: &Endpoint,
    valid: &Valid,
    env: &RequestContext,
) -> Result<Value, ApiError> {
    let m = &*env.market;
    let now = env.now_ms;
    match path {
        "public/spreads/data" => Ok(spreads_data(m, now)),
        "public/fetch-symbol-price" => fetch_symbol_price(m, now, valid),
        "public/bitcoin-price-tracker" => price_tracker(m, now, valid),
        "public/fetch-symbol-trades" => fetch_trades(m, now, valid),
        "public/realtime-bitcoin-profit" => {
            let (records, info) = page(ep, valid).apply(&arbitrage(m, now));
            Ok(paged(records, info))
        }
        "public/exchange-information" => Ok(exchange_information(m, now)),
        "public/tradingview-charts" => tradingview(m, valid),
        "public/match-pair" => match_pair(m, ep, valid),
        "public/fetch-spread-data" => fetch_spread_data(m, now, valid),
        "public/spreads-list" => {
            let p = typed::PublicSpreadsList::from_valid(valid)?;
            let filter = p
                .spread_includes
                .map(|s| s.trim().to_ascii_lowercase())
                .unwrap_or_default();
            // Paging lists newest first; combinations have no age, so the reversed
            // input keeps them in alphabetical order on the page.
            let mut all: Vec<String> = combinations(m)
                .into_iter()
                .filter(|c| c.contains(&filter))
                .collect();
            all.reverse();
            let (rows, info) = page(ep, valid).apply(&all);
            Ok(json!({
                "combinations": rows, "page": info.page, "showing": info.showing, "total": info.total,
            }))
        }
        "public/bitcoin-information" => Ok(bitcoin_information(m, now)),
        "public/supported-wallets" => Ok(json!({
            "last_updated": now / 1000,
            "supported": trading_model::market::assets()
                .filter(|(t, _)| *t != "USD")
                .map(|(t, name)| json!({"symbol": t, "name": name, "decimals": decimals(t)}))
                .collect::<Vec<_>>(),
        })),
        "public/fetch-articles" => fetch_articles(ep, valid, env),
        _ => Err(ApiError::new(trading_model::ErrorCode::EmptyData)),
    }
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

fn spreads_data(m: &Market, now: u64) -> Value {
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

fn fetch_symbol_price(m: &Market, now: u64, valid: &Valid) -> Result<Value, ApiError> {
    let codes = typed::PublicFetchSymbolPrice::from_valid(valid)?.code;
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
        return Err(refused(
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

fn price_tracker(m: &Market, now: u64, valid: &Valid) -> Result<Value, ApiError> {
    let p = typed::PublicBitcoinPriceTracker::from_valid(valid)?;
    let interval = p.interval.parse::<u64>().unwrap_or(1000).max(1);
    let at = now - now % interval;
    let filter = p
        .symbol_filter
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
    Ok(json!({"lastupdated": at, "interval": interval, "bids": bids, "asks": asks}))
}

fn fetch_trades(m: &Market, now: u64, valid: &Valid) -> Result<Value, ApiError> {
    let p = typed::PublicFetchSymbolTrades::from_valid(valid)?;
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
                trading_model::market::Side::Buy => "asks",
                trading_model::market::Side::Sell => "bids",
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
pub(super) fn arbitrage(m: &Market, now: u64) -> Vec<Value> {
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

fn exchange_information(m: &Market, now: u64) -> Value {
    let now_s = now / 1000;
    Value::Array(
        m.exchanges()
            .iter()
            .map(|e| {
                let (status, _) = trading_model::market::health::exchange_status(m, e.code, now_s);
                let (_, rating) = trading_model::market::health::rating(m, e, now_s);
                json!({"exchange": e.code, "name": e.name, "status": status, "rating": rating})
            })
            .collect(),
    )
}

fn tradingview(m: &Market, valid: &Valid) -> Result<Value, ApiError> {
    let p = typed::PublicTradingviewCharts::from_valid(valid)?;
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
pub(super) fn combinations(m: &Market) -> Vec<String> {
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

fn match_pair(m: &Market, ep: &Endpoint, valid: &Valid) -> Result<Value, ApiError> {
    let given = typed::PublicMatchPair::from_valid(valid)?;
    let pairs: Vec<String> = given.code.iter().map(|p| p.to_ascii_uppercase()).collect();
    // Pages run over the requested pairs, in the order given.
    let mut requested = pairs.clone();
    requested.dedup();
    requested.reverse();
    let (rows, info) = page(ep, valid).apply(&requested);
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
    Ok(Value::Object(out))
}

/// The Unix second a `YYYY-MM-DD` day (already checked by validation) starts at.
pub(super) fn day_start_s(date: &str) -> Option<u64> {
    let day = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
    u64::try_from(day.and_hms_opt(0, 0, 0)?.and_utc().timestamp()).ok()
}

fn fetch_spread_data(m: &Market, now: u64, valid: &Valid) -> Result<Value, ApiError> {
    let p = typed::PublicFetchSpreadData::from_valid(valid)?;
    let combo = p.combination.as_str();
    let (a, b) = combo
        .split_once('+')
        .ok_or_else(|| refused("combination", "Expected <code>+<code>."))?;
    let sa = m
        .symbol(a.trim())
        .ok_or_else(|| unknown_code("combination", a))?;
    let sb = m
        .symbol(b.trim())
        .ok_or_else(|| unknown_code("combination", b))?;
    let now_s = now / 1000;
    let day = match p.date.as_deref() {
        Some(d) => day_start_s(d).ok_or_else(|| refused("date", "Expected YYYY-MM-DD."))?,
        None => now_s - now_s % 86_400,
    };
    if day > now_s {
        return Err(refused("date", "The date lies in the future."));
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
    let cp = trading_model::market::analytics::candles(&price, 60);
    let cr = trading_model::market::analytics::candles(&ratio, 60);
    let ohlc = |c: &trading_model::market::analytics::Candle| json!({"open": r8(c.open), "close": r8(c.close), "high": r8(c.high), "low": r8(c.low), "time": c.time});
    let rows: Vec<Value> = cp
        .iter()
        .zip(&cr)
        .map(|(p, r)| json!({"price": ohlc(p), "ratio": ohlc(r)}))
        .collect();
    Ok(Value::Array(rows))
}

fn bitcoin_information(m: &Market, now: u64) -> Value {
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

fn fetch_articles(ep: &Endpoint, valid: &Valid, env: &RequestContext) -> Result<Value, ApiError> {
    let p = typed::PublicFetchArticles::from_valid(valid)?;
    let id = p.article_id;
    let title = Some(p.title_contains)
        .filter(|t| t != "0")
        .map(|t| t.to_lowercase());
    let now_s = i64::try_from(env.now_ms / 1000).unwrap_or(i64::MAX);
    let articles = env
        .store
        .records_of_everyone("article")
        .map_err(crate::context::db)?;
    let mut published = Vec::new();
    for (uid, article) in articles {
        let (rid, f) = (article.id, &article.fields);
        let (created, updated) = (article.created_ms, article.updated_ms);
        let publish = f
            .get("publishdate")
            .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
            .unwrap_or(0);
        if publish > now_s || (id != 0 && rid != id) {
            continue;
        }
        let t = f.get("title").and_then(Value::as_str).unwrap_or("");
        if title
            .as_ref()
            .is_some_and(|w| !t.to_lowercase().contains(w))
        {
            continue;
        }
        let mut rec = f.clone();
        rec.insert("id".into(), json!(rid));
        rec.insert("author_uid".into(), json!(uid));
        rec.insert("time_published".into(), json!(publish));
        rec.insert("time_created".into(), json!(created / 1000));
        rec.insert("time_updated".into(), json!(updated / 1000));
        published.push(Value::Object(rec));
    }
    if id != 0 && published.is_empty() {
        return Err(refused("article_id", "No published article has this id."));
    }
    let (records, info) = page(ep, valid).apply(&published);
    Ok(paged(records, info))
}
