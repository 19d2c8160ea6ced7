//! The relay's 15 template functions, with the original relay's argument order and
//! behaviour (Go passes a piped value as the last argument, hence `timeFormat value
//! layout` but `regexReplaceAll re repl value`).
//!
//! Everything the functions need from the outside world comes through [`RelayContext`]:
//! the environment for `getEnv`, the output's options for `getVar`, and the layout event
//! times are parsed with for `timeFormat`.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use regex::Regex;

use crate::funcs::{FuncMap, Function, Param};
use crate::value::Value;
use crate::{gofmt, golayout, json};

/// Looks a name up (environment variable or output option); `None` when unset.
pub type Lookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The default `EVENTS_TEMPLATE_TIME_FORMAT`.
pub const DEFAULT_TIME_FORMAT: &str = "2006-01-02T15:04:05.999Z";

/// What the relay functions read from outside the template.
#[derive(Clone)]
pub struct RelayContext {
    /// Environment for `getEnv` (the relay passes the process environment; tests a map).
    pub env: Lookup,
    /// Output options for `getVar` (`URL`, `Timeout`, ...).
    pub vars: Lookup,
    /// Go layout `timeFormat` parses its input with.
    pub time_format: String,
    /// Largest string `replaceAll`/`regexReplaceAll` may build, in bytes.
    pub max_len: usize,
}

impl fmt::Debug for RelayContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RelayContext")
            .field("time_format", &self.time_format)
            .finish()
    }
}

impl Default for RelayContext {
    fn default() -> Self {
        RelayContext {
            env: Arc::new(|_| None),
            vars: Arc::new(|_| None),
            time_format: DEFAULT_TIME_FORMAT.to_string(),
            max_len: 1 << 20,
        }
    }
}

impl RelayContext {
    /// A context whose environment and variables come from maps (handy in tests).
    pub fn from_maps(env: HashMap<String, String>, vars: HashMap<String, String>) -> RelayContext {
        RelayContext {
            env: Arc::new(move |k| env.get(k).cloned()),
            vars: Arc::new(move |k| vars.get(k).cloned()),
            ..RelayContext::default()
        }
    }
}

/// Compiled regular expressions, shared across renders: templates call `regexMatch` with
/// the same literal pattern for every event.
#[derive(Default)]
struct RegexCache {
    map: Mutex<HashMap<String, Arc<Regex>>>,
}

impl RegexCache {
    fn get(&self, pattern: &str) -> Result<Arc<Regex>, String> {
        if let Ok(m) = self.map.lock() {
            if let Some(r) = m.get(pattern) {
                return Ok(Arc::clone(r));
            }
        }
        let re = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .dfa_size_limit(1 << 20)
            .build()
            .map_err(|e| {
                format!(
                    "error parsing regexp: {}",
                    e.to_string().lines().last().unwrap_or("invalid")
                )
            })?;
        let re = Arc::new(re);
        if let Ok(mut m) = self.map.lock() {
            // Bounded: a template has finitely many literal patterns; dynamic ones are rare.
            if m.len() > 256 {
                m.clear();
            }
            m.insert(pattern.to_string(), Arc::clone(&re));
        }
        Ok(re)
    }
}

fn s(v: &Value) -> &str {
    match v {
        Value::String(s) => s,
        _ => "",
    }
}

/// Go's `strings.Title`: upper-cases the first letter of every word, where a word starts
/// after a space or an ASCII character that is not a letter, digit or underscore.
pub fn go_title(s: &str) -> String {
    let mut prev = ' ';
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let sep = if (prev as u32) <= 0x7f {
            !(prev.is_ascii_alphanumeric() || prev == '_')
        } else if prev.is_alphanumeric() {
            false
        } else {
            prev.is_whitespace()
        };
        out.push(if sep { title_char(c) } else { c });
        prev = c;
    }
    out
}

// Go maps case rune by rune with Unicode's simple (one-to-one) mappings. Rust's
// `to_uppercase`/`to_lowercase` give the full mappings, which agree except where the full
// mapping is several characters, and Rust has no title case at all. The few characters
// where that matters are mapped here; the rest keep Rust's answer, or stay as they are when
// the full mapping has no one-character form (Go keeps ß as ß).

/// The single character `mapping` yields, if it yields exactly one.
fn single(mut mapping: impl Iterator<Item = char>) -> Option<char> {
    match (mapping.next(), mapping.next()) {
        (Some(c), None) => Some(c),
        _ => None,
    }
}

