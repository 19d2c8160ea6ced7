//! Backtesting data (book snapshots, candles with indicators, availability) read from the
//! simulated market's history, and the Black-Scholes implied-volatility calculator.

use serde_json::{Value, json};
use trading_model::market::analytics::{self, OptionInputs, OptionKind};
use trading_model::market::{Market, ORIGIN_S, Symbol};
use trading_model::{ApiError, Valid, typed};

use super::answers::{r8, unknown_exchange};
use crate::context::{RequestContext, refused, refused_with};

/// Most book snapshots (one a second) per `orderbook-data` call: one hour.
pub(super) const MAX_SNAPSHOTS: u64 = 3600;
/// Most candles per `technical-indicators` call.
pub(super) const MAX_CANDLES: u64 = 1000;
/// Period of the SMA, EMA and RSI.
const PERIOD: usize = 14;
/// Mid samples per candle.
const SAMPLES_PER_CANDLE: u64 = 60;
const INTERVALS: [(&str, u64); 8] = [
    ("1m", 60),
    ("3m", 180),
    ("5m", 300),
    ("15m", 900),
    ("30m", 1800),
    ("1h", 3600),
    ("2h", 7200),
    ("4h", 14_400),
];

pub(super) fn call(path: &str, valid: &Valid, env: &RequestContext) -> Result<Value, ApiError> {
    let m = &*env.market;
    let now_s = env.now_ms / 1000;
    match path {
        "backtesting/orderbook-data" => orderbook_data(m, now_s, valid),
        "backtesting/technical-indicators" => indicators(m, now_s, valid),
        "backtesting/availability" => Ok(Value::Array(
            m.symbols()
                .iter()
                .map(|s| {
                    json!({
                        "exchange": s.exchange, "symbol": s.pair(), "code": s.code, "type": "spot",
                        "from": ORIGIN_S, "to": now_s,
                        "orderbook": {"resolution_s": 1, "max_rows": MAX_SNAPSHOTS},
                        "candles": {"intervals": INTERVALS.iter().map(|i| i.0).collect::<Vec<_>>(), "max_rows": MAX_CANDLES},
                    })
                })
                .collect(),
        )),
        "tests/black-scholes-implied-volatility-calculator" => black_scholes(valid),
        _ => Err(ApiError::new(trading_model::ErrorCode::EmptyData)),
    }
}

/// The symbol named by `exchange` and `symbol` (BASE/QUOTE), after checking `type`.
fn resolve<'a>(
    m: &'a Market,
    exchange: &str,
    kind: &str,
    symbol: &str,
) -> Result<&'a Symbol, ApiError> {
    let ex = exchange.trim().to_ascii_lowercase();
    if m.exchange(&ex).is_none() {
        return Err(unknown_exchange(m, "exchange"));
    }
    if !kind.eq_ignore_ascii_case("spot") {
        return Err(refused_with(
            "type",
            "Only spot markets are simulated.",
            Some(("allowed", json!(["spot"]))),
        ));
    }
    let pair = symbol.trim().to_ascii_uppercase();
    m.symbols()
        .iter()
        .find(|s| s.exchange == ex && s.pair() == pair)
        .ok_or_else(|| {
            refused_with(
                "symbol",
                format!("{pair} is not listed on {ex}; the listed pairs are attached."),
                Some((
                    "supported",
                    json!(m.symbols_of(&ex).map(Symbol::pair).collect::<Vec<_>>()),
                )),
            )
        })
}

/// `timefrom..=timeto` in seconds, inside the simulated history and not in the future.
fn range(timefrom: i64, timeto: i64, now_s: u64) -> Result<(u64, u64), ApiError> {
    let get = |t: i64| u64::try_from(t).unwrap_or(0);
    let (from, to) = (get(timefrom), get(timeto));
    if from < ORIGIN_S {
        return Err(refused(
            "timefrom",
            format!("History starts at {ORIGIN_S} (Unix seconds)."),
        ));
    }
    if to > now_s {
        return Err(refused(
            "timeto",
            format!("timeto lies in the future (now is {now_s}); times are Unix seconds."),
        ));
    }
    if to < from {
        return Err(refused("timeto", "timeto is before timefrom."));
    }
    Ok((from, to))
}

