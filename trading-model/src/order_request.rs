//! The checks of a paper order request (`exchange-query/order-create`) that validation
//! cannot do: the trading code must be listed, amounts and prices must fit the symbol,
//! repeats must stay in range. The first problem found is the answer, in the order the
//! parameters are documented. What it deliberately does not do: no key or balance
//! checks (they need the store) and no placing; the server does both with the result.

use crate::errors::ApiError;
use crate::market::{Market, Side, Symbol};
use crate::typed::ExchangeQueryOrderCreate;

/// An order request that passed every check, ready to be placed `repeat` times.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderRequest<'m> {
    /// The listed symbol the order trades.
    pub symbol: &'m Symbol,
    /// `market` or `limit`.
    pub kind: String,
    /// Buy or sell.
    pub side: Side,
    /// Amount rounded to the symbol's precision, at least its minimum.
    pub amount: f64,
    /// Limit price rounded to the symbol's precision; `None` for market orders.
    pub price: Option<f64>,
    /// How many copies to place, 1 to 10.
    pub repeat: i64,
    /// Milliseconds between copies, at least 1.
    pub interval: i64,
    /// Milliseconds after sending that an unfilled order expires (0: never).
    pub expire_after: u64,
    /// When the first copy is sent: the requested time, never before `now`.
    pub first_send_ms: u64,
}

impl OrderRequest<'_> {
    /// When copy `i` (from 0) is sent.
    pub fn send_ms(&self, i: i64) -> u64 {
        let offset = u64::try_from(i.saturating_mul(self.interval)).unwrap_or(u64::MAX);
        self.first_send_ms.saturating_add(offset)
    }
}

/// A positive decimal, or the refusal naming `name`.
fn positive(name: &str, given: Option<&str>) -> Result<Option<f64>, ApiError> {
    match given {
        None => Ok(None),
        Some(t) => match t.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(Some(v)),
            _ => Err(ApiError::refused(
                name,
                format!("{name} must be a positive number."),
            )),
        },
    }
}

/// Checks `p` against the market at `now_ms`.
pub fn check<'m>(
    p: &ExchangeQueryOrderCreate,
    market: &'m Market,
    now_ms: u64,
) -> Result<OrderRequest<'m>, ApiError> {
    let code = p.code.trim().to_ascii_lowercase();
    let Some(sym) = market.symbol(&code) else {
        return Err(ApiError::refused("code", "Unknown trading code."));
    };
    let side = match p.side.to_ascii_lowercase().as_str() {
        "buy" => Side::Buy,
        "sell" => Side::Sell,
        _ => return Err(ApiError::refused("side", "side must be buy or sell.")),
    };
    let amount = sym.round_amount(positive("quantity", Some(&p.quantity))?.unwrap_or(0.0));
    if amount < sym.min || amount <= 0.0 || !amount.is_finite() {
        return Err(ApiError::refused(
            "quantity",
            format!("The smallest amount of {} is {}.", sym.code, sym.min),
        ));
    }
    let price = positive("price", p.price.as_deref())?.map(|v| sym.round_price(v));
    if price.is_some_and(|v| !v.is_finite() || v <= 0.0) {
        return Err(ApiError::refused(
            "price",
            "price must be a positive number.",
        ));
    }
    let limit = p.ordertype == "limit";
    if limit && price.is_none() {
        return Err(ApiError::refused("price", "A limit order needs a price."));
    }
    if !(1..=10).contains(&p.repeat_times) {
        return Err(ApiError::refused(
            "repeat_times",
            "repeat_times is 1 to 10.",
        ));
    }
    if p.repeat_interval < 1 {
        return Err(ApiError::refused(
            "repeat_interval",
            "repeat_interval is at least 1 ms.",
        ));
    }
    if p.expire_after < 0 {
        return Err(ApiError::refused(
            "expire_after",
            "expire_after cannot be negative.",
        ));
    }
    Ok(OrderRequest {
        symbol: sym,
        kind: p.ordertype.clone(),
        side,
        amount,
        price: if limit { price } else { None },
        repeat: p.repeat_times,
        interval: p.repeat_interval,
        expire_after: u64::try_from(p.expire_after).unwrap_or(0),
        first_send_ms: p
            .order_send_time
            .map_or(now_ms, |t| u64::try_from(t).unwrap_or(0).max(now_ms)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(market: &Market) -> ExchangeQueryOrderCreate {
        let sym = &market.symbols()[0];
        ExchangeQueryOrderCreate {
            apikey: "1".into(),
            ordertype: "market".into(),
            code: sym.code.to_ascii_uppercase(),
            side: "BUY".into(),
            quantity: format!("{}", sym.min * 2.0),
            repeat_times: 1,
            repeat_interval: 10_000,
            ..ExchangeQueryOrderCreate::default()
        }
    }

    fn refused_param(e: &ApiError) -> String {
        let v = e.validation.as_ref().expect("a 1440 answer");
        v.missing_information[0]["parameter"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    #[test]
    fn a_market_order_passes_and_drops_its_price() {
        let m = Market::new(7);
        let mut p = order(&m);
        p.price = Some("5".into());
        p.order_send_time = Some(1);
        let o = check(&p, &m, 1_000).unwrap();
        assert_eq!((o.side, o.price, o.first_send_ms), (Side::Buy, None, 1_000));
        assert_eq!(o.symbol.code, m.symbols()[0].code);
    }

    #[test]
    fn copies_are_spaced_by_the_interval() {
        let m = Market::new(7);
        let mut p = order(&m);
        (p.repeat_times, p.repeat_interval, p.order_send_time) = (3, 500, Some(5_000));
        let o = check(&p, &m, 1_000).unwrap();
        assert_eq!([o.send_ms(0), o.send_ms(2)], [5_000, 6_000]);
    }

    #[test]
    fn each_problem_names_its_parameter() {
        let m = Market::new(7);
        type Spoil = fn(&mut ExchangeQueryOrderCreate);
        let cases: [(&str, Spoil); 7] = [
            ("code", |p| p.code = "nowhere-xyz".into()),
            ("side", |p| p.side = "hold".into()),
            ("quantity", |p| p.quantity = "0".into()),
            ("price", |p| p.ordertype = "limit".into()),
            ("repeat_times", |p| p.repeat_times = 11),
            ("repeat_interval", |p| p.repeat_interval = 0),
            ("expire_after", |p| p.expire_after = -1),
        ];
        for (param, spoil) in cases {
            let mut p = order(&m);
            spoil(&mut p);
            assert_eq!(refused_param(&check(&p, &m, 0).unwrap_err()), param);
        }
    }
}
