//! A strategy profile as `strategy/edit-profile` stores it, read through typed accessors,
//! and the check a profile must pass before it is saved or started.
//!
//! The stored profile is the JSON object of the parameters the caller sent (text values,
//! arrays as lists of text), so that answers show them back as sent. [`Profile`] reads it
//! as the strategy needs it; [`check`] is pure: what it needs to know about the caller's
//! exchange keys comes in as a function.

use serde_json::{Map, Value};

use crate::market::Market;
use crate::strategy::{Condition, algorithm, level_index, level_price};

/// Array parameters that describe executables, one entry per row.
pub const EXECUTABLE_ARRAYS: [&str; 16] = [
    "executable_parents",
    "executable_values",
    "executable_codes",
    "executable_apikeys",
    "executable_apikeysmarket",
    "executable_leverage",
    "executable_priceoffset",
    "executable_priceexact",
    "post_request_delay",
    "post_request_random",
    "executable_priceoffsetside",
    "executable_pricereference",
    "executable_toleranceminimum",
    "executable_tolerancemaximum",
    "executable_maximumtimelive",
    "executable_obqtycumulativecheck",
];

/// Array parameters that describe conditions, one entry per row.
pub const CONDITION_ARRAYS: [&str; 4] = [
    "condition_codes",
    "condition_values",
    "condition_orderbooklevel_side1",
    "condition_orderbooklevel_side2",
];

/// Typed reads of a stored profile.
#[derive(Debug, Clone, Copy)]
pub struct Profile<'a> {
    fields: &'a Map<String, Value>,
}

impl<'a> Profile<'a> {
    /// Reads `fields` (the stored JSON object) as a profile.
    pub fn new(fields: &'a Map<String, Value>) -> Profile<'a> {
        Profile { fields }
    }

    /// A text field (absent: empty; a number or flag: its JSON text).
    ///
    /// ```
    /// use trading_model::strategy_profile::Profile;
    /// let m = serde_json::json!({"name": "Bot", "slice_delay": 2});
    /// let p = Profile::new(m.as_object().unwrap());
    /// assert_eq!((p.text("name"), p.text("slice_delay"), p.text("x")), ("Bot".into(), "2".into(), "".into()));
    /// ```
    pub fn text(&self, name: &str) -> String {
        match self.fields.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(v) => v.to_string(),
        }
    }

    /// An array field as text entries (absent: empty; one text: one entry).
    pub fn list(&self, name: &str) -> Vec<String> {
        match self.fields.get(name) {
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect(),
            Some(Value::String(s)) => vec![s.clone()],
            _ => Vec::new(),
        }
    }

    /// Entry `i` of an array field as a finite number.
    pub fn number_at(&self, name: &str, i: usize) -> Option<f64> {
        number_at(&self.list(name), i)
    }

    /// The exchange keys the executables trade through, each once, in id order.
    pub fn key_ids(&self) -> Vec<i64> {
        let mut keys: Vec<i64> = self
            .list("executable_apikeys")
            .iter()
            .filter_map(|k| k.trim().parse().ok())
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

/// Entry `i` of text entries as a finite number.
pub fn number_at(entries: &[String], i: usize) -> Option<f64> {
    entries
        .get(i)
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|x| x.is_finite())
}

/// Why a profile cannot be used: the parameter at fault and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The parameter to fix.
    pub param: String,
    /// What is wrong, in words for the caller.
    pub message: String,
}

fn problem(param: &str, message: impl Into<String>) -> Problem {
    Problem {
        param: param.to_owned(),
        message: message.into(),
    }
}

/// What the check needs to know about one of the caller's exchange keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyLookup {
    /// The caller has no such key.
    Unknown,
    /// The key exists, for this exchange.
    For(String),
}

/// Checks a (merged) profile: a known algorithm the plan allows, a slice delay, executable
/// rows of equal length whose codes exist, whose keys are the caller's and for the code's
/// exchange, with positive quantities and numeric offsets; conditions that parse and
/// order-book levels that exist. `excluded` lists algorithm names the plan leaves out;
/// `key` tells what the caller's key with that id is.
pub fn check(
    p: &Profile<'_>,
    market: &Market,
    excluded: &[&str],
    key: impl FnMut(i64) -> KeyLookup,
) -> Result<(), Problem> {
    let Some(alg) = p
        .text("algorithm_id")
        .trim()
        .parse()
        .ok()
        .and_then(algorithm)
    else {
        return Err(problem(
            "algorithm_id",
            "Unknown algorithm; see strategy/list-algorithms.",
        ));
    };
    if excluded.contains(&alg.name) {
        return Err(problem(
            "algorithm_id",
            format!("{} is not part of your plan.", alg.name),
        ));
    }
    if !p
        .text("slice_delay")
        .trim()
        .parse::<i64>()
        .is_ok_and(|d| d >= 1)
    {
        return Err(problem(
            "slice_delay",
            "slice_delay is a whole number of seconds, at least 1.",
        ));
    }
    check_executables(p, market, key)?;
    if level_index(&p.text("executable_priceoffsettype")).is_none() {
        return Err(problem(
            "executable_priceoffsettype",
            "Use ob1 to ob5 (empty means ob1).",
        ));
    }
    check_conditions(p, market)
}

