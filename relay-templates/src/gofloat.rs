//! The digits of a float64 the way Go's `strconv.FormatFloat` writes them for the verbs
//! `fmt` hands it: decimal (`%e %f %g %v`), hexadecimal (`%x %X`) and binary (`%b`).
//!
//! Everything here formats the magnitude only; the caller adds the sign, flags and padding.

/// The unsigned text of a finite `f.abs()` for `verb`, or `None` when floats do not take
/// that verb (the caller then prints Go's `%!verb(float64=...)`).
pub(crate) fn float_digits(f: f64, verb: char, prec: Option<usize>) -> Option<String> {
    let f = f.abs();
    Some(match verb {
        'v' | 'g' => format_g(f, prec, false),
        'G' => format_g(f, prec, true),
        'f' | 'F' => format!("{:.*}", prec.unwrap_or(6), f),
        'e' | 'E' => {
            let p = prec.unwrap_or(6);
            let (digits, dp) = decimal_digits(f, Some(p + 1));
            fmt_e(&digits, dp, p, verb == 'E')
        }
        'x' | 'X' => format_hex(f, prec, verb == 'X'),
        'b' => format_binary(f),
        _ => return None,
    })
}

/// Decimal digits and decimal-point position of `f`: `digits` has no leading or trailing
/// zeros (except "0" for zero) and the value is `0.digits * 10^dp`.
fn decimal_digits(f: f64, sig: Option<usize>) -> (String, i32) {
    let s = match sig {
        None => format!("{f:e}"),
        Some(p) => format!("{:.*e}", p.saturating_sub(1), f),
    };
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: String = mant.chars().filter(|c| *c != '.').collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    if digits == "0" {
        return (digits, 1);
    }
    (digits, exp + 1)
}

fn fmt_e(digits: &str, dp: i32, prec: usize, upper: bool) -> String {
    let mut s = String::new();
    let mut d = digits.chars();
    s.push(d.next().unwrap_or('0'));
    if prec > 0 {
        s.push('.');
        let rest: String = d.collect();
        s.push_str(&rest);
        for _ in rest.len()..prec {
            s.push('0');
        }
    }
    let exp = if digits == "0" { 0 } else { dp - 1 };
    s.push(if upper { 'E' } else { 'e' });
    push_exponent(&mut s, exp);
    s
}

/// Go writes exponents with a sign and at least two digits: `e+06`, `p-1074`.
fn push_exponent(s: &mut String, exp: i32) {
    s.push(if exp < 0 { '-' } else { '+' });
    let e = exp.unsigned_abs();
    if e < 10 {
        s.push('0');
    }
    s.push_str(&e.to_string());
}

fn fmt_f_digits(digits: &str, dp: i32, prec: usize) -> String {
    let digit = |idx: i32| -> char {
        usize::try_from(idx)
            .ok()
            .and_then(|i| digits.as_bytes().get(i))
            .map_or('0', |b| *b as char)
    };
    let mut s = String::new();
    if dp <= 0 {
        s.push('0');
    } else {
        s.extend((0..dp).map(digit));
    }
    if prec > 0 {
        s.push('.');
        s.extend((0..prec as i32).map(|i| digit(dp + i)));
    }
    s
}

/// strconv.FormatFloat(f, 'g', prec, 64) for a non-negative finite `f`.
fn format_g(f: f64, prec: Option<usize>, upper: bool) -> String {
    let shortest = prec.is_none();
    let prec_sig = prec.map(|p| p.max(1));
    let (digits, dp) = decimal_digits(f, prec_sig);
    let nd = digits.len() as i32;
    let mut p = prec_sig.map(|p| p as i32).unwrap_or(nd);
    let mut eprec = p;
    if eprec > nd && nd >= dp {
        eprec = nd;
    }
    if shortest {
        eprec = 6;
    }
    let exp = dp - 1;
    if f != 0.0 && (exp < -4 || exp >= eprec) {
        if p > nd {
            p = nd;
        }
        return fmt_e(&digits, dp, (p - 1).max(0) as usize, upper);
    }
    if p > dp {
        p = nd;
    }
    fmt_f_digits(&digits, dp, (p - dp).max(0) as usize)
}

