//! The subset of Go's `fmt` package that templates reach: `print`, `println`, `printf`
//! and the implicit printing of `{{pipeline}}`.
//!
//! Users' templates were written against Go's output, so the odd corners matter more than
//! elegance here: `%v` of a float switches to exponent form at 1e21 only in JSON, but at
//! 1e6 in `fmt`; a map is printed element-wise with the verb (`%s` of a map is not an
//! error); a mismatched verb prints `%!d(string=x)` instead of failing.

use crate::gofloat;
use crate::value::Value;

/// `fmt.Sprint`: operands are separated by a space only when neither side is a string.
pub(crate) fn sprint(args: &[Value]) -> String {
    let mut out = String::new();
    let mut prev_string = false;
    for (i, a) in args.iter().enumerate() {
        let is_string = matches!(a, Value::String(_));
        if i > 0 && !is_string && !prev_string {
            out.push(' ');
        }
        out.push_str(&format_v(a));
        prev_string = is_string;
    }
    out
}

/// `fmt.Sprintln`: always a space between operands and a trailing newline.
pub(crate) fn sprintln(args: &[Value]) -> String {
    let parts: Vec<String> = args.iter().map(format_v).collect();
    let mut out = parts.join(" ");
    out.push('\n');
    out
}

/// `%v` of one value with no flags.
pub(crate) fn format_v(v: &Value) -> String {
    let mut out = String::new();
    fmt_value(&mut out, v, 'v', &Spec::default(), 0);
    out
}

/// What `{{pipeline}}` writes: Go prints an invalid or nil result as `<no value>`.
pub(crate) fn print_action(v: &Value) -> String {
    match v {
        Value::Missing | Value::Nil => "<no value>".to_string(),
        other => format_v(other),
    }
}

#[derive(Default, Clone)]
struct Spec {
    minus: bool,
    plus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

/// `fmt.Sprintf`.
pub(crate) fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let chars: Vec<char> = format.chars().collect();
    let mut i = 0;
    let mut argn = 0usize;
    let mut reordered = false;
    while i < chars.len() {
        let c = chars[i];
        if c != '%' {
            out.push(c);
            i += 1;
            continue;
        }
        i += 1;
        if i >= chars.len() {
            out.push_str("%!(NOVERB)");
            break;
        }
        let mut spec = Spec::default();
        // Flags.
        while i < chars.len() {
            match chars[i] {
                '-' => {
                    spec.minus = true;
                    spec.zero = false;
                }
                '+' => spec.plus = true,
                '#' => spec.sharp = true,
                ' ' => spec.space = true,
                '0' => spec.zero = !spec.minus,
                _ => break,
            }
            i += 1;
        }
        // Explicit argument index before the width: %[2]d.
        if let Some((n, next)) = parse_arg_index(&chars, i) {
            argn = n;
            reordered = true;
            i = next;
        }
        // Width.
        if i < chars.len() && chars[i] == '*' {
            i += 1;
            match args.get(argn) {
                Some(Value::Int(w)) => {
                    let w = *w;
                    if w < 0 {
                        spec.minus = true;
                        spec.zero = false;
                    }
                    spec.width = Some(w.unsigned_abs().min(1 << 20) as usize);
                }
                _ => out.push_str("%!(BADWIDTH)"),
            }
            argn += 1;
        } else {
            let (n, next) = parse_num(&chars, i);
            spec.width = n;
            i = next;
        }
        // Precision.
        if i < chars.len() && chars[i] == '.' {
            i += 1;
            if let Some((n, next)) = parse_arg_index(&chars, i) {
                argn = n;
                reordered = true;
                i = next;
            }
            if i < chars.len() && chars[i] == '*' {
                i += 1;
                match args.get(argn) {
                    Some(Value::Int(p)) if *p >= 0 => spec.prec = Some((*p).min(1 << 20) as usize),
                    _ => out.push_str("%!(BADPREC)"),
                }
                argn += 1;
            } else {
                let (n, next) = parse_num(&chars, i);
                spec.prec = Some(n.unwrap_or(0));
                i = next;
            }
        }
        if let Some((n, next)) = parse_arg_index(&chars, i) {
            argn = n;
            reordered = true;
            i = next;
        }
        if i >= chars.len() {
            out.push_str("%!(NOVERB)");
            break;
        }
        let verb = chars[i];
        i += 1;
        if verb == '%' {
            out.push('%');
            continue;
        }
        match args.get(argn) {
            None => {
                out.push_str("%!");
                out.push(verb);
                out.push_str("(MISSING)");
            }
            Some(arg) => {
                fmt_value(&mut out, arg, verb, &spec, 0);
                argn += 1;
            }
        }
    }
    if !reordered && argn < args.len() {
        out.push_str("%!(EXTRA ");
        let extras: Vec<String> = args[argn..]
            .iter()
            .map(|a| {
                if a.is_nil() {
                    "<nil>".to_string()
                } else {
                    format!("{}={}", a.type_name(), format_v(a))
                }
            })
            .collect();
        out.push_str(&extras.join(", "));
        out.push(')');
    }
    out
}

