//! Repairs that let the loader go on past a problem: the node an error points at is made
//! acceptable in a copy of the document, so the next run reports the next problem.

use ratelimit_core::{ConfigError, ConfigErrorKind};
use serde_yaml::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

pub(super) fn parse_path(path: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, rest) = part.split_once('[').unwrap_or((part, ""));
        if !key.is_empty() {
            out.push(Seg::Key(key.to_owned()));
        }
        for idx in rest.split('[') {
            if let Ok(i) = idx.trim_end_matches(']').parse() {
                out.push(Seg::Index(i));
            }
        }
    }
    out
}

pub(super) fn node_mut<'a>(root: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    let mut cur = root;
    for s in path {
        cur = match (s, cur) {
            (Seg::Key(k), Value::Mapping(m)) => m.get_mut(k.as_str())?,
            (Seg::Index(i), Value::Sequence(v)) => v.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

pub(super) fn mapping_at<'a>(
    root: &'a mut Value,
    path: &[Seg],
) -> Option<&'a mut serde_yaml::Mapping> {
    match node_mut(root, path)? {
        Value::Mapping(m) => Some(m),
        _ => None,
    }
}

/// Makes the node an error points at acceptable to the loader, without moving any other
/// node (list elements are replaced, never removed, so later paths stay right).
#[derive(Default)]
pub(super) struct Repair {
    placeholders: usize,
}

impl Repair {
    fn placeholder(&mut self) -> Value {
        self.placeholders += 1;
        Value::String(format!("check-config-placeholder-{}", self.placeholders))
    }

    pub(super) fn apply(&mut self, root: &mut Value, e: &ConfigError) -> bool {
        let path = parse_path(&e.path);
        match e.kind {
            ConfigErrorKind::UnknownKey => {
                let key = quoted(&e.message).unwrap_or_default();
                mapping_at(root, &path).is_some_and(|m| m.remove(key.as_str()).is_some())
            }
            ConfigErrorKind::KeyNotString => mapping_at(root, &path).is_some_and(|m| {
                let before = m.len();
                m.retain(|k, _| matches!(k, Value::String(_)));
                m.len() != before
            }),
            ConfigErrorKind::EmptyDomain => {
                let p = self.placeholder();
                mapping_at(root, &[]).is_some_and(|m| {
                    m.insert("domain".into(), p);
                    true
                })
            }
            ConfigErrorKind::EmptyKey | ConfigErrorKind::DuplicateCompositeKey => {
                let p = self.placeholder();
                mapping_at(root, &path).is_some_and(|m| {
                    m.remove("value");
                    m.insert("key".into(), p);
                    true
                })
            }
            ConfigErrorKind::ShareThresholdWithoutWildcard => {
                mapping_at(root, &path).is_some_and(|m| m.remove("share_threshold").is_some())
            }
            ConfigErrorKind::UnitWhenUnlimited => {
                mapping_at(root, &path).is_some_and(|m| m.remove("unit").is_some())
            }
            ConfigErrorKind::InvalidUnit => mapping_at(root, &path).is_some_and(|m| {
                m.insert("unit".into(), "second".into());
                true
            }),
            ConfigErrorKind::RateLimitAndRateLimits => {
                mapping_at(root, &path).is_some_and(|m| m.remove("rate_limits").is_some())
            }
            ConfigErrorKind::InvalidRateLimits if matches!(path.last(), Some(Seg::Index(_))) => {
                mapping_at(root, &path).is_some_and(|m| m.remove("unlimited").is_some())
            }
            ConfigErrorKind::EmptyReplaces
            | ConfigErrorKind::ReplacesSelf
            | ConfigErrorKind::DuplicateLimitName => {
                let p = self.placeholder();
                mapping_at(root, &path).is_some_and(|m| {
                    m.insert("name".into(), p);
                    true
                })
            }
            // Type errors, floats, lists of scalars, bad metadata: drop the node.
            _ => self.drop_node(root, &path),
        }
    }

    fn drop_node(&mut self, root: &mut Value, path: &[Seg]) -> bool {
        let Some((last, parent)) = path.split_last() else {
            return false;
        };
        match (last, node_mut(root, parent)) {
            (Seg::Key(k), Some(Value::Mapping(m))) => m.remove(k.as_str()).is_some(),
            (Seg::Index(i), Some(Value::Sequence(v))) if *i < v.len() => {
                // A placeholder of the list's kind keeps the other elements' indices.
                let field = parent.iter().rev().find_map(|s| match s {
                    Seg::Key(k) => Some(k.as_str()),
                    Seg::Index(_) => None,
                });
                let mut m = serde_yaml::Mapping::new();
                let name = if field == Some("replaces") {
                    "name"
                } else {
                    "key"
                };
                m.insert(name.into(), self.placeholder());
                v[*i] = Value::Mapping(m);
                true
            }
            _ => false,
        }
    }
}

/// The text between the first pair of single quotes.
pub(super) fn quoted(msg: &str) -> Option<String> {
    let start = msg.find('\'')? + 1;
    let len = msg[start..].find('\'')?;
    Some(msg[start..start + len].to_owned())
}
