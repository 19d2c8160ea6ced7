//! Function registry: Go's built-ins plus whatever the embedder adds.
//!
//! Go checks argument types when it calls a function (`wrong type for value; expected
//! string; got float64`), so every function declares its parameter kinds and the executor
//! converts or rejects arguments before the body runs. Bodies therefore never see a value
//! of the wrong shape.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::gofmt;
use crate::value::Value;

/// How a parameter accepts a value (Go's static parameter type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Param {
    /// `reflect.Value`: anything, including "missing" (used by `len`, `index`, `eq`...).
    Value,
    /// `interface{}`: anything; a missing value arrives as nil.
    Any,
    /// `string`.
    String,
    /// A list whose elements are all strings (Go's `[]string`).
    Strings,
}

type Body = dyn Fn(&[Value]) -> Result<Value, String> + Send + Sync;

/// A template function: parameter kinds plus a body returning a value or an error message.
#[derive(Clone)]
pub struct Function {
    pub(crate) params: Vec<Param>,
    pub(crate) variadic: Option<Param>,
    pub(crate) kind: Kind,
}

#[derive(Clone)]
pub(crate) enum Kind {
    Body(Arc<Body>),
    /// `and` / `or` evaluate their arguments lazily, so the executor runs them itself.
    And,
    Or,
    /// Go's `call`: our data never holds functions, so it always fails at execution.
    Call,
}

impl fmt::Debug for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Function")
            .field("params", &self.params)
            .field("variadic", &self.variadic)
            .finish()
    }
}

impl Function {
    /// A function with fixed parameters.
    pub fn new<F>(params: &[Param], body: F) -> Function
    where
        F: Fn(&[Value]) -> Result<Value, String> + Send + Sync + 'static,
    {
        Function {
            params: params.to_vec(),
            variadic: None,
            kind: Kind::Body(Arc::new(body)),
        }
    }

    /// A function whose last parameter kind repeats (Go's `...T`).
    pub fn variadic<F>(params: &[Param], rest: Param, body: F) -> Function
    where
        F: Fn(&[Value]) -> Result<Value, String> + Send + Sync + 'static,
    {
        Function {
            params: params.to_vec(),
            variadic: Some(rest),
            kind: Kind::Body(Arc::new(body)),
        }
    }
}

/// Name -> function. [`FuncMap::builtins`] holds Go's predefined functions.
#[derive(Clone, Debug, Default)]
pub struct FuncMap {
    map: HashMap<String, Function>,
}

impl FuncMap {
    /// An empty map (not even the built-ins).
    pub fn empty() -> FuncMap {
        FuncMap::default()
    }

    /// Go's predefined functions: `and or not len index slice print printf println html js
    /// urlquery eq ne lt le gt ge call`.
    pub fn builtins() -> FuncMap {
        let mut m = FuncMap::default();
        let special = |kind| Function {
            params: vec![Param::Value],
            variadic: Some(Param::Value),
            kind,
        };
        m.insert("and", special(Kind::And));
        m.insert("or", special(Kind::Or));
        m.insert("call", special(Kind::Call));
        m.insert(
            "not",
            Function::new(&[Param::Value], |a| Ok(Value::Bool(!a[0].is_true()))),
        );
        m.insert("len", Function::new(&[Param::Value], |a| length(&a[0])));
        m.insert(
            "index",
            Function::variadic(&[Param::Value], Param::Value, |a| index(&a[0], &a[1..])),
        );
        m.insert(
            "slice",
            Function::variadic(&[Param::Value], Param::Value, |a| slice(&a[0], &a[1..])),
        );
        m.insert(
            "print",
            Function::variadic(&[], Param::Any, |a| Ok(Value::String(gofmt::sprint(a)))),
        );
        m.insert(
            "println",
            Function::variadic(&[], Param::Any, |a| Ok(Value::String(gofmt::sprintln(a)))),
        );
        m.insert(
            "printf",
            Function::variadic(&[Param::String], Param::Any, |a| {
                let Value::String(f) = &a[0] else {
                    return Err("printf: format is not a string".into());
                };
                Ok(Value::String(gofmt::sprintf(f, &a[1..])))
            }),
        );
        m.insert(
            "html",
            Function::variadic(&[], Param::Any, |a| {
                Ok(Value::String(html_escape(&eval_args(a))))
            }),
        );
        m.insert(
            "js",
            Function::variadic(&[], Param::Any, |a| {
                Ok(Value::String(js_escape(&eval_args(a))))
            }),
        );
        m.insert(
            "urlquery",
            Function::variadic(&[], Param::Any, |a| {
                Ok(Value::String(query_escape(&eval_args(a))))
            }),
        );
        m.insert(
            "eq",
            Function::variadic(&[Param::Value], Param::Value, |a| {
                eq(&a[0], &a[1..]).map(Value::Bool)
            }),
        );
        m.insert(
            "ne",
            Function::new(&[Param::Value, Param::Value], |a| {
                eq(&a[0], &a[1..2]).map(|b| Value::Bool(!b))
            }),
        );
        for name in ["lt", "le", "gt", "ge"] {
            m.insert(
                name,
                Function::new(&[Param::Value, Param::Value], move |a| {
                    let less = lt(&a[0], &a[1])?;
                    let less_or_equal = less || eq(&a[0], &a[1..2])?;
                    Ok(Value::Bool(match name {
                        "lt" => less,
                        "le" => less_or_equal,
                        "gt" => !less_or_equal,
                        _ => !less,
                    }))
                }),
            );
        }
        m
    }

