//! Order matching for paper trading: which parts of an order a book snapshot fills.
//!
//! A market order walks the opposite side of the book level by level until its amount is
//! met or the five levels run out; a limit order does the same but stops at the first level
//! priced through its limit. Each call matches against one snapshot as if the order were
//! alone in the market: snapshots are regenerated every second, so nothing here depletes a
//! book or remembers earlier fills. What it deliberately does not do: no balances, fees,
//! order states or clocks (the server keeps those); no queue position for resting orders.
//!
//! ```
//! use trading_model::market::{Market, Side};
//! use trading_model::orders::{summarize, take};
//! let book = Market::new(7).book("binance-btcusdt", 1_767_225_600_000).unwrap();
//! let fills = take(&book, Side::Buy, 0.0002, None);
//! let s = summarize(0.0002, &fills);
//! assert!((s.filled + s.remaining - 0.0002).abs() < 1e-12);
//! assert!(s.average >= book.asks[0].price * (1.0 - 1e-12));
//! ```

use crate::market::{Book, Side};

/// Amounts below this are treated as zero (float dust from subtracting fills).
pub const DUST: f64 = 1e-12;

/// One fill of an order: a price and the amount traded there (base asset).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fill {
    /// Price in the quote asset.
    pub price: f64,
    /// Amount in the base asset.
    pub qty: f64,
}

/// Totals of a set of fills for an order of `amount`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Amount traded.
    pub filled: f64,
    /// Amount still open (`amount - filled`, never negative).
    pub remaining: f64,
    /// Quote value traded: the sum of price times amount over the fills.
    pub cost: f64,
    /// Average price (`cost / filled`; 0 without fills).
    pub average: f64,
}

/// Fills for `amount` taking liquidity from `book` on `side` (a buy takes asks, a sell takes
/// bids), best level first, never at a price worse than `limit` when one is given.
pub fn take(book: &Book, side: Side, amount: f64, limit: Option<f64>) -> Vec<Fill> {
    let levels = match side {
        Side::Buy => &book.asks,
        Side::Sell => &book.bids,
    };
    let mut left = amount;
    let mut out = Vec::new();
    for level in levels {
        if left <= DUST {
            break;
        }
        let through = match (side, limit) {
            (Side::Buy, Some(l)) => level.price > l,
            (Side::Sell, Some(l)) => level.price < l,
            (_, None) => false,
        };
        if through {
            break;
        }
        let qty = left.min(level.qty);
        if qty > DUST {
            out.push(Fill {
                price: level.price,
                qty,
            });
            left -= qty;
        }
    }
    out
}

/// Totals of `fills` for an order of `amount`.
pub fn summarize(amount: f64, fills: &[Fill]) -> Summary {
    let filled: f64 = fills.iter().map(|f| f.qty).sum();
    let cost: f64 = fills.iter().map(|f| f.price * f.qty).sum();
    let remaining = (amount - filled).max(0.0);
    Summary {
        filled,
        remaining: if remaining <= DUST { 0.0 } else { remaining },
        cost,
        average: if filled > DUST { cost / filled } else { 0.0 },
    }
}

/// The average-cost book of one trading code: realised profit and loss of sells against
/// the average buying price (and the mirror for shorts).
#[derive(Default, Debug, Clone)]
pub struct Position {
    /// Held quantity (negative: short).
    pub qty: f64,
    /// Average cost of the held quantity.
    pub avg: f64,
    /// Quantity bought.
    pub bought: f64,
    /// Quantity sold.
    pub sold: f64,
    /// Realised profit and loss, in the quote asset.
    pub realised: f64,
    /// Fees paid.
    pub fees: f64,
}

