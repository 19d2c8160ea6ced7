//! Go `text/template`-compatible rendering for the event relay, plus the relay's event
//! model.
//!
//! Users of the original relay bring templates written for Go (`{{- define
//! "telegram-message" -}}`, pipelines, `printf "%.0f"`, `<no value>` for missing keys), so
//! this crate implements Go's template language and the corner of Go's `fmt` that templates
//! reach, on JSON data as Go sees it (every number a float64, maps printed with sorted
//! keys). On top of the engine it registers the relay's 15 template functions
//! ([`relay::relay_funcs`]) and turns admission reviews and Alertmanager notifications into
//! the per-event data the original handed to its templates ([`event`]).
//!
//! It deliberately does no I/O: no sockets, no files, no clock, no environment. The time of
//! an event, the environment behind `getEnv` and the output options behind `getVar` are
//! passed in by the caller. Execution is bounded (nesting depth, steps, output bytes) so a
//! hostile template ends with an error value, never a hang, a stack overflow or a panic.
//!
//! ```
//! use relay_templates::{FuncMap, Renderer, TemplateSet, Value};
//!
//! let mut set = TemplateSet::new(FuncMap::builtins());
//! set.parse("msg", r#"{{- define "msg" -}} {{ .kind }} x{{ printf "%.0f" .n }} {{- end }}"#)?;
//! let data = Value::from_json(&serde_json::json!({"kind": "Deployment", "n": 3}));
//! assert_eq!(set.render("msg", &data)?, "Deployment x3");
//! # Ok::<(), relay_templates::Error>(())
//! ```

#![forbid(unsafe_code)]

pub mod event;
mod exec;
mod funcs;
mod gofloat;
mod gofmt;
pub mod golayout;
mod json;
mod lex;
mod parse;
pub mod relay;
mod value;

use std::collections::HashMap;
use std::sync::Arc;

pub use exec::Limits;
pub use funcs::{FuncMap, Function, Param};
pub use value::Value;

/// Errors from parsing or executing a template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The template text does not parse (Go: `template: name:line: message`).
    #[error("template: {name}:{line}: {message}")]
    Parse {
        /// Name the text was parsed under.
        name: String,
        /// 1-based line of the offending token.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Execution failed; nothing is rendered (Go discards partial output too).
    #[error("template: {template}:{line}:{col}: executing {template:?} at <{context}>: {message}")]
    Exec {
        /// Template being executed when it failed.
        template: String,
        /// Line of the failing action.
        line: usize,
        /// Byte column of the failing action.
        col: usize,
        /// The source of the failing command.
        context: String,
        /// What went wrong.
        message: String,
    },
    /// No template with this name was parsed.
    #[error("template: no template {0:?} defined")]
    NoTemplate(String),
}

/// Renders a named template over data: the interface the relay's outputs use.
pub trait Renderer {
    /// Executes template `name` with `data` as dot and returns the text.
    fn render(&self, name: &str, data: &Value) -> Result<String, Error>;
}

/// A set of named templates sharing one function map (Go's `*template.Template` with its
/// associated templates).
#[derive(Debug, Clone)]
pub struct TemplateSet {
    trees: HashMap<String, Arc<parse::Tree>>,
    funcs: Arc<FuncMap>,
    limits: Limits,
}

impl TemplateSet {
    /// A set with no templates. Functions must be known before parsing, as in Go.
    pub fn new(funcs: FuncMap) -> TemplateSet {
        TemplateSet {
            trees: HashMap::new(),
            funcs: Arc::new(funcs),
            limits: Limits::default(),
        }
    }

    /// Replaces the execution budgets.
    pub fn with_limits(mut self, limits: Limits) -> TemplateSet {
        self.limits = limits;
        self
    }

    /// Parses `text` as the body of `name` (Go's `New(name).Parse(text)`); every
    /// `define`/`block` in it is added too. A later parse replaces same-named templates,
    /// except that an empty body never replaces a non-empty one. On error the set is
    /// unchanged.
    pub fn parse(&mut self, name: &str, text: &str) -> Result<(), Error> {
        let funcs = Arc::clone(&self.funcs);
        let trees = parse::parse(name, text, &|f| funcs.contains(f)).map_err(|e| Error::Parse {
            name: e.name,
            line: e.line,
            message: e.message,
        })?;
        for t in trees {
            let keep_old = parse::is_empty_tree(&t.list)
                && self
                    .trees
                    .get(&t.name)
                    .is_some_and(|old| !parse::is_empty_tree(&old.list));
            if !keep_old {
                self.trees.insert(t.name.clone(), Arc::new(t));
            }
        }
        Ok(())
    }

    /// Whether a template called `name` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.trees.contains_key(name)
    }

    /// Names of all templates, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.trees.keys().cloned().collect();
        v.sort();
        v
    }

    /// Executes template `name` with `data` as dot.
    pub fn execute(&self, name: &str, data: &Value) -> Result<String, Error> {
        let tree = self
            .trees
            .get(name)
            .ok_or_else(|| Error::NoTemplate(name.to_string()))?;
        let mut ex = exec::Exec::new(&self.trees, &self.funcs, self.limits);
        match ex.run(tree, data) {
            Ok(()) => Ok(std::mem::take(&mut ex.out)),
            Err(f) => Err(Error::Exec {
                template: f.template,
                line: f.pos.map(|p| p.line).unwrap_or(0),
                col: f.pos.map(|p| p.col).unwrap_or(0),
                context: shorten(&f.context),
                message: f.message,
            }),
        }
    }
}

/// Keeps error messages readable when the failing command is huge.
fn shorten(context: &str) -> String {
    const MAX: usize = 80;
    match context.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &context[..i]),
        None => context.to_string(),
    }
}

impl Renderer for TemplateSet {
    fn render(&self, name: &str, data: &Value) -> Result<String, Error> {
        self.execute(name, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_are_shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<TemplateSet>();
        assert_send_sync::<Box<dyn Renderer + Send + Sync>>();
    }

    #[test]
    fn nil_data_is_no_value() {
        let mut set = TemplateSet::new(FuncMap::builtins());
        set.parse("t", "{{.a.b}}").unwrap();
        assert_eq!(set.execute("t", &Value::Nil).unwrap(), "<no value>");
        assert_eq!(
            set.execute("nope", &Value::Nil),
            Err(Error::NoTemplate("nope".into()))
        );
    }

    #[test]
    fn later_parse_replaces_but_empty_does_not() {
        let mut set = TemplateSet::new(FuncMap::builtins());
        set.parse("t", "{{define \"x\"}}one{{end}}").unwrap();
        set.parse("u", "{{define \"x\"}}two{{end}}").unwrap();
        assert_eq!(set.execute("x", &Value::Nil).unwrap(), "two");
        set.parse("v", "{{define \"x\"}} {{end}}").unwrap();
        assert_eq!(set.execute("x", &Value::Nil).unwrap(), "two");
        assert!(set.parse("w", "{{if}}").is_err());
        assert_eq!(set.names(), ["t", "u", "v", "x"]);
    }
}
