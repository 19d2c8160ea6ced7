//! The simulated market behind the sandbox: exchanges, their symbols and order books that
//! follow a seeded random walk.
//!
//! Everything is a pure function of `(seed, trading code, time)`: there is no state to
//! advance and no clock to read, so a server driven by an injected clock sees the market
//! move exactly as far as that clock went, two servers with the same seed agree to the
//! byte, and a test can ask for any past or future instant without sleeping.
//!
//! The walk is a Brownian motion sampled per second. Evaluating it at an arbitrary second
//! would normally mean summing every step since the origin; instead the path is built
//! top-down (a "Brownian bridge"): block ends every 2^20 s come from a precomputed sum, and
//! each halving of the interval draws the midpoint from a hash of its position. One value
//! therefore costs 20 hashes, whatever the time, and the result is still an exact random
//! walk with independent increments.
//!
//! Prices are per asset in US dollars; a pair's price is the ratio of its two assets, so
//! cross rates stay consistent (ETH/BTC = ETH/USDT / BTC/USDT). Each exchange adds a small
//! bounded basis of its own, which is what makes spreads and arbitrage between exchanges.
//!
//! ```
//! use trading_model::market::Market;
//! let m = Market::new(7);
//! let t = 1_767_225_600_000; // 2026-01-01T00:00:00Z in ms
//! let book = m.book("binance-btcusdt", t).unwrap();
//! assert!(book.bids[0].price < book.asks[0].price);
//! assert_eq!(Market::new(7).book("binance-btcusdt", t), Some(book));
//! ```

use std::collections::HashMap;

pub mod analytics;
pub mod health;
pub mod news;
pub mod public;
pub mod trending;

/// A simulated exchange.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exchange {
    /// Exchange code as used in trading codes (`binance` in `binance-btcusdt`).
    pub code: &'static str,
    /// Display name.
    pub name: &'static str,
    /// Taker fee as a fraction of the traded value.
    pub fee: f64,
    /// Typical distance between best bid and best ask, in basis points of the price.
    pub spread_bps: f64,
    /// Whether orders need a `password` on the exchange key (as some real exchanges do).
    pub needs_password: bool,
}

/// The eight exchanges of the sandbox (codes of the original service).
pub const EXCHANGES: [Exchange; 8] = [
    ex("binance", "Binance", 0.001, 2.0),
    ex("bitfinex", "Bitfinex", 0.002, 4.0),
    ex("bitmax", "BitMax", 0.001, 6.0),
    ex("bitstamp", "Bitstamp", 0.005, 5.0),
    ex("coinbasepro", "Coinbase Pro", 0.005, 3.0),
    Exchange {
        needs_password: true,
        ..ex("huobipro", "Huobi Pro", 0.002, 4.0)
    },
    ex("kraken", "Kraken", 0.0026, 5.0),
    Exchange {
        needs_password: true,
        ..ex("okex", "OKEx", 0.0015, 4.0)
    },
];

const fn ex(code: &'static str, name: &'static str, fee: f64, spread_bps: f64) -> Exchange {
    Exchange {
        code,
        name,
        fee,
        spread_bps,
        needs_password: false,
    }
}

/// A tradable asset: its price in US dollars at the origin and its daily volatility.
struct Asset {
    name: &'static str,
    title: &'static str,
    usd: f64,
    daily_vol: f64,
}

const ASSETS: [Asset; 10] = [
    asset("BTC", "Bitcoin", 42_000.0, 0.03),
    asset("ETH", "Ethereum", 2_300.0, 0.04),
    asset("LTC", "Litecoin", 70.0, 0.05),
    asset("XRP", "Ripple", 0.6, 0.05),
    asset("BNB", "Binance Coin", 300.0, 0.04),
    asset("ADA", "Cardano", 0.5, 0.05),
    asset("SOL", "Solana", 100.0, 0.06),
    asset("DOGE", "Dogecoin", 0.08, 0.07),
    // Stable coins and the dollar itself: tiny volatility around 1.
    asset("USDT", "Tether", 1.0, 0.0005),
    asset("USD", "US Dollar", 1.0, 0.0),
];

