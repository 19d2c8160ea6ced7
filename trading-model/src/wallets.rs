//! The wallets the sandbox keeps (BTC, ETH, USDT) and their amounts: decimals read and
//! written exactly as integers of 1e-8 units, never as floats.

/// Wallets the sandbox keeps: currency, decimals, withdrawal fee and minimum deposit (in
/// 1e-8 units).
pub const WALLETS: [(&str, u32, i128, i128); 3] = [
    ("BTC", 8, 50_000, 10_000),
    ("ETH", 8, 500_000, 100_000),
    ("USDT", 8, 100_000_000, 1_000_000_000),
];

/// The wallet with this currency code (any case).
pub fn wallet(w: &str) -> Option<&'static (&'static str, u32, i128, i128)> {
    WALLETS.iter().find(|x| x.0.eq_ignore_ascii_case(w))
}

/// Smallest deposit credited, in 1e-8 units.
pub fn min_deposit(w: &str) -> i128 {
    wallet(w).map_or(0, |x| x.3)
}

/// Confirmations a deposit waits for.
pub fn confirmations(w: &str) -> u32 {
    match w {
        "BTC" => 2,
        _ => 12,
    }
}

/// Parses a non-negative decimal into units of 10^-`places` (`None` if it has more
/// places or is not a number).
pub fn parse_units(s: &str, places: u32) -> Option<i128> {
    let s = s.trim();
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() || frac.len() > places as usize {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let int: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac_v: i128 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    let scale = 10i128.pow(places);
    let frac_scaled = frac_v * 10i128.pow(places - u32::try_from(frac.len()).ok()?);
    int.checked_mul(scale)?.checked_add(frac_scaled)
}

/// Formats 1e-8 units as a decimal with 8 places.
pub fn fmt_units(u: i128) -> String {
    let sign = if u < 0 { "-" } else { "" };
    let u = u.abs();
    format!("{sign}{}.{:08}", u / 100_000_000, u % 100_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_round_trip_exactly() {
        assert_eq!(parse_units("1.5", 8), Some(150_000_000));
        assert_eq!(parse_units(".00000001", 8), Some(1));
        assert_eq!(parse_units("1.123456789", 8), None);
        assert_eq!(parse_units("x", 8), None);
        assert_eq!(fmt_units(150_000_000), "1.50000000");
        assert_eq!(fmt_units(-5), "-0.00000005");
        assert_eq!(wallet("btc").map(|w| w.0), Some("BTC"));
        assert!(min_deposit("USDT") > min_deposit("BTC"));
    }
}