fn parse_num(chars: &[char], mut i: usize) -> (Option<usize>, usize) {
    let start = i;
    let mut n: usize = 0;
    while i < chars.len() && chars[i].is_ascii_digit() {
        // Go caps widths at 1e6; anything larger is a hostile format string.
        n = (n * 10 + chars[i] as usize - '0' as usize).min(1_000_000);
        i += 1;
    }
    if i == start { (None, i) } else { (Some(n), i) }
}

fn parse_arg_index(chars: &[char], i: usize) -> Option<(usize, usize)> {
    if i < chars.len() && chars[i] == '[' {
        let (n, next) = parse_num(chars, i + 1);
        if let Some(n) = n {
            if next < chars.len() && chars[next] == ']' && n >= 1 {
                return Some((n - 1, next + 1));
            }
        }
    }
    None
}

/// `%!d(string=x)`: Go prints the operand with `%v` but keeps the verb's flags, width and
/// precision, so `%.0f` of "metrics" shows `%!f(string=)`.
fn bad_verb(out: &mut String, v: &Value, verb: char, spec: &Spec) {
    out.push_str("%!");
    out.push(verb);
    out.push('(');
    if v.is_nil() {
        out.push_str("<nil>");
    } else {
        out.push_str(v.type_name());
        out.push('=');
        fmt_value(out, v, 'v', spec, 0);
    }
    out.push(')');
}

fn fmt_value(out: &mut String, v: &Value, verb: char, spec: &Spec, depth: usize) {
    if verb == 'T' {
        pad(out, v.type_name(), spec, false);
        return;
    }
    match v {
        Value::Missing | Value::Nil => {
            if depth > 0 {
                // A nil inside a map or list prints as <nil> whatever the verb, unpadded.
                out.push_str("<nil>");
            } else if verb == 'v' {
                pad(out, "<nil>", spec, false);
            } else {
                bad_verb(out, v, verb, spec);
            }
        }
        Value::Bool(b) => match verb {
            't' | 'v' => pad(out, if *b { "true" } else { "false" }, spec, false),
            _ => bad_verb(out, v, verb, spec),
        },
        Value::Int(n) => fmt_int(out, v, *n, verb, spec),
        Value::Float(f) => fmt_float(out, v, *f, verb, spec),
        Value::String(s) => fmt_str(out, v, s, verb, spec),
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                fmt_value(out, item, verb, spec, depth + 1);
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push_str("map[");
            for (i, (k, item)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                fmt_str(out, &Value::String(k.clone()), k, verb, spec);
                out.push(':');
                fmt_value(out, item, verb, spec, depth + 1);
            }
            out.push(']');
        }
    }
}

fn pad(out: &mut String, s: &str, spec: &Spec, numeric_zero: bool) {
    let width = spec.width.unwrap_or(0);
    let len = s.chars().count();
    if len >= width {
        out.push_str(s);
        return;
    }
    let fill = width - len;
    if spec.minus {
        out.push_str(s);
        out.extend(std::iter::repeat_n(' ', fill));
    } else if spec.zero {
        if numeric_zero && (s.starts_with('-') || s.starts_with('+') || s.starts_with(' ')) {
            // Zero padding goes between the sign and the digits.
            let (sign, rest) = s.split_at(1);
            out.push_str(sign);
            out.extend(std::iter::repeat_n('0', fill));
            out.push_str(rest);
        } else {
            out.extend(std::iter::repeat_n('0', fill));
            out.push_str(s);
        }
    } else {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(s);
    }
}

