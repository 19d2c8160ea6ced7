//! Parameter validation against the catalogue. Every parameter is checked and every
//! problem is reported in one answer, in the three lists the original uses.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::catalogue::{Endpoint, Kind, Param, Validator};
use crate::params::Params;

/// What validation may need to know about the running server. Validation stays pure:
/// the caller passes in whatever list it wants enforced.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context<'a> {
    /// Exchange codes `is_supported_exchange` accepts; `None` skips that check.
    pub exchanges: Option<&'a [String]>,
}

/// The problems found, grouped as in the original's 1440 answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValidationFailure {
    /// Required parameters that were absent or blank.
    pub missing_parameters: Vec<String>,
    /// `"<name> minimum length <n>"` for each value that is too short.
    pub incorrect_value_lengths: Vec<String>,
    /// One object per wrong value: `{"parameter", "error", ...}` with `allowed` or
    /// `supported` lists where they help.
    pub missing_information: Vec<Value>,
}

impl ValidationFailure {
    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.missing_parameters.is_empty()
            && self.incorrect_value_lengths.is_empty()
            && self.missing_information.is_empty()
    }

    fn info(&mut self, param: &str, error: impl Into<String>) {
        self.missing_information
            .push(json!({"parameter": param, "error": error.into()}));
    }
}

/// A validated parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Checked {
    /// Text (`string`, `date`, and `enum` in the catalogue's spelling).
    Text(String),
    /// A whole number.
    Integer(i64),
    /// A decimal number kept as written, so no precision is lost.
    Decimal(String),
    /// A boolean.
    Bool(bool),
    /// `csv` items or `array` values.
    List(Vec<String>),
}

/// Validated parameters with defaults filled in. Only documented parameters appear.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Valid {
    values: BTreeMap<String, Checked>,
}

impl Valid {
    /// The typed value of a parameter.
    pub fn get(&self, name: &str) -> Option<&Checked> {
        self.values.get(name)
    }

    /// Text of a `string`, `date` or `enum` parameter (or a decimal as written).
    pub fn text(&self, name: &str) -> Option<&str> {
        match self.values.get(name)? {
            Checked::Text(s) | Checked::Decimal(s) => Some(s),
            _ => None,
        }
    }

    /// An `integer` parameter.
    pub fn integer(&self, name: &str) -> Option<i64> {
        match self.values.get(name)? {
            Checked::Integer(i) => Some(*i),
            _ => None,
        }
    }

    /// A `boolean` parameter.
    pub fn boolean(&self, name: &str) -> Option<bool> {
        match self.values.get(name)? {
            Checked::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// A `csv` or `array` parameter.
    pub fn list(&self, name: &str) -> Option<&[String]> {
        match self.values.get(name)? {
            Checked::List(v) => Some(v),
            _ => None,
        }
    }

    /// Names present (given or defaulted).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }
}

/// Checks `params` against `endpoint`'s documented parameters, collecting every problem.
/// Undocumented parameters are ignored, as the original does.
///
/// ```
/// use trading_model::{Catalogue, Context, Params, validate};
/// let ep = Catalogue::builtin().get("exchange-api-keys/add").unwrap();
/// let err = validate(ep, &Params::from_query("exchange=binance&token=abc"), &Context::default())
///     .unwrap_err();
/// assert_eq!(err.missing_parameters, ["label", "secret"]);
/// assert_eq!(err.incorrect_value_lengths, ["token minimum length 5"]);
/// ```
pub fn validate(
    endpoint: &Endpoint,
    params: &Params,
    ctx: &Context<'_>,
) -> Result<Valid, ValidationFailure> {
    let mut out = Valid::default();
    let mut fail = ValidationFailure::default();
    for p in &endpoint.parameters {
        let given = given_values(p, params);
        let values = match given {
            Some(v) => v,
            None => {
                if let Some(d) = &p.default {
                    // Defaults are checked when the catalogue loads, so this cannot fail;
                    // a failure would still only drop the default, never panic.
                    if let Ok(v) = check_default(p, d) {
                        out.values.insert(p.name.clone(), v);
                    }
                } else if p.required {
                    fail.missing_parameters.push(p.name.clone());
                }
                continue;
            }
        };
        if let Some(v) = check_value(p, &values, ctx, &mut fail) {
            out.values.insert(p.name.clone(), v);
        }
    }
    if fail.is_empty() { Ok(out) } else { Err(fail) }
}

/// The values that count as "given": non-blank ones. Single-valued kinds use the last
/// value only, so `x=a&x=` means absent, as PHP would see it.
fn given_values<'p>(p: &Param, params: &'p Params) -> Option<Vec<&'p str>> {
    let all = params.all(&p.name);
    let blank = |s: &&str| s.trim().is_empty();
    if p.kind == Kind::Array {
        let v: Vec<&str> = all
            .iter()
            .map(String::as_str)
            .filter(|s| !blank(s))
            .collect();
        (!v.is_empty()).then_some(v)
    } else {
        let last = all.last().map(String::as_str).filter(|s| !blank(s))?;
        Some(vec![last])
    }
}