fn check_executables(
    p: &Profile<'_>,
    market: &Market,
    mut key: impl FnMut(i64) -> KeyLookup,
) -> Result<(), Problem> {
    const NO_RECORD: &str = "No such record on this account.";
    let codes = p.list("executable_codes");
    let n = codes.len();
    for name in EXECUTABLE_ARRAYS {
        let len = p.list(name).len();
        if len != 0 && len != n {
            return Err(problem(
                name,
                format!("{name} has {len} entries; executable_codes has {n}."),
            ));
        }
    }
    let keys = p.list("executable_apikeys");
    let values = p.list("executable_values");
    if n > 0 && (keys.len() != n || values.len() != n) {
        return Err(problem(
            "executable_apikeys",
            "Every executable needs a code, an exchange API key and a value (quantity).",
        ));
    }
    for i in 0..n {
        let Some(sym) = market.symbol(codes[i].trim()) else {
            return Err(problem(
                "executable_codes",
                format!("Unknown trading code {}.", codes[i]),
            ));
        };
        let id: i64 = keys[i]
            .trim()
            .parse()
            .map_err(|_| problem("executable_apikeys", NO_RECORD))?;
        match key(id) {
            KeyLookup::Unknown => {
                return Err(problem(
                    "executable_apikeys",
                    format!("Exchange API key {id}: {NO_RECORD}"),
                ));
            }
            KeyLookup::For(exchange) if exchange != sym.exchange => {
                return Err(problem(
                    "executable_apikeys",
                    format!("Exchange API key {id} is not for {}.", sym.exchange),
                ));
            }
            KeyLookup::For(_) => {}
        }
        if number_at(&values, i).is_none_or(|q| q <= 0.0) {
            return Err(problem(
                "executable_values",
                "Quantities must be positive numbers.",
            ));
        }
        for name in [
            "executable_priceoffset",
            "executable_priceexact",
            "executable_maximumtimelive",
        ] {
            let v = p.list(name);
            if v.get(i).is_some_and(|s| !s.trim().is_empty()) && number_at(&v, i).is_none() {
                return Err(problem(name, format!("{name} entries must be numbers.")));
            }
        }
    }
    Ok(())
}

fn check_conditions(p: &Profile<'_>, market: &Market) -> Result<(), Problem> {
    let codes = p.list("condition_codes");
    let values = p.list("condition_values");
    if codes.len() != values.len() {
        return Err(problem(
            "condition_values",
            "One condition value per condition code.",
        ));
    }
    for (c, v) in codes.iter().zip(&values) {
        if market.symbol(c.trim()).is_none() {
            return Err(problem(
                "condition_codes",
                format!("Unknown trading code {c}."),
            ));
        }
        if Condition::parse(v).is_none() {
            return Err(problem(
                "condition_values",
                format!("{v:?} is not a comparison such as >=100."),
            ));
        }
    }
    for name in [
        "condition_orderbooklevel_side1",
        "condition_orderbooklevel_side2",
    ] {
        let v = p.list(name);
        if v.len() > codes.len() {
            return Err(problem(
                name,
                format!("{name} has more entries than condition_codes."),
            ));
        }
        if let Some(b) = market.book("binance-btcusdt", 0) {
            if let Some(bad) = v.iter().find(|l| level_price(&b, l).is_none()) {
                return Err(problem(
                    name,
                    format!("{bad:?} is not mid, bid1..bid5 or ask1..ask5."),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn good() -> Map<String, Value> {
        json!({
            "algorithm_id": "3", "slice_delay": "2",
            "executable_codes": ["binance-btcusdt"], "executable_apikeys": ["1005"],
            "executable_values": ["0.001"], "executable_priceoffset": ["5"],
            "condition_codes": ["binance-btcusdt"], "condition_values": [">0"],
            "condition_orderbooklevel_side1": ["ask1"],
        })
        .as_object()
        .unwrap()
        .clone()
    }

    fn binance(id: i64) -> KeyLookup {
        if id == 1005 {
            KeyLookup::For("binance".into())
        } else {
            KeyLookup::Unknown
        }
    }

    #[test]
    fn a_complete_profile_passes() {
        let m = Market::new(7);
        let f = good();
        assert_eq!(check(&Profile::new(&f), &m, &[], binance), Ok(()));
        assert_eq!(Profile::new(&f).key_ids(), [1005]);
        assert_eq!(
            Profile::new(&f).number_at("executable_values", 0),
            Some(0.001)
        );
    }

    #[test]
    fn each_problem_names_its_parameter() {
        let m = Market::new(7);
        let cases: [(&str, Value, &str); 7] = [
            ("algorithm_id", json!("42"), "algorithm_id"),
            ("slice_delay", json!("0"), "slice_delay"),
            ("executable_values", json!(["0"]), "executable_values"),
            ("executable_apikeys", json!(["9"]), "executable_apikeys"),
            ("executable_codes", json!(["nowhere-x"]), "executable_codes"),
            ("condition_values", json!(["about 5"]), "condition_values"),
            (
                "executable_priceoffset",
                json!(["a", "b"]),
                "executable_priceoffset",
            ),
        ];
        for (field, value, param) in cases {
            let mut f = good();
            f.insert(field.into(), value);
            let e = check(&Profile::new(&f), &m, &[], binance).unwrap_err();
            assert_eq!(e.param, param, "{field}: {e:?}");
        }
        let f = good();
        let other = |_| KeyLookup::For("okex".into());
        let e = check(&Profile::new(&f), &m, &[], other).unwrap_err();
        assert!(e.message.contains("not for binance"), "{e:?}");
        let name = algorithm(3).unwrap().name;
        let e = check(&Profile::new(&f), &m, &[name], binance).unwrap_err();
        assert_eq!(e.param, "algorithm_id");
    }
}