const fn asset(name: &'static str, title: &'static str, usd: f64, daily_vol: f64) -> Asset {
    Asset {
        name,
        title,
        usd,
        daily_vol,
    }
}

/// Pairs per exchange as `(base, quote, min amount, price decimals, amount decimals)`.
/// Amount decimals of -1 mean "not published by the exchange", as the original shows.
type Listing = (&'static str, &'static str, f64, i32, i32);

const LISTINGS: [(&str, &[Listing]); 8] = [
    (
        "binance",
        &[
            ("BTC", "USDT", 0.0001, 2, 6),
            ("ETH", "USDT", 0.001, 2, 5),
            ("ETH", "BTC", 0.001, 6, 4),
            ("LTC", "USDT", 0.01, 2, 3),
            ("XRP", "USDT", 1.0, 4, 1),
            ("BNB", "USDT", 0.01, 2, 3),
            ("ADA", "USDT", 1.0, 4, 1),
            ("SOL", "USDT", 0.01, 2, 2),
            ("DOGE", "USDT", 10.0, 5, 0),
        ],
    ),
    (
        "bitfinex",
        &[
            ("BTC", "USD", 0.0002, 1, 8),
            ("ETH", "USD", 0.004, 2, 8),
            ("ETH", "BTC", 0.004, 6, 8),
            ("LTC", "USD", 0.1, 3, 8),
            ("XRP", "USD", 4.0, 5, 8),
        ],
    ),
    (
        "bitmax",
        &[
            ("BTC", "USDT", 0.0001, 2, 5),
            ("ETH", "USDT", 0.001, 2, 4),
            ("XRP", "USDT", 1.0, 5, -1),
            ("DOGE", "USDT", 10.0, 6, -1),
        ],
    ),
    (
        "bitstamp",
        &[
            ("BTC", "USD", 0.0002, 0, 8),
            ("ETH", "USD", 0.005, 1, 8),
            ("ETH", "BTC", 0.005, 8, 8),
            ("LTC", "USD", 0.1, 2, 8),
            ("XRP", "USD", 10.0, 5, 8),
        ],
    ),
    (
        "coinbasepro",
        &[
            ("BTC", "USD", 0.0001, 2, 8),
            ("ETH", "USD", 0.001, 2, 8),
            ("ETH", "BTC", 0.001, 5, 8),
            ("LTC", "USD", 0.01, 2, 8),
            ("SOL", "USD", 0.01, 2, 3),
            ("ADA", "USD", 1.0, 4, 2),
        ],
    ),
    (
        "huobipro",
        &[
            ("BTC", "USDT", 0.0001, 2, 6),
            ("ETH", "USDT", 0.001, 2, 4),
            ("LTC", "USDT", 0.001, 2, 4),
            ("XRP", "USDT", 1.0, 5, 2),
            ("DOGE", "USDT", 10.0, 6, 2),
        ],
    ),
    (
        "kraken",
        &[
            ("BTC", "USD", 0.0001, 1, 8),
            ("ETH", "USD", 0.01, 2, 8),
            ("ETH", "BTC", 0.01, 5, 8),
            ("XRP", "USD", 10.0, 5, 8),
            ("ADA", "USD", 10.0, 6, 8),
            ("SOL", "USD", 0.1, 2, 8),
        ],
    ),
    (
        "okex",
        &[
            ("BTC", "USDT", 0.0001, 1, 8),
            ("ETH", "USDT", 0.001, 2, 6),
            ("LTC", "USDT", 0.001, 2, 6),
            ("BNB", "USDT", 0.01, 3, 4),
            ("SOL", "USDT", 0.01, 3, 4),
        ],
    ),
];

