//! Account statistics and finance lists of paper trading, computed from the recorded
//! orders: per-code average-cost positions and profit and loss, commissions in US dollars,
//! fills newest first and the ranking of strategies by realised profit.
//!
//! Realised profit and loss uses the average-cost method per trading code, fees
//! subtracted; amounts are in each code's quote asset and converted to US dollars at the
//! simulated price for totals. What it deliberately does not do: no reading of orders and
//! no JSON; the server passes in the orders' facts and shapes the answers.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::market::{Market, Side};
use crate::orders::Position;

/// One fill of a recorded order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trade {
    /// When it filled.
    pub time_ms: u64,
    /// Amount in the base asset.
    pub amount: f64,
    /// Price in the quote asset.
    pub price: f64,
    /// Fee paid, in the quote asset.
    pub fee: f64,
}

/// What the reports need of one recorded paper order.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderView<'a> {
    /// Order id.
    pub id: i64,
    /// Trading code (`binance-btcusdt`).
    pub code: &'a str,
    /// Buy or sell.
    pub side: Side,
    /// Amount filled.
    pub filled: f64,
    /// Fees paid over all its fills.
    pub fee: f64,
    /// When it was sent to the exchange.
    pub send_ms: u64,
    /// When it reached a final status (0 while live).
    pub done_ms: u64,
    /// Its fills in recording order.
    pub trades: Vec<Trade>,
}

/// Where a fill sits: `orders[order].trades[trade]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FillAt {
    /// When it filled.
    pub time_ms: u64,
    /// Index of its order in the slice given.
    pub order: usize,
    /// Index of the fill in that order's trades.
    pub trade: usize,
}

/// Every fill of `orders`, oldest first (ties by order id, then recording order).
pub fn fills(orders: &[OrderView<'_>]) -> Vec<FillAt> {
    let mut out: Vec<FillAt> = orders
        .iter()
        .enumerate()
        .flat_map(|(order, o)| {
            o.trades.iter().enumerate().map(move |(trade, t)| FillAt {
                time_ms: t.time_ms,
                order,
                trade,
            })
        })
        .collect();
    out.sort_by_key(|f| (f.time_ms, orders[f.order].id));
    out
}

/// Every fill of `orders`, newest first, as the recent-transactions list shows them.
pub fn recent(orders: &[OrderView<'_>]) -> Vec<FillAt> {
    let mut out = fills(orders);
    out.reverse();
    out
}

/// The average-cost position of each trading code, fills booked oldest first.
pub fn positions<'a>(orders: &[OrderView<'a>]) -> BTreeMap<&'a str, Position> {
    let mut out: BTreeMap<&'a str, Position> = BTreeMap::new();
    for f in fills(orders) {
        let o = &orders[f.order];
        let t = &o.trades[f.trade];
        out.entry(o.code)
            .or_default()
            .trade(o.side, t.amount, t.price, t.fee);
    }
    out
}

/// `amount` in the quote asset of `code`, in US dollars at `time_ms`; unchanged when the
/// code or its quote asset is unknown.
pub fn usd(market: &Market, code: &str, amount: f64, time_ms: u64) -> f64 {
    let rate = market
        .symbol(code)
        .and_then(|s| market.asset_usd(s.quote, time_ms))
        .unwrap_or(1.0);
    amount * rate
}

/// One trading code's line of the account statistics, in its quote asset.
#[derive(Debug, Clone)]
pub struct CodePnl<'a> {
    /// Trading code.
    pub code: &'a str,
    /// Its average-cost position.
    pub position: Position,
    /// Mid price now (0 for an unknown code).
    pub mark_price: f64,
    /// Open quantity valued at the mark against its average cost.
    pub unrealised: f64,
}

impl CodePnl<'_> {
    /// Realised profit and loss less fees.
    pub fn realised_net(&self) -> f64 {
        self.position.realised - self.position.fees
    }
}

/// Totals in US dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsdTotals {
    /// Realised profit and loss less fees.
    pub realised_net: f64,
    /// Fees paid.
    pub fees: f64,
    /// Unrealised profit and loss.
    pub unrealised: f64,
}

/// The account statistics of a set of orders at `now`.
#[derive(Debug, Clone)]
pub struct AccountPnl<'a> {
    /// One line per trading code, in code order.
    pub codes: Vec<CodePnl<'a>>,
    /// Number of fills over all orders.
    pub fills: usize,
    /// The lines summed in US dollars at `now`.
    pub total_usd: UsdTotals,
}

