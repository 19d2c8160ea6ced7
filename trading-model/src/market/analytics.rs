//! Pure computations over price series: OHLC candles, moving averages, RSI, and the
//! Black-Scholes price, greeks and implied volatility.
//!
//! Everything here works on plain numbers; sampling the simulated market is the caller's
//! business. Nothing here rounds for display, reads a clock or allocates more than its
//! output.

use std::f64::consts::{PI, SQRT_2};

/// One OHLC candle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candle {
    /// Start of the candle (whatever unit the samples used).
    pub time: u64,
    /// First sample.
    pub open: f64,
    /// Highest sample.
    pub high: f64,
    /// Lowest sample.
    pub low: f64,
    /// Last sample.
    pub close: f64,
}

/// Groups `(time, value)` samples into candles of `width` starting at multiples of
/// `width`. Samples must be ascending in time; empty buckets yield no candle, so the
/// output is strictly ascending and every candle has `low <= open, close <= high`.
pub fn candles(samples: &[(u64, f64)], width: u64) -> Vec<Candle> {
    let width = width.max(1);
    let mut out: Vec<Candle> = Vec::new();
    for &(t, v) in samples {
        let start = t - t % width;
        match out.last_mut() {
            Some(c) if c.time == start => {
                c.high = c.high.max(v);
                c.low = c.low.min(v);
                c.close = v;
            }
            _ => out.push(Candle {
                time: start,
                open: v,
                high: v,
                low: v,
                close: v,
            }),
        }
    }
    out
}

/// Simple moving average over `period` values; `None` until `period` values were seen.
pub fn sma(values: &[f64], period: usize) -> Vec<Option<f64>> {
    let period = period.max(1);
    let mut out = Vec::with_capacity(values.len());
    let mut sum = 0.0;
    for (i, v) in values.iter().enumerate() {
        sum += v;
        if i >= period {
            sum -= values[i - period];
        }
        out.push((i + 1 >= period).then(|| sum / period as f64));
    }
    out
}

/// Exponential moving average with smoothing `2 / (period + 1)`, seeded with the SMA of
/// the first `period` values; `None` before that.
pub fn ema(values: &[f64], period: usize) -> Vec<Option<f64>> {
    let period = period.max(1);
    let k = 2.0 / (period as f64 + 1.0);
    let mut out = Vec::with_capacity(values.len());
    let mut prev: Option<f64> = None;
    for (i, v) in values.iter().enumerate() {
        let next = match prev {
            Some(p) => Some(p + k * (v - p)),
            None if i + 1 == period => Some(values[..period].iter().sum::<f64>() / period as f64),
            None => None,
        };
        prev = next;
        out.push(next);
    }
    out
}

/// Relative strength index (Wilder's smoothing) over `period` changes, 0..=100; `None`
/// until `period` changes were seen. A series that never falls reads 100.
pub fn rsi(values: &[f64], period: usize) -> Vec<Option<f64>> {
    let period = period.max(1);
    let n = period as f64;
    let mut out = Vec::with_capacity(values.len());
    let (mut gain, mut loss) = (0.0, 0.0);
    for i in 0..values.len() {
        if i == 0 {
            out.push(None);
            continue;
        }
        let change = values[i] - values[i - 1];
        let (g, l) = (change.max(0.0), (-change).max(0.0));
        if i <= period {
            gain += g / n;
            loss += l / n;
        } else {
            gain = (gain * (n - 1.0) + g) / n;
            loss = (loss * (n - 1.0) + l) / n;
        }
        out.push((i >= period).then(|| {
            if loss == 0.0 {
                if gain == 0.0 { 50.0 } else { 100.0 }
            } else {
                100.0 - 100.0 / (1.0 + gain / loss)
            }
        }));
    }
    out
}

/// Call or put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// Right to buy at the strike.
    Call,
    /// Right to sell at the strike.
    Put,
}