/// One symbol listed on one exchange (the spec's symbol record plus its exchange).
#[derive(Debug, Clone, PartialEq)]
pub struct Symbol {
    /// Stable id, from 1, in listing order.
    pub id: u32,
    /// Exchange code.
    pub exchange: &'static str,
    /// Base asset (`BTC`).
    pub base: &'static str,
    /// Quote asset (`USDT`).
    pub quote: &'static str,
    /// Smallest order amount, in the base asset.
    pub min: f64,
    /// Price precision: decimals of a price.
    pub pp: i32,
    /// Amount precision: decimals of an amount; -1 when the exchange publishes none.
    pub pa: i32,
    /// Trading code `<exchange>-<base><quote>` in lower case.
    pub code: String,
    base_asset: usize,
    quote_asset: usize,
    exchange_index: usize,
}

impl Symbol {
    /// The pair as `BASE/QUOTE`.
    pub fn pair(&self) -> String {
        format!("{}/{}", self.base, self.quote)
    }

    /// The pair without separator in lower case (`btcusdt`), as used in trading codes.
    pub fn pair_code(&self) -> String {
        format!("{}{}", self.base, self.quote).to_ascii_lowercase()
    }

    /// The exchange this symbol is listed on.
    pub fn exchange_info(&self) -> &'static Exchange {
        &EXCHANGES[self.exchange_index]
    }

    /// Rounds a price to this symbol's price precision.
    pub fn round_price(&self, price: f64) -> f64 {
        round_to(price, self.pp)
    }

    /// Rounds an amount to this symbol's amount precision (8 decimals when unpublished).
    pub fn round_amount(&self, amount: f64) -> f64 {
        round_to(amount, if self.pa < 0 { 8 } else { self.pa })
    }
}

fn round_to(v: f64, decimals: i32) -> f64 {
    let f = 10f64.powi(decimals.clamp(0, 12));
    (v * f).round() / f
}

/// Full asset name (`Bitcoin`) for a ticker, if the sandbox knows it.
pub fn asset_name(ticker: &str) -> Option<&'static str> {
    ASSETS
        .iter()
        .find(|a| a.name.eq_ignore_ascii_case(ticker))
        .map(|a| a.title)
}

/// Every asset of the sandbox as `(ticker, name)`, in a fixed order (the US dollar last).
pub fn assets() -> impl Iterator<Item = (&'static str, &'static str)> {
    ASSETS.iter().map(|a| (a.name, a.title))
}

/// One price level of a book.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    /// Price in the quote asset.
    pub price: f64,
    /// Amount available at that price, in the base asset.
    pub qty: f64,
}

/// A book snapshot: five levels a side (the original's `ob1`..`ob5`), best first.
#[derive(Debug, Clone, PartialEq)]
pub struct Book {
    /// Trading code.
    pub code: String,
    /// Snapshot time (ms), on the simulation's one-second grid.
    pub time_ms: u64,
    /// Bids, highest first.
    pub bids: Vec<Level>,
    /// Asks, lowest first.
    pub asks: Vec<Level>,
}

impl Book {
    /// Middle of the best bid and best ask.
    pub fn mid(&self) -> f64 {
        (self.bids[0].price + self.asks[0].price) / 2.0
    }
}

/// Taker side of a public trade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The taker bought (lifted an ask).
    Buy,
    /// The taker sold (hit a bid).
    Sell,
}

impl Side {
    /// `buy` or `sell`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Buy => "buy",
            Side::Sell => "sell",
        }
    }
}

/// A public trade on a simulated exchange.
#[derive(Debug, Clone, PartialEq)]
pub struct Trade {
    /// Unique per code and time.
    pub id: u64,
    /// Time (ms).
    pub time_ms: u64,
    /// Price.
    pub price: f64,
    /// Amount in the base asset.
    pub qty: f64,
    /// Taker side.
    pub side: Side,
}

/// Levels per book side.
pub const BOOK_DEPTH: usize = 5;

/// Start of the simulated history: 2015-01-01T00:00:00Z (s). Earlier times read as this.
pub const ORIGIN_S: u64 = 1_420_070_400;