/// Positions, marks and profit and loss of `orders` at `now`.
pub fn account_pnl<'a>(market: &Market, orders: &[OrderView<'a>], now: u64) -> AccountPnl<'a> {
    let mut total = UsdTotals::default();
    let mut codes = Vec::new();
    for (code, position) in positions(orders) {
        let mark_price = market.mid(code, now).unwrap_or(0.0);
        let unrealised = if position.qty == 0.0 {
            0.0
        } else {
            (mark_price - position.avg) * position.qty
        };
        let line = CodePnl {
            code,
            position,
            mark_price,
            unrealised,
        };
        total.realised_net += usd(market, code, line.realised_net(), now);
        total.fees += usd(market, code, line.position.fees, now);
        total.unrealised += usd(market, code, unrealised, now);
        codes.push(line);
    }
    AccountPnl {
        codes,
        fills: orders.iter().map(|o| o.trades.len()).sum(),
        total_usd: total,
    }
}

/// One order's commission.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Commission {
    /// When it was paid: the later of sending and completion.
    pub time_ms: u64,
    /// The fee in US dollars at that time.
    pub fee_usd: f64,
}

/// The commission `o` paid.
pub fn commission(market: &Market, o: &OrderView<'_>) -> Commission {
    let time_ms = o.done_ms.max(o.send_ms);
    Commission {
        time_ms,
        fee_usd: usd(market, o.code, o.fee, time_ms),
    }
}

/// One strategy's results, in US dollars at the time given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StrategyPnl {
    /// Strategy id.
    pub id: i64,
    /// Realised profit and loss less fees.
    pub realised_net_usd: f64,
    /// Fees paid.
    pub fees_usd: f64,
    /// Orders it placed.
    pub orders: usize,
    /// Orders with some fill.
    pub filled_orders: usize,
}

