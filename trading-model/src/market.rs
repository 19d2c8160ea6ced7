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

mod listing;
mod walk;

use listing::{ASSETS, LISTINGS};
pub use listing::{EXCHANGES, Exchange, Symbol, asset_name, assets};
use walk::*;

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