/// Validates a catalogue default as if a caller had sent it.
pub(crate) fn check_default(p: &Param, default: &str) -> Result<Checked, String> {
    let mut fail = ValidationFailure::default();
    match check_value(p, &[default], &Context::default(), &mut fail) {
        Some(v) if fail.is_empty() => Ok(v),
        _ => Err(format!(
            "{:?} {:?} {:?}",
            fail.missing_parameters, fail.incorrect_value_lengths, fail.missing_information
        )),
    }
}

fn check_value(
    p: &Param,
    values: &[&str],
    ctx: &Context<'_>,
    fail: &mut ValidationFailure,
) -> Option<Checked> {
    let before = problem_count(fail);
    let value = values.last().copied().unwrap_or("");
    if let Some(min) = p.min_length {
        let too_short = match p.kind {
            Kind::Array => values.iter().any(|v| v.chars().count() < min),
            _ => value.chars().count() < min,
        };
        if too_short {
            fail.incorrect_value_lengths
                .push(format!("{} minimum length {}", p.name, min));
        }
    }
    let name = p.name.as_str();
    let checked = match p.kind {
        Kind::String => {
            run_validator(p, value, ctx, fail);
            Some(Checked::Text(value.to_owned()))
        }
        Kind::Integer => match parse_int(value) {
            None => {
                fail.info(name, format!("{name} must be a whole number"));
                None
            }
            Some(i) => {
                if let Some(lo) = p.min.filter(|&lo| i < lo) {
                    fail.info(name, format!("{name} must be at least {lo}"));
                }
                if let Some(hi) = p.max.filter(|&hi| i > hi) {
                    fail.info(name, format!("{name} must be at most {hi}"));
                }
                run_validator(p, value, ctx, fail);
                Some(Checked::Integer(i))
            }
        },
        Kind::Decimal => {
            if is_decimal(value) {
                Some(Checked::Decimal(value.to_owned()))
            } else {
                fail.info(
                    name,
                    format!("{name} must be a non-negative decimal number"),
                );
                None
            }
        }
        Kind::Boolean => match parse_bool(value) {
            Some(b) => Some(Checked::Bool(b)),
            None => {
                fail.info(name, format!("{name} must be true or false"));
                None
            }
        },
        Kind::Enum => match p.allowed.iter().find(|a| a.eq_ignore_ascii_case(value)) {
            Some(a) => {
                run_validator(p, a, ctx, fail);
                Some(Checked::Text(a.clone()))
            }
            None => {
                fail.missing_information.push(json!({
                    "parameter": name,
                    "error": format!("{name} must be one of the allowed values"),
                    "allowed": p.allowed,
                }));
                None
            }
        },
        Kind::Date => {
            if is_date(value) {
                Some(Checked::Text(value.to_owned()))
            } else {
                fail.info(name, format!("{name} must be a date written YYYY-MM-DD"));
                None
            }
        }
        Kind::Csv => {
            let items: Vec<String> = value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            check_items(p, &items, ctx, fail);
            Some(Checked::List(items))
        }
        Kind::Array => {
            let items: Vec<String> = values.iter().map(|s| (*s).to_owned()).collect();
            check_items(p, &items, ctx, fail);
            Some(Checked::List(items))
        }
    };
    // A value with any problem is not handed on, so handlers only ever see clean input.
    if problem_count(fail) != before {
        None
    } else {
        checked
    }
}