/// The mantissa (implicit leading bit included) and binary exponent of a non-negative
/// finite `f`, such that `f == mant * 2^(exp - 52)`.
fn mantissa_exponent(f: f64) -> (u64, i32) {
    let bits = f.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    if biased == 0 {
        (fraction, -1022) // subnormal: no implicit bit
    } else {
        (fraction | (1 << 52), biased - 1023)
    }
}

/// `%b`: the decimal mantissa and a power of two, `5629499534213120p-51` for 2.5.
fn format_binary(f: f64) -> String {
    let (mant, exp) = mantissa_exponent(f);
    let exp = exp - 52;
    let sign = if exp >= 0 { "+" } else { "" };
    format!("{mant}p{sign}{exp}")
}

/// `%x`: `0x1.4p+01` for 2.5. Without a precision the fraction has as many hex digits as
/// it needs; with one it is rounded half to even, and a carry into a second integer digit
/// moves the exponent instead (`%.1x` of 1.96875 is `0x1.0p+01`).
fn format_hex(f: f64, prec: Option<usize>, upper: bool) -> String {
    const ONE: u64 = 1 << 60; // the leading digit's bit once normalised
    let (mut mant, mut exp) = mantissa_exponent(f);
    if mant == 0 {
        exp = 0;
    }
    mant <<= 8;
    while mant != 0 && mant & ONE == 0 {
        mant <<= 1;
        exp -= 1;
    }
    // 52 fraction bits are 13 hex digits, so a precision of 15 or more never rounds.
    if let Some(p) = prec.filter(|p| *p < 15) {
        let keep = 60 - 4 * p as u32;
        let dropped = mant & ((1 << keep) - 1);
        let half = 1 << (keep - 1);
        mant >>= keep;
        if dropped > half || (dropped == half && mant & 1 == 1) {
            mant += 1;
        }
        mant <<= keep;
        if mant & (ONE << 1) != 0 {
            mant >>= 1;
            exp += 1;
        }
    }
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut s = String::from(if upper { "0X" } else { "0x" });
    s.push(if mant & ONE != 0 { '1' } else { '0' });
    let mut frac = mant << 4; // drops the leading digit
    let count = match prec {
        Some(p) => p,
        None if frac == 0 => 0,
        // Shortest: up to the last non-zero digit.
        None => 16 - (frac.trailing_zeros() / 4) as usize,
    };
    if count > 0 {
        s.push('.');
        for _ in 0..count {
            s.push(digits[(frac >> 60) as usize] as char);
            frac <<= 4;
        }
    }
    s.push(if upper { 'P' } else { 'p' });
    push_exponent(&mut s, exp);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_floats_like_strconv() {
        let x = |f: f64, p: Option<usize>| float_digits(f, 'x', p).unwrap();
        assert_eq!(x(2.5, None), "0x1.4p+01");
        assert_eq!(x(1.0, None), "0x1p+00");
        assert_eq!(x(0.0, None), "0x0p+00");
        assert_eq!(x(0.0, Some(2)), "0x0.00p+00");
        assert_eq!(x(0.1, None), "0x1.999999999999ap-04");
        assert_eq!(x(f64::MIN_POSITIVE / 4.0, None), "0x1p-1024");
        assert_eq!(x(1.96875, Some(1)), "0x1.0p+01");
        assert_eq!(x(1.5, Some(0)), "0x1p+01");
        assert_eq!(x(1.25, Some(0)), "0x1p+00");
        assert_eq!(x(1.0, Some(20)), "0x1.00000000000000000000p+00");
        assert_eq!(x(f64::MAX, None), "0x1.fffffffffffffp+1023");
    }

    #[test]
    fn binary_floats_like_strconv() {
        assert_eq!(
            float_digits(1.0, 'b', None).unwrap(),
            "4503599627370496p-52"
        );
        assert_eq!(
            float_digits(2f64.powi(60), 'b', None).unwrap(),
            "4503599627370496p+8"
        );
        assert_eq!(float_digits(5e-324, 'b', None).unwrap(), "1p-1074");
    }
}
