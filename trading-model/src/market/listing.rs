//! What the sandbox lists: its exchanges, the assets they trade with their prices at the
//! origin and volatilities, and each exchange's symbols.

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
pub(super) struct Asset {
    pub(super) name: &'static str,
    pub(super) title: &'static str,
    pub(super) usd: f64,
    pub(super) daily_vol: f64,
}

pub(super) const ASSETS: [Asset; 10] = [
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

pub(super) const LISTINGS: [(&str, &[Listing]); 8] = [
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
    pub(super) base_asset: usize,
    pub(super) quote_asset: usize,
    pub(super) exchange_index: usize,
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