/// `unicode.ToUpper`.
fn upper_char(c: char) -> char {
    match c as u32 {
        // Greek with ypogegrammeni: the full mapping spells the iota out (ᾳ → ΑΙ), the
        // simple one keeps it as a prosgegrammeni (ᾳ → ᾼ).
        n @ (0x1F80..=0x1F87 | 0x1F90..=0x1F97 | 0x1FA0..=0x1FA7) => shifted(n, 8),
        0x1FB3 => 'ᾼ',
        0x1FC3 => 'ῌ',
        0x1FF3 => 'ῼ',
        _ => single(c.to_uppercase()).unwrap_or(c),
    }
}

/// `unicode.ToTitle`: the upper case, except for the Latin digraphs, whose title case is
/// their capital-small form (ǆ → ǅ), and Georgian Mkhedruli, which has no title case.
fn title_char(c: char) -> char {
    match c {
        'Ǆ'..='ǆ' => 'ǅ',
        'Ǉ'..='ǉ' => 'ǈ',
        'Ǌ'..='ǌ' => 'ǋ',
        'Ǳ'..='ǳ' => 'ǲ',
        'ა'..='ჿ' => c,
        _ => upper_char(c),
    }
}

/// `unicode.ToLower`.
fn lower_char(c: char) -> char {
    match c {
        // The full mapping adds a combining dot (i̇); the simple one is a plain i.
        'İ' => 'i',
        _ => single(c.to_lowercase()).unwrap_or(c),
    }
}

fn shifted(n: u32, by: u32) -> char {
    char::from_u32(n + by).unwrap_or(char::REPLACEMENT_CHARACTER)
}

fn go_upper(s: &str) -> String {
    s.chars().map(upper_char).collect()
}

fn go_lower(s: &str) -> String {
    s.chars().map(lower_char).collect()
}

/// Go's `strings.Replace(s, from, to, -1)`, refusing to build more than `max` bytes.
fn replace_all(s: &str, from: &str, to: &str, max: usize) -> Result<String, String> {
    let count = if from.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(from).count()
    };
    let size = s.len().saturating_add(count.saturating_mul(to.len()));
    if size > max {
        return Err(format!("result would exceed {max} bytes"));
    }
    Ok(s.replace(from, to))
}

fn regex_replace_all(re: &Regex, s: &str, repl: &str, max: usize) -> Result<String, String> {
    let mut out = String::new();
    let mut last = 0;
    for caps in re.captures_iter(s) {
        let m = caps.get(0).map(|m| (m.start(), m.end())).unwrap_or((0, 0));
        out.push_str(&s[last..m.0]);
        caps.expand(repl, &mut out);
        last = m.1;
        if out.len() > max {
            return Err(format!("result would exceed {max} bytes"));
        }
    }
    out.push_str(&s[last..]);
    Ok(out)
}