fn problem_count(f: &ValidationFailure) -> usize {
    f.missing_parameters.len() + f.incorrect_value_lengths.len() + f.missing_information.len()
}

fn check_items(p: &Param, items: &[String], ctx: &Context<'_>, fail: &mut ValidationFailure) {
    let name = p.name.as_str();
    if items.is_empty() {
        fail.info(name, format!("{name} holds no items"));
    }
    if let Some(max) = p.max_items.filter(|&m| items.len() > m) {
        fail.info(
            name,
            format!(
                "{name} holds {} items; at most {max} are allowed",
                items.len()
            ),
        );
    }
    // One record per parameter is enough to point the caller at the bad items.
    let bad: Vec<&str> = items
        .iter()
        .filter(|i| validator_error(p, i, ctx).is_some())
        .map(String::as_str)
        .take(10)
        .collect();
    if let (Some(first), Some(v)) = (bad.first(), p.validator) {
        let mut record = validator_error(p, first, ctx).unwrap_or_else(|| json!({}));
        record["parameter"] = json!(name);
        record["error"] = json!(format!("{name} has items failing {}", v.name()));
        record["items"] = json!(bad);
        fail.missing_information.push(record);
    }
}

fn run_validator(p: &Param, value: &str, ctx: &Context<'_>, fail: &mut ValidationFailure) {
    if let Some(mut record) = validator_error(p, value, ctx) {
        record["parameter"] = json!(p.name);
        fail.missing_information.push(record);
    }
}

/// `Some(record)` when `value` fails the parameter's validator.
fn validator_error(p: &Param, value: &str, ctx: &Context<'_>) -> Option<Value> {
    let v = p.validator?;
    let name = &p.name;
    let err = |what: &str| Some(json!({"error": format!("{name} must be {what}")}));
    match v {
        Validator::JsMillisecondUpdate => {
            const MAX_SAFE: i64 = (1 << 53) - 1;
            match parse_int(value) {
                Some(i) if (0..=MAX_SAFE).contains(&i) => None,
                _ => err("a millisecond timestamp"),
            }
        }
        Validator::IsEmail => (!is_email(value))
            .then(|| json!({"error": format!("{name} must be an e-mail address")})),
        // Needs the account; the handler checks it.
        Validator::PasswordAuth => None,
        Validator::IsValidSymbol => (!is_symbol(value)).then(
            || json!({"error": format!("{name} must be a trading code such as binance-btcusdt")}),
        ),
        Validator::IsValidSide => {
            let ok = value.eq_ignore_ascii_case("buy") || value.eq_ignore_ascii_case("sell");
            if ok { None } else { err("buy or sell") }
        }
        Validator::IsValidLevel => {
            let ok = value.is_empty()
                || ["ob1", "ob2", "ob3", "ob4", "ob5"]
                    .iter()
                    .any(|l| l.eq_ignore_ascii_case(value));
            if ok {
                None
            } else {
                err("an order book level ob1 to ob5")
            }
        }
        Validator::IsValidPair => {
            if is_token(value, 32) {
                None
            } else {
                err("a pair without exchange prefix such as btcusdt")
            }
        }
        Validator::IsValidCombination => {
            let ok = value
                .split_once('+')
                .is_some_and(|(a, b)| is_symbol(a) && is_symbol(b));
            if ok {
                None
            } else {
                err("two trading codes joined by +")
            }
        }
        Validator::IsBaseQuote => {
            let ok = value
                .split_once('/')
                .is_some_and(|(a, b)| is_token(a, 16) && is_token(b, 16));
            if ok {
                None
            } else {
                err("a market written BASE/QUOTE")
            }
        }
        Validator::IsSupportedExchange => {
            let list = ctx.exchanges?;
            if list.iter().any(|e| e.eq_ignore_ascii_case(value)) {
                None
            } else {
                Some(json!({
                    "error": "Unsupported exchange; the supported list is attached.",
                    "supported": list,
                }))
            }
        }
        Validator::IsHttpUrl => (!is_http_url(value)).then(
            || json!({"error": format!("{name} must be an http or https URL such as https://example.com/a.png")}),
        ),
    }
}

