//! The dynamic value a template sees.
//!
//! The relay hands templates JSON that Go decoded into `interface{}`, so the model is
//! Go's view of that data: every JSON number is a float64, objects are string-keyed maps
//! whose printing order is the sorted key order, and there are two flavours of "nothing":
//! a JSON `null` ([`Value::Nil`]) and a key that is not there at all ([`Value::Missing`],
//! Go's invalid `reflect.Value`, printed as `<no value>`).

use std::collections::BTreeMap;
use std::sync::Arc;

/// A value flowing through template execution.
///
/// Lists and maps are reference counted so that `range` and field chains over large
/// documents copy pointers, not trees.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A map key that does not exist (Go's invalid value). Prints as `<no value>`.
    Missing,
    /// JSON `null` / Go `nil`.
    Nil,
    /// A boolean.
    Bool(bool),
    /// A Go `int`: template integer literals, `len`, range indexes.
    Int(i64),
    /// A Go `float64`: every JSON number and template float literals.
    Float(f64),
    /// A string.
    String(String),
    /// A list (`[]interface{}` for JSON arrays, `[]string` for `split`).
    List(Arc<Vec<Value>>),
    /// A string-keyed map; `BTreeMap` gives Go's sorted printing and range order for free.
    Map(Arc<BTreeMap<String, Value>>),
}

impl Value {
    /// Converts decoded JSON the way Go's `json.Unmarshal` into `interface{}` does:
    /// all numbers become floats.
    ///
    /// ```
    /// use relay_templates::Value;
    /// let v = Value::from_json(&serde_json::json!({"n": 3}));
    /// assert_eq!(v.get("n"), Some(&Value::Float(3.0)));
    /// ```
    pub fn from_json(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Nil,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or(0.0)),
            serde_json::Value::String(s) => Value::String(s.clone()),
            serde_json::Value::Array(a) => {
                Value::List(Arc::new(a.iter().map(Value::from_json).collect()))
            }
            serde_json::Value::Object(o) => Value::Map(Arc::new(
                o.iter()
                    .map(|(k, v)| (k.clone(), Value::from_json(v)))
                    .collect(),
            )),
        }
    }

    /// Builds a map value from pairs.
    pub fn map<I, K>(pairs: I) -> Value
    where
        I: IntoIterator<Item = (K, Value)>,
        K: Into<String>,
    {
        Value::Map(Arc::new(
            pairs.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        ))
    }

    /// Builds a list value.
    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Arc::new(items))
    }

    /// Map lookup; `None` when this is not a map or the key is absent.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(m) => m.get(key),
            _ => None,
        }
    }

    /// Go's notion of truth: false, 0, nil, and empty string/list/map are false.
    pub fn is_true(&self) -> bool {
        match self {
            Value::Missing | Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::String(s) => !s.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Map(m) => !m.is_empty(),
        }
    }

    /// The Go type name used in `%T` and in `%!verb(type=value)` error markers.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::Missing | Value::Nil => "<nil>",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float64",
            Value::String(_) => "string",
            Value::List(_) => "[]interface {}",
            Value::Map(_) => "map[string]interface {}",
        }
    }

    /// Whether this is one of the two "nothing" values.
    pub(crate) fn is_nil(&self) -> bool {
        matches!(self, Value::Missing | Value::Nil)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<&serde_json::Value> for Value {
    fn from(v: &serde_json::Value) -> Self {
        Value::from_json(v)
    }
}