/// Registers the relay's 15 functions on top of Go's built-ins.
///
/// ```
/// use relay_templates::{relay::{relay_funcs, RelayContext}, Renderer, TemplateSet, Value};
/// let mut set = TemplateSet::new(relay_funcs(RelayContext::default()));
/// set.parse("t", r#"{{ .user | regexReplaceAll "@.*" "" | toUpper }}"#).unwrap();
/// let data = Value::from_json(&serde_json::json!({"user": "alice@example.com"}));
/// assert_eq!(set.render("t", &data).unwrap(), "ALICE");
/// ```
pub fn relay_funcs(ctx: RelayContext) -> FuncMap {
    let mut m = FuncMap::builtins();
    let cache = Arc::new(RegexCache::default());
    let max = ctx.max_len;
    use Param::{Any, String as Str, Strings};

    let c = Arc::clone(&cache);
    m.insert(
        "regexReplaceAll",
        Function::new(&[Str, Str, Str], move |a| {
            let re = c.get(s(&a[0]))?;
            regex_replace_all(&re, s(&a[2]), s(&a[1]), max).map(Value::String)
        }),
    );
    let c = Arc::clone(&cache);
    m.insert(
        "regexMatch",
        Function::new(&[Str, Str], move |a| {
            Ok(Value::Bool(c.get(s(&a[0]))?.is_match(s(&a[1]))))
        }),
    );
    m.insert(
        "replaceAll",
        Function::new(&[Str, Str, Str], move |a| {
            replace_all(s(&a[2]), s(&a[0]), s(&a[1]), max).map(Value::String)
        }),
    );
    m.insert(
        "toLower",
        Function::new(&[Str], |a| Ok(Value::String(go_lower(s(&a[0]))))),
    );
    m.insert(
        "toUpper",
        Function::new(&[Str], |a| Ok(Value::String(go_upper(s(&a[0]))))),
    );
    m.insert(
        "toTitle",
        Function::new(&[Str], |a| Ok(Value::String(go_title(s(&a[0]))))),
    );
    m.insert(
        "toJSON",
        Function::new(&[Any], |a| {
            Ok(Value::String(json::marshal(&a[0]).trim().to_string()))
        }),
    );
    m.insert(
        "split",
        Function::new(&[Str, Str], |a| {
            let text = s(&a[1]).trim();
            if text.is_empty() {
                return Ok(Value::list(Vec::new()));
            }
            let sep = s(&a[0]);
            let parts: Vec<Value> = if sep.is_empty() {
                text.chars().map(|c| Value::String(c.to_string())).collect()
            } else {
                text.split(sep)
                    .map(|p| Value::String(p.to_string()))
                    .collect()
            };
            Ok(Value::list(parts))
        }),
    );
    m.insert(
        "join",
        Function::new(&[Str, Strings], |a| {
            let Value::List(items) = &a[1] else {
                return Ok(Value::String(String::new()));
            };
            let parts: Vec<&str> = items.iter().map(s).collect();
            Ok(Value::String(parts.join(s(&a[0]))))
        }),
    );
    m.insert(
        "isEmpty",
        Function::new(&[Str], |a| Ok(Value::Bool(s(&a[0]).trim().is_empty()))),
    );
    let env = Arc::clone(&ctx.env);
    m.insert(
        "getEnv",
        Function::new(&[Str], move |a| {
            Ok(Value::String(env(s(&a[0])).unwrap_or_default()))
        }),
    );
    let vars = Arc::clone(&ctx.vars);
    m.insert(
        "getVar",
        Function::new(&[Str], move |a| {
            Ok(Value::String(
                vars(s(&a[0])).unwrap_or_else(|| "<invalid Value>".to_string()),
            ))
        }),
    );
    let layout = ctx.time_format.clone();
    m.insert(
        "timeFormat",
        Function::new(&[Str, Str], move |a| {
            let t = golayout::parse(&layout, s(&a[0]))?;
            Ok(Value::String(golayout::format(&t, s(&a[1]))))
        }),
    );
    m.insert(
        "jsonEscape",
        Function::new(&[Str], |a| {
            let mut out = String::new();
            json::string(&mut out, s(&a[0]));
            Ok(Value::String(out))
        }),
    );
    m.insert(
        "toString",
        Function::new(&[Any], |a| {
            Ok(Value::String(if a[0].is_nil() {
                String::new()
            } else {
                gofmt::format_v(&a[0])
            }))
        }),
    );
    m
}

/// What to send for a rendered message: `None` when it is blank, which is how templates
/// filter events out (the original skips messages that are empty after trimming).
pub fn message_to_send(rendered: &str) -> Option<&str> {
    if rendered.trim().is_empty() {
        None
    } else {
        Some(rendered)
    }
}

/// The targets a selector template chose: one per non-blank line, trimmed.
///
/// ```
/// use relay_templates::relay::selector_targets;
/// assert_eq!(selector_targets("\n  https://a/x \n\nhttps://b/y\n"), ["https://a/x", "https://b/y"]);
/// ```
pub fn selector_targets(rendered: &str) -> Vec<&str> {
    rendered
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn title_follows_go_strings_title() {
        assert_eq!(go_title("hello wORLD"), "Hello WORLD");
        assert_eq!(go_title("don't stop"), "Don'T Stop");
        assert_eq!(go_title("a-b_c d.e"), "A-B_c D.E");
        assert_eq!(go_upper("straße"), "STRAßE");
    }

    #[test]
    fn blank_messages_are_not_sent() {
        assert_eq!(message_to_send(" \n\t"), None);
        assert_eq!(message_to_send("\n x"), Some("\n x"));
    }

    #[test]
    fn replace_is_bounded() {
        assert_eq!(replace_all("abc", "", "-", 100).unwrap(), "-a-b-c-");
        assert!(replace_all(&"x".repeat(2000), "", &"y".repeat(1000), 1 << 20).is_err());
    }
}