/// Seconds per top-level block of the bridge.
const BLOCK_LEVELS: u32 = 20;
const BLOCK_S: u64 = 1 << BLOCK_LEVELS;
/// Blocks precomputed: 2^10 blocks of ~12 days, so until about 2049.
const BLOCKS: usize = 1 << 10;
/// Long-run drift is damped so that prices stay plausible across the decades covered.
const LONG_RUN_DAMPING: f64 = 0.15;

/// The simulated market for one seed.
#[derive(Debug, Clone)]
pub struct Market {
    seed: u64,
    symbols: Vec<Symbol>,
    by_code: HashMap<String, usize>,
    /// Per asset, the walk (in per-second standard units) at every block end.
    block_ends: Vec<Vec<f64>>,
    /// Per exchange, the walk of its basis at every block end.
    basis_ends: Vec<Vec<f64>>,
}

impl Market {
    /// The market of `seed`; equal seeds give equal markets.
    pub fn new(seed: u64) -> Market {
        let mut symbols = Vec::new();
        for (exchange_index, (exchange, pairs)) in LISTINGS.iter().enumerate() {
            for &(base, quote, min, pp, pa) in *pairs {
                let base_asset = asset_index(base);
                let quote_asset = asset_index(quote);
                symbols.push(Symbol {
                    id: u32::try_from(symbols.len() + 1).unwrap_or(u32::MAX),
                    exchange,
                    base: ASSETS[base_asset].name,
                    quote: ASSETS[quote_asset].name,
                    min,
                    pp,
                    pa,
                    code: format!("{exchange}-{base}{quote}").to_ascii_lowercase(),
                    base_asset,
                    quote_asset,
                    exchange_index,
                });
            }
        }
        let by_code = symbols
            .iter()
            .enumerate()
            .map(|(i, s)| (s.code.clone(), i))
            .collect();
        let ends = |stream: u64, count: usize| -> Vec<Vec<f64>> {
            (0..count as u64)
                .map(|which| {
                    let mut acc = 0.0;
                    let mut out = Vec::with_capacity(BLOCKS + 1);
                    out.push(0.0);
                    for block in 0..BLOCKS as u64 {
                        acc += gaussian(seed, stream, which, u64::from(BLOCK_LEVELS), block)
                            * (BLOCK_S as f64).sqrt()
                            * LONG_RUN_DAMPING;
                        out.push(acc);
                    }
                    out
                })
                .collect()
        };
        Market {
            seed,
            symbols,
            by_code,
            block_ends: ends(STREAM_ASSET, ASSETS.len()),
            basis_ends: ends(STREAM_BASIS, EXCHANGES.len()),
        }
    }