fn fmt_str(out: &mut String, v: &Value, s: &str, verb: char, spec: &Spec) {
    match verb {
        's' | 'v' => pad(out, truncate(s, spec.prec), spec, false),
        'q' => {
            // The precision cuts the text before it is quoted.
            let s = truncate(s, spec.prec);
            let q = if spec.sharp && can_backquote(s) {
                format!("`{s}`")
            } else {
                go_quote(s, spec.plus)
            };
            pad(out, &q, spec, false);
        }
        'x' | 'X' => {
            let bytes: Vec<u8> = match spec.prec {
                Some(p) => s.bytes().take(p).collect(),
                None => s.bytes().collect(),
            };
            let mut h = String::new();
            for (i, b) in bytes.iter().enumerate() {
                if spec.space && i > 0 {
                    h.push(' ');
                }
                if spec.sharp && (spec.space || i == 0) {
                    h.push_str(if verb == 'x' { "0x" } else { "0X" });
                }
                if verb == 'x' {
                    h.push_str(&format!("{b:02x}"));
                } else {
                    h.push_str(&format!("{b:02X}"));
                }
            }
            pad(out, &h, spec, false);
        }
        _ => bad_verb(out, v, verb, spec),
    }
}

/// The first `prec` characters of `s`.
fn truncate(s: &str, prec: Option<usize>) -> &str {
    match prec.and_then(|p| s.char_indices().nth(p)) {
        Some((end, _)) => &s[..end],
        None => s,
    }
}

fn can_backquote(s: &str) -> bool {
    s.chars()
        .all(|c| c != '`' && c != '\u{FEFF}' && (c == '\t' || !c.is_control()))
}

/// `strconv.Quote` (or `QuoteToASCII` when `ascii`).
pub(crate) fn go_quote(s: &str, ascii: bool) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        quote_char(&mut q, c, '"', ascii);
    }
    q.push('"');
    q
}

fn quote_char(q: &mut String, c: char, quote: char, ascii: bool) {
    match c {
        '\x07' => q.push_str("\\a"),
        '\x08' => q.push_str("\\b"),
        '\x0c' => q.push_str("\\f"),
        '\n' => q.push_str("\\n"),
        '\r' => q.push_str("\\r"),
        '\t' => q.push_str("\\t"),
        '\x0b' => q.push_str("\\v"),
        '\\' => q.push_str("\\\\"),
        c if c == quote => {
            q.push('\\');
            q.push(c);
        }
        c if (c as u32) < 0x20 || c as u32 == 0x7f => q.push_str(&format!("\\x{:02x}", c as u32)),
        c if ascii && (c as u32) >= 0x80 || !is_printable(c) => {
            let n = c as u32;
            if n < 0x10000 {
                q.push_str(&format!("\\u{n:04x}"));
            } else {
                q.push_str(&format!("\\U{n:08x}"));
            }
        }
        c => q.push(c),
    }
}

/// An approximation of Go's `strconv.IsPrint`: control, format and separator characters
/// other than the ASCII space are escaped.
pub(crate) fn is_printable(c: char) -> bool {
    if c.is_control() {
        return false;
    }
    let format_or_private = matches!(
        c as u32,
        0x00AD | 0x2028 | 0x2029 | 0xFEFF | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0xE000..=0xF8FF
    );
    let odd_space = c.is_whitespace() && c != ' ';
    !(format_or_private || odd_space)
}

fn fmt_int(out: &mut String, v: &Value, n: i64, verb: char, spec: &Spec) {
    let neg = n < 0;
    let mag = n.unsigned_abs();
    let digits = match verb {
        'd' | 'v' => mag.to_string(),
        'x' => format!("{mag:x}"),
        'X' => format!("{mag:X}"),
        'o' | 'O' => format!("{mag:o}"),
        'b' => format!("{mag:b}"),
        'c' => {
            let c = char::from_u32(n as u32).filter(|_| (0..=0x10FFFF).contains(&n));
            pad(out, &c.unwrap_or('\u{FFFD}').to_string(), spec, false);
            return;
        }
        'q' => {
            let c = char::from_u32(n as u32)
                .filter(|_| (0..=0x10FFFF).contains(&n))
                .unwrap_or('\u{FFFD}');
            let mut q = String::from("'");
            quote_char(&mut q, c, '\'', spec.plus);
            q.push('\'');
            pad(out, &q, spec, false);
            return;
        }
        'U' => {
            let mut s = format!("U+{mag:04X}");
            if spec.sharp {
                if let Some(c) = char::from_u32(n as u32).filter(|c| is_printable(*c)) {
                    s.push_str(&format!(" '{c}'"));
                }
            }
            pad(out, &s, spec, false);
            return;
        }
        _ => {
            bad_verb(out, v, verb, spec);
            return;
        }
    };
    let mut digits = digits;
    if let Some(p) = spec.prec {
        if p == 0 && n == 0 {
            digits.clear();
        }
        while digits.len() < p {
            digits.insert(0, '0');
        }
    }
    let prefix = if spec.sharp {
        match verb {
            'x' => "0x",
            'X' => "0X",
            'o' => "0",
            'b' => "0b",
            _ => "",
        }
    } else if verb == 'O' {
        "0o"
    } else {
        ""
    };
    let sign = if neg {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    };
    let body = format!("{prefix}{digits}");
    // Go ignores the zero flag when a precision is given for integers.
    let zero = spec.zero && spec.prec.is_none() && !spec.minus;
    let width = spec.width.unwrap_or(0);
    let len = sign.len() + body.chars().count();
    if zero && len < width {
        out.push_str(sign);
        out.extend(std::iter::repeat_n('0', width - len));
        out.push_str(&body);
    } else {
        let s = format!("{sign}{body}");
        let spec = Spec {
            zero: false,
            ..spec.clone()
        };
        pad(out, &s, &spec, false);
    }
}