fn orderbook_data(m: &Market, now_s: u64, valid: &Valid) -> Result<Value, ApiError> {
    let p = typed::BacktestingOrderbookData::from_valid(valid)?;
    let sym = resolve(m, &p.exchange, &p.r#type, &p.symbol)?;
    let (from, to) = range(p.timefrom, p.timeto, now_s)?;
    if to - from + 1 > MAX_SNAPSHOTS {
        return Err(refused(
            "timeto",
            format!(
                "The range holds {} snapshots; at most {MAX_SNAPSHOTS} (one a second) per call.",
                to - from + 1
            ),
        ));
    }
    let levels = |l: &[trading_model::market::Level]| -> Vec<Value> {
        l.iter().map(|x| json!([x.price, x.qty])).collect()
    };
    let snapshots: Vec<Value> = (from..=to)
        .filter_map(|s| m.book(&sym.code, s * 1000))
        .map(
            |b| json!({"time": b.time_ms / 1000, "bids": levels(&b.bids), "asks": levels(&b.asks)}),
        )
        .collect();
    Ok(json!({
        "exchange": sym.exchange, "symbol": sym.pair(), "code": sym.code, "type": "spot",
        "timefrom": from, "timeto": to, "resolution_s": 1,
        "rows": snapshots.len(), "snapshots": snapshots,
    }))
}

fn indicators(m: &Market, now_s: u64, valid: &Valid) -> Result<Value, ApiError> {
    let p = typed::BacktestingTechnicalIndicators::from_valid(valid)?;
    let sym = resolve(m, &p.exchange, &p.r#type, &p.symbol)?;
    let (from, to) = range(p.timefrom, p.timeto, now_s)?;
    let name = p.interval.as_str();
    let width = INTERVALS.iter().find(|i| i.0 == name).map_or(60, |i| i.1);
    let first = from - from % width;
    let count = (to - first) / width + 1;
    if count > MAX_CANDLES {
        return Err(refused(
            "timeto",
            format!("The range holds {count} {name} candles; at most {MAX_CANDLES} per call."),
        ));
    }
    // Earlier candles warm the indicators up so the first answered candle has values.
    let warm = first
        .saturating_sub(PERIOD as u64 * width)
        .max(ORIGIN_S - ORIGIN_S % width);
    let step = width / SAMPLES_PER_CANDLE;
    let samples: Vec<(u64, f64)> = (0..)
        .map(|i| warm + i * step)
        .take_while(|t| *t <= to)
        .filter_map(|t| Some((t, m.mid(&sym.code, t * 1000)?)))
        .collect();
    let candles = analytics::candles(&samples, width);
    let closes: Vec<f64> = candles.iter().map(|c| c.close).collect();
    let (sma, ema, rsi) = (
        analytics::sma(&closes, PERIOD),
        analytics::ema(&closes, PERIOD),
        analytics::rsi(&closes, PERIOD),
    );
    let rows: Vec<Value> = candles
        .iter()
        .enumerate()
        .filter(|(_, c)| c.time >= first)
        .map(|(i, c)| {
            json!({
                "time": c.time, "open": r8(c.open), "high": r8(c.high), "low": r8(c.low),
                "close": r8(c.close), "sma": sma[i].map(r8), "ema": ema[i].map(r8),
                "rsi": rsi[i].map(|x| (x * 100.0).round() / 100.0),
            })
        })
        .collect();
    Ok(json!({
        "exchange": sym.exchange, "symbol": sym.pair(), "code": sym.code, "type": "spot",
        "interval": name, "timefrom": from, "timeto": to,
        "indicators": {"sma": {"period": PERIOD}, "ema": {"period": PERIOD}, "rsi": {"period": PERIOD}},
        "source": "mid price (average of best bid and best ask)",
        "candles": rows,
    }))
}

/// Inputs of the calculator when absent: a worked example (an at-the-money call).
const OPTION_DEFAULTS: [(&str, f64); 5] = [
    ("price", 100.0),
    ("strike", 100.0),
    ("time", 0.5),
    ("rate", 0.01),
    ("option_price", 8.0),
];

fn decimal(name: &str, given: Option<&str>) -> Result<f64, ApiError> {
    match given {
        Some(t) => t
            .parse::<f64>()
            .map_err(|_| refused(name, "Expected a decimal number.")),
        None => Ok(OPTION_DEFAULTS
            .iter()
            .find(|d| d.0 == name)
            .map_or(0.0, |d| d.1)),
    }
}

fn black_scholes(valid: &Valid) -> Result<Value, ApiError> {
    let p = typed::TestsBlackScholesImpliedVolatilityCalculator::from_valid(valid)?;
    let spot = decimal("price", p.price.as_deref())?;
    let strike = decimal("strike", p.strike.as_deref())?;
    let years = decimal("time", p.time.as_deref())?;
    let rate = decimal("rate", p.rate.as_deref())?;
    let option_price = decimal("option_price", p.option_price.as_deref())?;
    let kind = match p.r#type.as_str() {
        "put" => OptionKind::Put,
        _ => OptionKind::Call,
    };
    for (name, v) in [("price", spot), ("strike", strike), ("time", years)] {
        if v <= 0.0 {
            return Err(refused(name, "Must be greater than zero."));
        }
    }
    let o = OptionInputs {
        spot,
        strike,
        years,
        rate,
        kind,
    };
    let sigma = analytics::implied_volatility(&o, option_price).map_err(|_| {
        let low = analytics::black_scholes(&o, 1e-6).price;
        refused(
            "option_price",
            format!(
                "No volatility gives this price: it must lie above {} (the value without volatility) and below the price of the underlying.",
                r8(low)
            ),
        )
    })?;
    let g = analytics::black_scholes(&o, sigma);
    Ok(json!({
        "inputs": {
            "price": spot, "strike": strike, "time": years, "rate": rate,
            "option_price": option_price,
            "type": if kind == OptionKind::Put { "put" } else { "call" },
        },
        "implied_volatility": r8(sigma),
        "model_price": r8(g.price),
        "greeks": {
            "delta": r8(g.delta), "gamma": r8(g.gamma), "vega": r8(g.vega),
            "theta": r8(g.theta), "rho": r8(g.rho),
        },
        "method": "Newton-Raphson on the Black-Scholes price with bisection fallback",
    }))
}