/// Inputs of the Black-Scholes model (no dividends).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptionInputs {
    /// Price of the underlying.
    pub spot: f64,
    /// Strike price.
    pub strike: f64,
    /// Time to expiry in years.
    pub years: f64,
    /// Continuously compounded risk-free rate (0.01 = 1 %).
    pub rate: f64,
    /// Call or put.
    pub kind: OptionKind,
}

/// Price and sensitivities at one volatility.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Greeks {
    /// Model price.
    pub price: f64,
    /// dPrice/dSpot.
    pub delta: f64,
    /// d2Price/dSpot2.
    pub gamma: f64,
    /// dPrice/dVolatility per 1.00 of volatility.
    pub vega: f64,
    /// dPrice/dTime per year (negative: value lost as expiry nears).
    pub theta: f64,
    /// dPrice/dRate per 1.00 of rate.
    pub rho: f64,
}

fn norm_pdf(x: f64) -> f64 {
    (-x * x / 2.0).exp() / (2.0 * PI).sqrt()
}

/// Standard normal CDF via erfc (Numerical Recipes' Chebyshev fit, |error| < 1.2e-7).
fn norm_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / SQRT_2)
}

fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// Black-Scholes price and greeks at volatility `sigma` (> 0).
pub fn black_scholes(o: &OptionInputs, sigma: f64) -> Greeks {
    let sqrt_t = o.years.sqrt();
    let d1 =
        ((o.spot / o.strike).ln() + (o.rate + sigma * sigma / 2.0) * o.years) / (sigma * sqrt_t);
    let d2 = d1 - sigma * sqrt_t;
    let disc = (-o.rate * o.years).exp();
    let gamma = norm_pdf(d1) / (o.spot * sigma * sqrt_t);
    let vega = o.spot * norm_pdf(d1) * sqrt_t;
    let decay = -o.spot * norm_pdf(d1) * sigma / (2.0 * sqrt_t);
    match o.kind {
        OptionKind::Call => Greeks {
            price: o.spot * norm_cdf(d1) - o.strike * disc * norm_cdf(d2),
            delta: norm_cdf(d1),
            gamma,
            vega,
            theta: decay - o.rate * o.strike * disc * norm_cdf(d2),
            rho: o.strike * o.years * disc * norm_cdf(d2),
        },
        OptionKind::Put => Greeks {
            price: o.strike * disc * norm_cdf(-d2) - o.spot * norm_cdf(-d1),
            delta: norm_cdf(d1) - 1.0,
            gamma,
            vega,
            theta: decay + o.rate * o.strike * disc * norm_cdf(-d2),
            rho: -o.strike * o.years * disc * norm_cdf(-d2),
        },
    }
}

/// Why no implied volatility exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IvError {
    /// Spot, strike and time must be positive and finite.
    BadInputs,
    /// The option price is outside the no-arbitrage bounds (at or below intrinsic value,
    /// or at or above the price with infinite volatility).
    OutOfBounds,
}

/// Lowest and highest volatility searched.
const SIGMA_MIN: f64 = 1e-6;
const SIGMA_MAX: f64 = 20.0;