    /// Adds or replaces a function.
    pub fn insert(&mut self, name: &str, f: Function) {
        self.map.insert(name.to_string(), f);
    }

    /// Looks a function up.
    pub fn get(&self, name: &str) -> Option<&Function> {
        self.map.get(name)
    }

    /// Whether `name` is defined.
    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }
}

/// `evalArgs` of Go's escapers: a single string is used as is, anything else is Sprint-ed.
fn eval_args(a: &[Value]) -> String {
    if let [Value::String(s)] = a {
        return s.clone();
    }
    gofmt::sprint(a)
}

fn length(v: &Value) -> Result<Value, String> {
    match v {
        Value::String(s) => Ok(Value::Int(s.len() as i64)),
        Value::List(l) => Ok(Value::Int(l.len() as i64)),
        Value::Map(m) => Ok(Value::Int(m.len() as i64)),
        Value::Missing | Value::Nil => Err("len of nil pointer".into()),
        other => Err(format!("len of type {}", other.type_name())),
    }
}

fn index_arg(i: &Value, cap: usize) -> Result<usize, String> {
    match i {
        Value::Int(n) if *n >= 0 && (*n as usize) <= cap => Ok(*n as usize),
        Value::Int(n) => Err(format!("index out of range: {n}")),
        Value::Missing | Value::Nil => Err("cannot index slice/array with nil".into()),
        other => Err(format!(
            "cannot index slice/array with type {}",
            other.type_name()
        )),
    }
}

fn index(item: &Value, idx: &[Value]) -> Result<Value, String> {
    let mut cur = item.clone();
    for i in idx {
        cur = match &cur {
            Value::List(l) => {
                let n = index_arg(i, l.len())?;
                match l.get(n) {
                    Some(v) => v.clone(),
                    None => return Err(format!("error calling index: index out of range: {n}")),
                }
            }
            Value::String(s) => {
                let n = index_arg(i, s.len())?;
                match s.as_bytes().get(n) {
                    Some(b) => Value::Int(*b as i64),
                    None => return Err(format!("error calling index: index out of range: {n}")),
                }
            }
            Value::Map(m) => match i {
                Value::String(k) => m.get(k).cloned().unwrap_or(Value::Nil),
                Value::Missing | Value::Nil => {
                    return Err("value is nil; should be of type string".into());
                }
                other => {
                    return Err(format!(
                        "value has type {}; should be string",
                        other.type_name()
                    ));
                }
            },
            Value::Missing | Value::Nil => return Err("index of untyped nil".into()),
            other => return Err(format!("can't index item of type {}", other.type_name())),
        };
    }
    Ok(cur)
}