    /// The seed this market was built from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The exchanges.
    pub fn exchanges(&self) -> &'static [Exchange] {
        &EXCHANGES
    }

    /// One exchange by code.
    pub fn exchange(&self, code: &str) -> Option<&'static Exchange> {
        EXCHANGES.iter().find(|e| e.code == code)
    }

    /// Every listed symbol, grouped by exchange in listing order.
    pub fn symbols(&self) -> &[Symbol] {
        &self.symbols
    }

    /// The symbol of a trading code (`binance-btcusdt`; ASCII case is ignored).
    pub fn symbol(&self, code: &str) -> Option<&Symbol> {
        let i = match self.by_code.get(code) {
            Some(i) => *i,
            None => *self.by_code.get(&code.to_ascii_lowercase())?,
        };
        Some(&self.symbols[i])
    }

    /// Symbols of one exchange.
    pub fn symbols_of<'a>(&'a self, exchange: &'a str) -> impl Iterator<Item = &'a Symbol> + 'a {
        self.symbols.iter().filter(move |s| s.exchange == exchange)
    }

    /// An asset's price in US dollars at second `s` (no exchange basis).
    pub fn asset_usd(&self, ticker: &str, time_ms: u64) -> Option<f64> {
        let a = ASSETS
            .iter()
            .position(|a| a.name.eq_ignore_ascii_case(ticker))?;
        Some(self.usd(a, seconds(time_ms)))
    }

    fn usd(&self, asset: usize, s: u64) -> f64 {
        let a = &ASSETS[asset];
        if a.daily_vol == 0.0 {
            return a.usd;
        }
        let per_second = a.daily_vol / 86_400f64.sqrt();
        let w = walk(
            self.seed,
            STREAM_ASSET,
            asset as u64,
            &self.block_ends[asset],
            s,
        );
        a.usd * (w * per_second).exp()
    }

    /// The exchange's basis: a bounded deviation (about ±0.3 %) from the common price.
    fn basis(&self, exchange: usize, s: u64) -> f64 {
        let w = walk(
            self.seed,
            STREAM_BASIS,
            exchange as u64,
            &self.basis_ends[exchange],
            s,
        );
        // One standard unit per second: the basis drifts over hours, not seconds.
        0.003 * (w / 300.0).tanh()
    }

    /// Mid price of a trading code at `time_ms` (on the one-second grid).
    pub fn mid(&self, code: &str, time_ms: u64) -> Option<f64> {
        let sym = self.symbol(code)?;
        Some(self.mid_of(sym, seconds(time_ms)))
    }

    fn mid_of(&self, sym: &Symbol, s: u64) -> f64 {
        let pair = self.usd(sym.base_asset, s) / self.usd(sym.quote_asset, s);
        pair * (1.0 + self.basis(sym.exchange_index, s))
    }

    /// The book of a trading code at `time_ms`: five levels a side, prices rounded to the
    /// symbol's precision, bids strictly below asks.
    pub fn book(&self, code: &str, time_ms: u64) -> Option<Book> {
        let sym = self.symbol(code)?;
        let s = seconds(time_ms);
        let mid = self.mid_of(sym, s);
        let ex = sym.exchange_info();
        let step = 10f64.powi(-sym.pp.clamp(0, 12));
        let key = sym_key(sym);
        let jitter = 0.5 + uniform(self.seed, STREAM_BOOK, key, 0, s);
        let half = (mid * ex.spread_bps / 20_000.0 * jitter).max(step / 2.0);
        let mut bids = Vec::with_capacity(BOOK_DEPTH);
        let mut asks = Vec::with_capacity(BOOK_DEPTH);
        let mut bid = sym.round_price(mid - half);
        let mut ask = sym.round_price(mid + half);
        if ask <= bid {
            ask = bid + step;
        }
        for level in 0..BOOK_DEPTH as u64 {
            if level > 0 {
                let gap_b =
                    mid * 0.0002 * (0.5 + uniform(self.seed, STREAM_BOOK, key, 10 + level, s));
                let gap_a =
                    mid * 0.0002 * (0.5 + uniform(self.seed, STREAM_BOOK, key, 20 + level, s));
                bid = sym.round_price(bid - gap_b.max(step));
                ask = sym.round_price(ask + gap_a.max(step));
            }
            let qty = |salt: u64| {
                let u = uniform(self.seed, STREAM_BOOK, key, salt, s);
                sym.round_amount(sym.min * (1.0 + (u * 400.0).floor()))
            };
            bids.push(Level {
                price: bid,
                qty: qty(30 + level),
            });
            asks.push(Level {
                price: ask,
                qty: qty(40 + level),
            });
        }
        Some(Book {
            code: sym.code.clone(),
            time_ms: s * 1000,
            bids,
            asks,
        })
    }

    /// Public trades of a trading code with `from_ms <= time < to_ms`, oldest first, at most
    /// `max`. Each second has zero to three trades at its best bid or ask.
    pub fn trades(&self, code: &str, from_ms: u64, to_ms: u64, max: usize) -> Vec<Trade> {
        let Some(sym) = self.symbol(code) else {
            return Vec::new();
        };
        let key = sym_key(sym);
        let mut out = Vec::new();
        let mut s = seconds(from_ms);
        while s * 1000 < to_ms && out.len() < max {
            let count = (uniform(self.seed, STREAM_TRADES, key, 0, s) * 4.0) as u64;
            let mut book = None;
            for n in 0..count {
                let time_ms =
                    s * 1000 + (uniform(self.seed, STREAM_TRADES, key, 1 + n, s) * 1000.0) as u64;
                if time_ms < from_ms || time_ms >= to_ms || out.len() >= max {
                    continue;
                }
                let b = book.get_or_insert_with(|| {
                    self.book(code, s * 1000).unwrap_or(Book {
                        code: String::new(),
                        time_ms: 0,
                        bids: vec![],
                        asks: vec![],
                    })
                });
                if b.bids.is_empty() {
                    break;
                }
                let side = if uniform(self.seed, STREAM_TRADES, key, 10 + n, s) < 0.5 {
                    Side::Buy
                } else {
                    Side::Sell
                };
                let price = match side {
                    Side::Buy => b.asks[0].price,
                    Side::Sell => b.bids[0].price,
                };
                let u = uniform(self.seed, STREAM_TRADES, key, 20 + n, s);
                out.push(Trade {
                    id: s * 10 + n,
                    time_ms,
                    price,
                    qty: sym.round_amount(sym.min * (1.0 + (u * 50.0).floor())),
                    side,
                });
            }
            s += 1;
        }
        out.sort_by_key(|t| (t.time_ms, t.id));
        out
    }
}