/// The volatility at which the model price equals `option_price`: Newton steps from 0.5,
/// falling back to bisection whenever a step would leave the bracket, to |error| < 1e-9.
pub fn implied_volatility(o: &OptionInputs, option_price: f64) -> Result<f64, IvError> {
    let ok = |x: f64| x.is_finite() && x > 0.0;
    if !ok(o.spot) || !ok(o.strike) || !ok(o.years) || !o.rate.is_finite() {
        return Err(IvError::BadInputs);
    }
    let price = |s: f64| black_scholes(o, s).price;
    let (mut lo, mut hi) = (SIGMA_MIN, SIGMA_MAX);
    if !option_price.is_finite() || option_price <= price(lo) || option_price >= price(hi) {
        return Err(IvError::OutOfBounds);
    }
    let mut sigma = 0.5;
    for _ in 0..200 {
        let g = black_scholes(o, sigma);
        let diff = g.price - option_price;
        if diff.abs() < 1e-9 {
            return Ok(sigma);
        }
        // The price rises with volatility, so the sign of the error narrows the bracket.
        if diff > 0.0 {
            hi = sigma;
        } else {
            lo = sigma;
        }
        let newton = sigma - diff / g.vega;
        sigma = if g.vega > 1e-12 && newton > lo && newton < hi {
            newton
        } else {
            (lo + hi) / 2.0
        };
        if hi - lo < 1e-12 {
            break;
        }
    }
    Ok(sigma)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn textbook_call() {
        // Hull's example: S=42, K=40, r=10 %, sigma=20 %, T=0.5 gives c = 4.76, p = 0.81.
        let mut o = OptionInputs {
            spot: 42.0,
            strike: 40.0,
            years: 0.5,
            rate: 0.1,
            kind: OptionKind::Call,
        };
        assert!((black_scholes(&o, 0.2).price - 4.76).abs() < 0.005);
        o.kind = OptionKind::Put;
        assert!((black_scholes(&o, 0.2).price - 0.81).abs() < 0.005);
        assert!((implied_volatility(&o, 0.8086).unwrap() - 0.2).abs() < 1e-3);
        assert_eq!(implied_volatility(&o, 0.0), Err(IvError::OutOfBounds));
        o.years = 0.0;
        assert_eq!(implied_volatility(&o, 1.0), Err(IvError::BadInputs));
    }

    #[test]
    fn indicators_on_known_series() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(
            sma(&v, 3),
            vec![None, None, Some(2.0), Some(3.0), Some(4.0)]
        );
        assert_eq!(ema(&v, 3)[2], Some(2.0));
        assert_eq!(ema(&v, 3)[3], Some(3.0));
        assert_eq!(rsi(&v, 3)[3], Some(100.0));
        assert_eq!(rsi(&v, 3)[2], None);
        let c = candles(&[(0, 1.0), (30, 3.0), (59, 2.0), (60, 5.0)], 60);
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].open, c[0].high, c[0].low, c[0].close),
            (1.0, 3.0, 1.0, 2.0)
        );
    }

    proptest! {
        #[test]
        fn candles_are_ascending_and_bounded(
            steps in proptest::collection::vec((1u64..50, -1e3f64..1e3), 1..300),
            width in 1u64..120,
        ) {
            let mut t = 0;
            let samples: Vec<(u64, f64)> = steps.iter().map(|&(dt, v)| { t += dt; (t, v) }).collect();
            let c = candles(&samples, width);
            prop_assert!(c.windows(2).all(|w| w[0].time < w[1].time));
            for k in &c {
                prop_assert!(k.time % width == 0);
                prop_assert!(k.low <= k.open && k.open <= k.high);
                prop_assert!(k.low <= k.close && k.close <= k.high);
            }
        }

        #[test]
        fn rsi_stays_in_range(v in proptest::collection::vec(0.1f64..1e4, 0..200), p in 1usize..30) {
            for x in rsi(&v, p).into_iter().flatten() {
                prop_assert!((0.0..=100.0).contains(&x));
            }
            prop_assert_eq!(sma(&v, p).len(), v.len());
            prop_assert_eq!(ema(&v, p).len(), v.len());
        }

        #[test]
        fn implied_volatility_round_trips(
            spot in 1.0f64..1000.0,
            moneyness in 0.7f64..1.3,
            years in 0.05f64..3.0,
            rate in 0.0f64..0.1,
            sigma in 0.05f64..2.0,
            put in any::<bool>(),
        ) {
            let o = OptionInputs {
                spot,
                strike: spot * moneyness,
                years,
                rate,
                kind: if put { OptionKind::Put } else { OptionKind::Call },
            };
            let g = black_scholes(&o, sigma);
            // Too little time value leaves nothing to invert reliably.
            prop_assume!(g.vega > 1e-3 * spot);
            let iv = implied_volatility(&o, g.price).unwrap();
            prop_assert!((black_scholes(&o, iv).price - g.price).abs() < 1e-6 * spot.max(1.0));
        }
    }
}