/// The results of strategy `id` from its `orders` at `now`.
pub fn strategy_pnl(market: &Market, id: i64, orders: &[OrderView<'_>], now: u64) -> StrategyPnl {
    let (mut realised, mut fees) = (0.0, 0.0);
    for (code, p) in positions(orders) {
        realised += usd(market, code, p.realised - p.fees, now);
        fees += usd(market, code, p.fees, now);
    }
    StrategyPnl {
        id,
        realised_net_usd: realised,
        fees_usd: fees,
        orders: orders.len(),
        filled_orders: orders.iter().filter(|o| o.filled > 0.0).count(),
    }
}

/// Sorts strategies best first (highest realised net), ties by id; `T` rides along.
/// The paging convention's "newest first" has no meaning for a ranking.
pub fn rank<T>(rows: &mut [(StrategyPnl, T)]) {
    rows.sort_by(|(a, _), (b, _)| by_rank(a, b));
}

fn by_rank(a: &StrategyPnl, b: &StrategyPnl) -> Ordering {
    b.realised_net_usd
        .total_cmp(&a.realised_net_usd)
        .then(a.id.cmp(&b.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODE: &str = "binance-btcusdt";

    fn trade(time_ms: u64, amount: f64, price: f64, fee: f64) -> Trade {
        Trade {
            time_ms,
            amount,
            price,
            fee,
        }
    }

    fn order(id: i64, code: &'static str, side: Side, trades: Vec<Trade>) -> OrderView<'static> {
        OrderView {
            id,
            code,
            side,
            filled: trades.iter().map(|t| t.amount).sum(),
            fee: trades.iter().map(|t| t.fee).sum(),
            send_ms: trades.first().map_or(0, |t| t.time_ms),
            done_ms: trades.last().map_or(0, |t| t.time_ms),
            trades,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * a.abs().max(1.0)
    }

    #[test]
    fn fills_run_oldest_first_ties_by_order_id() {
        let orders = [
            order(5, CODE, Side::Sell, vec![trade(30, 1.0, 1.0, 0.0)]),
            order(
                2,
                CODE,
                Side::Buy,
                vec![trade(10, 1.0, 1.0, 0.0), trade(30, 1.0, 1.0, 0.0)],
            ),
            order(9, CODE, Side::Buy, vec![trade(20, 1.0, 1.0, 0.0)]),
        ];
        let at: Vec<(usize, usize)> = fills(&orders).iter().map(|f| (f.order, f.trade)).collect();
        assert_eq!(at, [(1, 0), (2, 0), (1, 1), (0, 0)]);
        let newest: Vec<u64> = recent(&orders).iter().map(|f| f.time_ms).collect();
        assert_eq!(newest, [30, 30, 20, 10]);
    }

    #[test]
    fn positions_book_fills_in_time_order_per_code() {
        // The sell is recorded first but filled last, so it realises against both buys.
        let orders = [
            order(1, CODE, Side::Sell, vec![trade(30, 1.0, 30.0, 0.1)]),
            order(2, CODE, Side::Buy, vec![trade(10, 1.0, 10.0, 0.1)]),
            order(3, CODE, Side::Buy, vec![trade(20, 1.0, 20.0, 0.1)]),
            order(4, "kraken-ethusd", Side::Buy, vec![trade(5, 2.0, 3.0, 0.0)]),
        ];
        let p = positions(&orders);
        assert_eq!(
            p.keys().copied().collect::<Vec<_>>(),
            [CODE, "kraken-ethusd"]
        );
        let btc = &p[CODE];
        assert!(close(btc.realised, 15.0) && close(btc.qty, 1.0) && close(btc.avg, 15.0));
        assert!(close(btc.fees, 0.3) && close(btc.bought, 2.0) && close(btc.sold, 1.0));
        assert!(close(p["kraken-ethusd"].qty, 2.0));
    }

    #[test]
    fn usd_converts_at_the_quote_price_and_leaves_unknown_codes_alone() {
        let m = Market::new(7);
        let now = 1_767_225_600_000;
        assert!(close(
            usd(&m, CODE, 2.0, now),
            2.0 * m.asset_usd("USDT", now).unwrap()
        ));
        assert_eq!(usd(&m, "nowhere-abcxyz", 2.5, now), 2.5);
    }

    #[test]
    fn account_pnl_marks_open_quantity_and_nets_fees() {
        let m = Market::new(7);
        let now = 1_767_225_600_000;
        let orders = [
            order(1, CODE, Side::Buy, vec![trade(10, 2.0, 100.0, 1.0)]),
            order(2, CODE, Side::Sell, vec![trade(20, 1.0, 110.0, 0.5)]),
            order(
                3,
                "nowhere-abcxyz",
                Side::Buy,
                vec![trade(30, 1.0, 4.0, 0.0)],
            ),
            order(
                4,
                "nowhere-abcxyz",
                Side::Sell,
                vec![trade(40, 1.0, 5.0, 0.25)],
            ),
        ];
        let a = account_pnl(&m, &orders, now);
        assert_eq!(a.fills, 4);
        let [btc, flat] = &a.codes[..] else {
            panic!("two codes expected: {:?}", a.codes)
        };
        let mid = m.mid(CODE, now).unwrap();
        assert_eq!((btc.code, btc.mark_price), (CODE, mid));
        assert!(close(btc.realised_net(), 10.0 - 1.5));
        assert!(close(btc.unrealised, mid - 100.0));
        // A closed position has nothing unrealised, even without a mark price.
        assert_eq!((flat.mark_price, flat.unrealised), (0.0, 0.0));
        assert!(close(flat.realised_net(), 0.75));
        let rate = m.asset_usd("USDT", now).unwrap();
        assert!(close(a.total_usd.realised_net, 8.5 * rate + 0.75));
        assert!(close(a.total_usd.fees, 1.5 * rate + 0.25));
        assert!(close(a.total_usd.unrealised, (mid - 100.0) * rate));
    }

    #[test]
    fn commission_is_paid_at_the_later_of_sending_and_completion() {
        let m = Market::new(7);
        let mut o = order(1, CODE, Side::Buy, vec![trade(1_000, 1.0, 10.0, 0.02)]);
        o.send_ms = 5_000;
        let c = commission(&m, &o);
        assert_eq!(c.time_ms, 5_000);
        assert!(close(c.fee_usd, 0.02 * m.asset_usd("USDT", 5_000).unwrap()));
        o.done_ms = 9_000;
        assert_eq!(commission(&m, &o).time_ms, 9_000);
    }

    #[test]
    fn strategies_rank_best_first_ties_by_id() {
        let m = Market::new(7);
        let win = [
            order(
                1,
                "nowhere-abcxyz",
                Side::Buy,
                vec![trade(1, 1.0, 10.0, 0.0)],
            ),
            order(
                2,
                "nowhere-abcxyz",
                Side::Sell,
                vec![trade(2, 1.0, 12.0, 0.5)],
            ),
            order(3, "nowhere-abcxyz", Side::Buy, vec![]),
        ];
        let s = strategy_pnl(&m, 4, &win, 0);
        assert!(close(s.realised_net_usd, 1.5) && close(s.fees_usd, 0.5));
        assert_eq!((s.orders, s.filled_orders), (3, 2));
        let none = strategy_pnl(&m, 9, &[], 0);
        let mut rows = vec![
            (none, "nine"),
            (StrategyPnl { id: 7, ..s }, "seven"),
            (StrategyPnl { id: 3, ..none }, "three"),
            (s, "four"),
        ];
        rank(&mut rows);
        let names: Vec<&str> = rows.iter().map(|(_, n)| *n).collect();
        assert_eq!(names, ["four", "seven", "three", "nine"]);
    }
}