fn asset_index(name: &str) -> usize {
    ASSETS.iter().position(|a| a.name == name).unwrap_or(0)
}

fn sym_key(sym: &Symbol) -> u64 {
    u64::from(sym.id)
}

fn seconds(time_ms: u64) -> u64 {
    (time_ms / 1000).max(ORIGIN_S)
}

const STREAM_ASSET: u64 = 1;
const STREAM_BASIS: u64 = 2;
const STREAM_BOOK: u64 = 3;
const STREAM_TRADES: u64 = 4;

/// The walk (standard units per second) of `(stream, which)` at absolute second `s`.
fn walk(seed: u64, stream: u64, which: u64, block_ends: &[f64], s: u64) -> f64 {
    let k = s.saturating_sub(ORIGIN_S);
    let block = usize::try_from(k >> BLOCK_LEVELS).unwrap_or(usize::MAX);
    if block >= BLOCKS {
        return block_ends[BLOCKS];
    }
    let mut lo = block_ends[block];
    let mut hi = block_ends[block + 1];
    let mut start = (block as u64) << BLOCK_LEVELS;
    let offset = k - start;
    if offset == 0 {
        return lo;
    }
    // Halve [start, start + 2^level] until the point is an end: each midpoint is the mean
    // of the ends plus a Gaussian with the bridge's variance (a quarter of the length).
    let mut level = BLOCK_LEVELS;
    while level > 0 {
        let half = 1u64 << (level - 1);
        let mid_value = (lo + hi) / 2.0
            + gaussian(seed, stream, which, u64::from(level), start >> level)
                * (half as f64 / 2.0).sqrt();
        let mid = start + half;
        if k == mid {
            return mid_value;
        }
        if k < mid {
            hi = mid_value;
        } else {
            lo = mid_value;
            start = mid;
        }
        level -= 1;
    }
    lo
}

