//! Go `encoding/json` output for template values: sorted keys, HTML-safe escaping
//! (`<` -> `\u003c`), floats in Go's shortest form with an exponent only from 1e21.

use crate::value::Value;

pub(crate) fn marshal(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Missing | Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) => out.push_str(&float(*f)),
        Value::String(s) => string(out, s),
        Value::List(l) => {
            out.push('[');
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, x);
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(out, k);
                out.push(':');
                write_value(out, x);
            }
            out.push('}');
        }
    }
}

/// Go's float encoding: `strconv` shortest 'f', or 'e' below 1e-6 / from 1e21, with the
/// exponent's leading zero removed (`1e-07` -> `1e-7`).
pub(crate) fn float(f: f64) -> String {
    if !f.is_finite() {
        // Go refuses to marshal these; null keeps the output valid JSON.
        return "null".to_string();
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = format!("{f:e}");
        let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let sign = if exp < 0 { '-' } else { '+' };
        let e = exp.unsigned_abs();
        // Go writes at least two exponent digits, then strips the zero of e-0N only.
        if exp < 0 || e >= 10 {
            format!("{mant}e{sign}{e}")
        } else {
            format!("{mant}e{sign}0{e}")
        }
    } else {
        let s = format!("{f}");
        if s == "-0" { "-0".to_string() } else { s }
    }
}

pub(crate) fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_encode_like_go() {
        for (f, want) in [
            (3.0, "3"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (1710756245123456789.0, "1710756245123456800"),
            (-2.5, "-2.5"),
        ] {
            assert_eq!(float(f), want, "{f}");
        }
    }

    #[test]
    fn strings_escape_html() {
        let mut s = String::new();
        string(&mut s, "<a href=\"x\">&</a>\n\u{1}");
        assert_eq!(
            s,
            r#""\u003ca href=\"x\"\u003e\u0026\u003c/a\u003e\n\u0001""#
        );
    }
}