/// `%v` of a float64 (shortest representation, exponent from 1e21 or below 1e-4).
#[cfg(test)]
pub(crate) fn format_float_v(f: f64) -> String {
    let mut out = String::new();
    fmt_float(&mut out, &Value::Float(f), f, 'v', &Spec::default());
    out
}

fn fmt_float(out: &mut String, v: &Value, f: f64, verb: char, spec: &Spec) {
    let body = if f.is_nan() {
        "NaN".to_string()
    } else if f.is_infinite() {
        "Inf".to_string()
    } else {
        match gofloat::float_digits(f, verb, spec.prec) {
            Some(digits) => digits,
            None => return bad_verb(out, v, verb, spec),
        }
    };
    let neg = f.is_sign_negative() && !f.is_nan();
    let sign = if neg {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    };
    let s = format!("{sign}{body}");
    let spec = if f.is_finite() {
        spec.clone()
    } else {
        Spec {
            zero: false,
            ..spec.clone()
        }
    };
    pad(out, &s, &spec, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_go() {
        let cases = [
            (3.0, "3"),
            (1.5, "1.5"),
            (0.1, "0.1"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (123456789.0, "1.23456789e+08"),
            (1e21, "1e+21"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1710756245123456789.0, "1.7107562451234568e+18"),
            (-2.5, "-2.5"),
            (0.0, "0"),
        ];
        for (f, want) in cases {
            assert_eq!(format_float_v(f), want, "{f}");
        }
    }

    #[test]
    fn printf_verbs() {
        let s = |f: &str, a: Vec<Value>| sprintf(f, &a);
        assert_eq!(s("%.0f", vec![Value::Float(2.5)]), "2");
        assert_eq!(s("%.2f", vec![Value::Float(1.23456)]), "1.23");
        assert_eq!(s("%5.1f|", vec![Value::Float(1.23456)]), "  1.2|");
        assert_eq!(s("%e", vec![Value::Float(1234.5678)]), "1.234568e+03");
        assert_eq!(s("%.3g", vec![Value::Float(1.0)]), "1");
        assert_eq!(s("%g", vec![Value::Float(100000000.0)]), "1e+08");
        assert_eq!(s("%05d", vec![Value::Int(-42)]), "-0042");
        assert_eq!(
            s(
                "%x %X %#x",
                vec![Value::Int(255), Value::Int(255), Value::Int(255)]
            ),
            "ff FF 0xff"
        );
        assert_eq!(s("%d", vec![Value::Float(3.0)]), "%!d(float64=3)");
        assert_eq!(s("%s", vec![Value::Nil]), "%!s(<nil>)");
        assert_eq!(s("%s %s", vec![Value::from("a")]), "a %!s(MISSING)");
        assert_eq!(
            s("%s", vec![Value::from("a"), Value::Int(1)]),
            "a%!(EXTRA int=1)"
        );
        assert_eq!(s("%q", vec![Value::from("a\"b\n")]), "\"a\\\"b\\n\"");
        assert_eq!(
            s("%-4s|%4s", vec![Value::from("ab"), Value::from("cd")]),
            "ab  |  cd"
        );
        assert_eq!(s("%t", vec![Value::Bool(true)]), "true");
        assert_eq!(s("100%%", vec![]), "100%");
        assert_eq!(s("%", vec![]), "%!(NOVERB)");
        assert_eq!(
            s("%[2]s %[1]s", vec![Value::from("a"), Value::from("b")]),
            "b a"
        );
    }
}