fn mix(mut z: u64) -> u64 {
    // SplitMix64's finaliser: a cheap bijection with good avalanche.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn hash(seed: u64, stream: u64, which: u64, salt: u64, index: u64) -> u64 {
    let mut h = mix(seed ^ 0x9e37_79b9_7f4a_7c15);
    for part in [stream, which, salt, index] {
        h = mix(h ^ part.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }
    h
}

/// Uniform in [0, 1).
fn uniform(seed: u64, stream: u64, which: u64, salt: u64, index: u64) -> f64 {
    (hash(seed, stream, which, salt, index) >> 11) as f64 / (1u64 << 53) as f64
}

/// Standard normal (Box-Muller).
fn gaussian(seed: u64, stream: u64, which: u64, salt: u64, index: u64) -> f64 {
    let h = hash(seed, stream, which, salt, index);
    let u1 = ((h >> 11) as f64 + 1.0) / ((1u64 << 53) as f64 + 1.0);
    let u2 = (mix(h) >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_767_225_600_000;

    #[test]
    fn deterministic_per_seed() {
        let a = Market::new(1);
        let b = Market::new(1);
        let c = Market::new(2);
        assert_eq!(a.book("kraken-btcusd", T), b.book("kraken-btcusd", T));
        assert_ne!(a.mid("kraken-btcusd", T), c.mid("kraken-btcusd", T));
    }

    #[test]
    fn books_are_sane_everywhere() {
        let m = Market::new(42);
        for sym in m.symbols() {
            for t in [0, T, T + 1_000, T + 86_400_000 * 365] {
                let b = m.book(&sym.code, t).unwrap();
                assert_eq!(b.bids.len(), BOOK_DEPTH);
                assert!(b.bids[0].price < b.asks[0].price, "{} {t}", sym.code);
                for w in b.bids.windows(2) {
                    assert!(w[0].price > w[1].price, "{}", sym.code);
                }
                for w in b.asks.windows(2) {
                    assert!(w[0].price < w[1].price, "{}", sym.code);
                }
                assert!(
                    b.bids
                        .iter()
                        .chain(&b.asks)
                        .all(|l| l.qty >= sym.min && l.price > 0.0)
                );
            }
        }
    }

    #[test]
    fn walk_is_continuous_and_moves() {
        let m = Market::new(3);
        let p0 = m.mid("binance-btcusdt", T).unwrap();
        let p1 = m.mid("binance-btcusdt", T + 1_000).unwrap();
        let day = m.mid("binance-btcusdt", T + 86_400_000).unwrap();
        assert!((p1 / p0 - 1.0).abs() < 0.01, "one second moves little");
        assert_ne!(p0, day, "a day moves the price");
        // The bridge lands exactly on the block ends.
        let k = BLOCK_S * 5;
        let w = walk(3, STREAM_ASSET, 0, &m.block_ends[0], ORIGIN_S + k);
        assert_eq!(w, m.block_ends[0][5]);
    }

    #[test]
    fn increments_have_the_right_scale() {
        // One-second increments of a standard walk have variance 1.
        let m = Market::new(9);
        let n = 20_000u64;
        let base = ORIGIN_S + 300_000_000;
        let mut sum_sq = 0.0;
        for i in 0..n {
            let a = walk(9, STREAM_ASSET, 0, &m.block_ends[0], base + i);
            let b = walk(9, STREAM_ASSET, 0, &m.block_ends[0], base + i + 1);
            sum_sq += (b - a) * (b - a);
        }
        let var = sum_sq / n as f64;
        assert!((0.9..1.1).contains(&var), "variance {var}");
    }

    #[test]
    fn cross_rates_are_consistent() {
        let m = Market::new(5);
        let eth = m.asset_usd("ETH", T).unwrap();
        let btc = m.asset_usd("BTC", T).unwrap();
        let cross = m.mid("kraken-ethbtc", T).unwrap();
        assert!((cross / (eth / btc) - 1.0).abs() < 0.01);
    }

    #[test]
    fn trades_are_ordered_and_bounded() {
        let m = Market::new(4);
        let t = m.trades("binance-ethusdt", T, T + 60_000, 1000);
        assert!(!t.is_empty());
        assert!(t.windows(2).all(|w| w[0].time_ms <= w[1].time_ms));
        assert!(t.iter().all(|x| (T..T + 60_000).contains(&x.time_ms)));
        assert_eq!(m.trades("binance-ethusdt", T, T + 60_000, 3).len(), 3);
        assert!(m.trades("nowhere-x", T, T + 1, 10).is_empty());
    }

    #[test]
    fn codes_are_unique_and_lower_case() {
        let m = Market::new(0);
        let mut codes: Vec<_> = m.symbols().iter().map(|s| s.code.clone()).collect();
        assert!(codes.iter().all(|c| c == &c.to_ascii_lowercase()));
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), m.symbols().len());
        assert_eq!(m.symbol("BINANCE-BTCUSDT").unwrap().pair(), "BTC/USDT");
        assert_eq!(asset_name("btc"), Some("Bitcoin"));
    }
}