impl Position {
    /// Books one trade: buys and sells at the average cost, fees summed.
    pub fn trade(&mut self, side: Side, qty: f64, price: f64, fee: f64) {
        let d = if side == Side::Buy { qty } else { -qty };
        if side == Side::Buy {
            self.bought += qty;
        } else {
            self.sold += qty;
        }
        self.fees += fee;
        if self.qty == 0.0 || self.qty.signum() == d.signum() {
            let total = self.qty.abs() + qty;
            self.avg = (self.avg * self.qty.abs() + price * qty) / total;
            self.qty += d;
            return;
        }
        let closed = qty.min(self.qty.abs());
        self.realised += closed * (price - self.avg) * self.qty.signum();
        self.qty += d;
        if self.qty.abs() < DUST {
            self.qty = 0.0;
            self.avg = 0.0;
        } else if qty > closed {
            self.avg = price;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::market::{Level, Market};
    use proptest::prelude::*;

    fn book(bids: &[(f64, f64)], asks: &[(f64, f64)]) -> Book {
        let lv = |v: &[(f64, f64)]| v.iter().map(|&(price, qty)| Level { price, qty }).collect();
        Book {
            code: "x-y".into(),
            time_ms: 0,
            bids: lv(bids),
            asks: lv(asks),
        }
    }

    #[test]
    fn market_buy_walks_levels_and_stops_when_the_book_runs_out() {
        let b = book(&[(9.0, 1.0)], &[(10.0, 1.0), (11.0, 2.0)]);
        let f = take(&b, Side::Buy, 2.5, None);
        assert_eq!(
            f,
            [
                Fill {
                    price: 10.0,
                    qty: 1.0
                },
                Fill {
                    price: 11.0,
                    qty: 1.5
                }
            ]
        );
        let s = summarize(2.5, &f);
        assert_eq!((s.filled, s.remaining, s.cost), (2.5, 0.0, 26.5));
        let s = summarize(5.0, &take(&b, Side::Buy, 5.0, None));
        assert_eq!((s.filled, s.remaining), (3.0, 2.0));
    }

    #[test]
    fn limit_sell_never_fills_below_its_price() {
        let b = book(&[(9.0, 1.0), (8.0, 1.0)], &[(10.0, 1.0)]);
        assert_eq!(take(&b, Side::Sell, 2.0, Some(8.5)).len(), 1);
        assert!(take(&b, Side::Sell, 2.0, Some(9.5)).is_empty());
    }

    proptest! {
        #[test]
        fn fills_add_up_and_respect_the_limit(
            seed in 0u64..50,
            t in 0u64..10_000_000,
            amount in 0.0001f64..0.5,
            buy in any::<bool>(),
            limit_bps in proptest::option::of(-50i32..50),
        ) {
            let m = Market::new(seed);
            let b = m.book("binance-btcusdt", 1_700_000_000_000 + t * 1000).unwrap();
            let side = if buy { Side::Buy } else { Side::Sell };
            let limit = limit_bps.map(|bps| b.mid() * (1.0 + f64::from(bps) / 10_000.0));
            let fills = take(&b, side, amount, limit);
            let s = summarize(amount, &fills);
            prop_assert!((s.filled + s.remaining - amount).abs() < 1e-9);
            let cost: f64 = fills.iter().map(|f| f.price * f.qty).sum();
            prop_assert!((s.cost - cost).abs() < 1e-9);
            prop_assert!(s.filled <= amount + 1e-12);
            for f in &fills {
                prop_assert!(f.qty > 0.0);
                if let Some(l) = limit {
                    let ok = if buy { f.price <= l } else { f.price >= l };
                    prop_assert!(ok, "fill {:?} through limit {}", f, l);
                }
            }
            // Levels are taken best first.
            for w in fills.windows(2) {
                let ok = if buy { w[0].price <= w[1].price } else { w[0].price >= w[1].price };
                prop_assert!(ok, "levels out of order: {:?}", w);
            }
        }
    }

    #[test]
    fn average_cost_realises_on_sells() {
        let mut p = Position::default();
        p.trade(Side::Buy, 1.0, 10.0, 0.1);
        p.trade(Side::Buy, 1.0, 20.0, 0.1);
        p.trade(Side::Sell, 1.0, 30.0, 0.1);
        assert!((p.realised - 15.0).abs() < 1e-9);
        assert!((p.qty - 1.0).abs() < 1e-9 && (p.avg - 15.0).abs() < 1e-9);
        assert!((p.fees - 0.3).abs() < 1e-9);
    }
}