fn slice(item: &Value, idx: &[Value]) -> Result<Value, String> {
    if idx.len() > 3 {
        return Err(format!("too many slice indexes: {}", idx.len()));
    }
    let len = match item {
        Value::String(s) => {
            if idx.len() == 3 {
                return Err("cannot 3-index slice a string".into());
            }
            s.len()
        }
        Value::List(l) => l.len(),
        Value::Missing | Value::Nil => return Err("slice of untyped nil".into()),
        other => return Err(format!("can't slice item of type {}", other.type_name())),
    };
    let mut pos = [0usize, len];
    for (k, i) in idx.iter().take(2).enumerate() {
        pos[k] = index_arg(i, len)?;
    }
    if let Some(cap) = idx.get(2) {
        let c = index_arg(cap, len)?;
        if c < pos[1] {
            return Err(format!("invalid slice index: {} > {}", pos[1], c));
        }
    }
    if pos[0] > pos[1] {
        return Err(format!("invalid slice index: {} > {}", pos[0], pos[1]));
    }
    match item {
        Value::String(s) => match s.get(pos[0]..pos[1]) {
            Some(sub) => Ok(Value::String(sub.to_string())),
            // Go slices bytes; a cut inside a UTF-8 sequence gives invalid text we cannot hold.
            None => Ok(Value::String(
                String::from_utf8_lossy(&s.as_bytes()[pos[0]..pos[1]]).into_owned(),
            )),
        },
        Value::List(l) => Ok(Value::list(l[pos[0]..pos[1]].to_vec())),
        _ => Err("can't slice".into()),
    }
}

#[derive(PartialEq, Clone, Copy, Debug)]
enum BasicKind {
    Invalid,
    Bool,
    Int,
    Float,
    String,
}

fn basic_kind(v: &Value) -> BasicKind {
    match v {
        Value::Bool(_) => BasicKind::Bool,
        Value::Int(_) => BasicKind::Int,
        Value::Float(_) => BasicKind::Float,
        Value::String(_) => BasicKind::String,
        _ => BasicKind::Invalid,
    }
}

/// Go's `eq`: true when `a` equals any of `others`; ints and floats do not mix.
fn eq(a: &Value, others: &[Value]) -> Result<bool, String> {
    if others.is_empty() {
        return Err("missing argument for comparison".into());
    }
    let k1 = basic_kind(a);
    for b in others {
        let k2 = basic_kind(b);
        let truth = if k1 != k2 {
            if !a.is_nil() && !b.is_nil() {
                return Err("incompatible types for comparison".into());
            }
            false
        } else {
            match (a, b) {
                (Value::Bool(x), Value::Bool(y)) => x == y,
                (Value::Int(x), Value::Int(y)) => x == y,
                (Value::Float(x), Value::Float(y)) => x == y,
                (Value::String(x), Value::String(y)) => x == y,
                _ if a.is_nil() || b.is_nil() => a.is_nil() && b.is_nil(),
                _ => {
                    return Err(format!(
                        "non-comparable type {}: {}",
                        gofmt::format_v(b),
                        b.type_name()
                    ));
                }
            }
        };
        if truth {
            return Ok(true);
        }
    }
    Ok(false)
}

fn lt(a: &Value, b: &Value) -> Result<bool, String> {
    let (k1, k2) = (basic_kind(a), basic_kind(b));
    if k1 != k2 {
        return Err("incompatible types for comparison".into());
    }
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Ok(x < y),
        (Value::Float(x), Value::Float(y)) => Ok(x < y),
        (Value::String(x), Value::String(y)) => Ok(x < y),
        _ => Err("invalid type for comparison".into()),
    }
}

/// Go's `template.HTMLEscapeString`.
pub(crate) fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\0' => out.push('\u{FFFD}'),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Go's `template.JSEscapeString`: quotes and HTML-significant characters escaped, ASCII
/// control characters as `\u00XX`, non-printable Unicode as `\uXXXX`.
pub(crate) fn js_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c if (c as u32) >= 0x80 && !gofmt::is_printable(c) => {
                out.push_str(&format!("\\u{:04X}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// Go's `url.QueryEscape`.
pub(crate) fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_follow_go() {
        let f = FuncMap::builtins();
        let call = |name: &str, a: Vec<Value>| match &f.get(name).unwrap().kind {
            Kind::Body(b) => b(&a),
            _ => unreachable!(),
        };
        assert_eq!(
            call("lt", vec![Value::Int(1), Value::Int(2)]),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            call("le", vec![Value::Int(2), Value::Int(2)]),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            call("gt", vec![Value::Int(3), Value::Int(2)]),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            call("gt", vec![Value::Int(2), Value::Int(2)]),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            call("ge", vec![Value::Int(2), Value::Int(2)]),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            call("ge", vec![Value::Int(1), Value::Int(2)]),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            call("le", vec![Value::Int(3), Value::Int(2)]),
            Ok(Value::Bool(false))
        );
        assert!(call("eq", vec![Value::Int(3), Value::Float(3.0)]).is_err());
        assert_eq!(
            call("eq", vec![Value::Missing, Value::from("x")]),
            Ok(Value::Bool(false))
        );
    }
}