/// `http://` or `https://` (any case), a host, and no blanks or control characters: what
/// a reader's browser may load as an image, and never a `javascript:` or `data:` URL.
fn is_http_url(s: &str) -> bool {
    let lower = s.get(..8).unwrap_or(s).to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &s[8..]
    } else if lower.starts_with("http://") {
        &s[7..]
    } else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    s.len() <= 2048 && !host.is_empty() && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_bool(s: &str) -> Option<bool> {
    const T: [&str; 4] = ["true", "1", "yes", "on"];
    const F: [&str; 4] = ["false", "0", "no", "off"];
    if T.iter().any(|t| t.eq_ignore_ascii_case(s)) {
        Some(true)
    } else if F.iter().any(|f| f.eq_ignore_ascii_case(s)) {
        Some(false)
    } else {
        None
    }
}

fn is_decimal(s: &str) -> bool {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    s.len() <= 40
        && !(int.is_empty() && frac.is_empty())
        && digits(int)
        && digits(frac)
        && !(s.contains('.') && frac.is_empty())
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = &s[r];
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

fn is_token(s: &str, max: usize) -> bool {
    !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// `<exchange>-<pair>`: exchange is letters and digits; the pair may carry further dashes
/// or underscores (derivative codes do).
fn is_symbol(s: &str) -> bool {
    let Some((ex, pair)) = s.split_once('-') else {
        return false;
    };
    s.len() <= 64
        && is_token(ex, 32)
        && !pair.is_empty()
        && pair
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && pair
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
}

fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    let host_ok = |d: &str| {
        d.split('.').count() >= 2
            && d.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    };
    s.len() <= 254
        && !local.is_empty()
        && local.len() <= 64
        && !local.contains('@')
        && local
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
        && host_ok(domain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_checks() {
        assert!(is_date("2020-02-29") && !is_date("2021-02-29") && !is_date("2020-13-01"));
        assert!(!is_date("2020-1-01") && !is_date("２０２０-01-01") && !is_date("2020-01-00"));
        assert!(is_email("a.b+c@example.co.uk") && !is_email("a@b") && !is_email("@x.io"));
        assert!(!is_email("a b@x.io") && !is_email("a@-x.io") && !is_email("a@x..io"));
        assert!(is_symbol("binance-btcusdt") && is_symbol("okex5-btc-usdt-swap"));
        assert!(!is_symbol("btcusdt") && !is_symbol("-btc") && !is_symbol("bin ance-btc"));
        assert!(is_decimal("0.5") && is_decimal("10") && is_decimal(".5"));
        assert!(!is_decimal("1.") && !is_decimal("-1") && !is_decimal("1e5") && !is_decimal("."));
        assert_eq!(parse_int("+5"), None);
        assert_eq!(parse_int("-5"), Some(-5));
        assert_eq!(parse_int("99999999999999999999"), None);
        assert_eq!(parse_bool("TRUE"), Some(true));
        assert_eq!(parse_bool("2"), None);
    }
}
