//! Tree walker. Follows Go's `text/template/exec.go` semantics for dot, variables, field
//! chains on maps, missing keys and argument conversion, with three budgets Go does not
//! have (nesting depth, steps, output bytes) so a hostile template ends with an error.

use std::collections::HashMap;
use std::sync::Arc;

use crate::funcs::{FuncMap, Kind, Param};
use crate::gofmt;
use crate::parse::{Arg, Cmd, Control, Node, Pipe, Pos, Tree};
use crate::value::Value;

/// Execution budgets. The defaults are far above what a chat message template needs.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Limits {
    /// Deepest nesting of template calls, control structures and parenthesized pipelines.
    pub max_depth: usize,
    /// Largest output (and largest intermediate string), in bytes.
    pub max_output: usize,
    /// Most nodes executed plus loop iterations in one execution.
    pub max_steps: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 200,
            max_output: 1 << 20,
            max_steps: 1_000_000,
        }
    }
}

impl Limits {
    /// Sets [`Limits::max_depth`].
    pub fn with_max_depth(mut self, n: usize) -> Limits {
        self.max_depth = n;
        self
    }

    /// Sets [`Limits::max_output`].
    pub fn with_max_output(mut self, n: usize) -> Limits {
        self.max_output = n;
        self
    }

    /// Sets [`Limits::max_steps`].
    pub fn with_max_steps(mut self, n: u64) -> Limits {
        self.max_steps = n;
        self
    }
}

pub(crate) struct ExecFailure {
    pub template: String,
    pub pos: Option<Pos>,
    pub context: String,
    pub message: String,
}

enum Flow {
    Normal,
    Break,
    Continue,
}

type R<T> = Result<T, ExecFailure>;

pub(crate) struct Exec<'a> {
    pub trees: &'a HashMap<String, Arc<Tree>>,
    pub funcs: &'a FuncMap,
    pub limits: Limits,
    pub out: String,
    vars: Vec<(String, Value)>,
    depth: usize,
    steps: u64,
    tmpl: String,
    at: Option<(Pos, String)>,
}

impl<'a> Exec<'a> {
    pub(crate) fn new(
        trees: &'a HashMap<String, Arc<Tree>>,
        funcs: &'a FuncMap,
        limits: Limits,
    ) -> Self {
        Exec {
            trees,
            funcs,
            limits,
            out: String::new(),
            vars: Vec::new(),
            depth: 0,
            steps: 0,
            tmpl: String::new(),
            at: None,
        }
    }

    pub(crate) fn run(&mut self, tree: &Tree, data: &Value) -> R<()> {
        self.tmpl = tree.name.clone();
        // Go's Execute(w, nil) starts with an invalid dot, not a nil interface.
        let data = if *data == Value::Nil {
            &Value::Missing
        } else {
            data
        };
        self.vars = vec![("$".to_string(), data.clone())];
        self.list(&tree.list, data).map(|_| ())
    }

    fn fail<T>(&self, message: impl Into<String>) -> R<T> {
        Err(ExecFailure {
            template: self.tmpl.clone(),
            pos: self.at.as_ref().map(|a| a.0),
            context: self.at.as_ref().map(|a| a.1.clone()).unwrap_or_default(),
            message: message.into(),
        })
    }

    fn step(&mut self) -> R<()> {
        self.steps += 1;
        if self.steps > self.limits.max_steps {
            return self.fail(format!(
                "execution exceeded {} steps",
                self.limits.max_steps
            ));
        }
        Ok(())
    }

    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return self.fail(format!(
                "exceeded maximum template depth ({})",
                self.limits.max_depth
            ));
        }
        Ok(())
    }

    fn write(&mut self, s: &str) -> R<()> {
        if self.out.len() + s.len() > self.limits.max_output {
            return self.fail(format!("output exceeds {} bytes", self.limits.max_output));
        }
        self.out.push_str(s);
        Ok(())
    }

    fn list(&mut self, nodes: &[Node], dot: &Value) -> R<Flow> {
        for n in nodes {
            match self.node(n, dot)? {
                Flow::Normal => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Normal)
    }

    fn node(&mut self, n: &Node, dot: &Value) -> R<Flow> {
        self.step()?;
        match n {
            Node::Text(t) => self.write(t)?,
            Node::Action(p) => {
                let v = self.pipe(p, dot)?;
                if p.decl.is_empty() {
                    let s = gofmt::print_action(&v);
                    self.write(&s)?;
                }
            }
            Node::If(c) => return self.if_with(c, dot, false),
            Node::With(c) => return self.if_with(c, dot, true),
            Node::Range(c) => return self.range(c, dot),
            Node::Template { pos, name, pipe } => {
                self.at = Some((*pos, format!("template {name:?}")));
                let Some(tree) = self.trees.get(name) else {
                    return self.fail(format!("template {name:?} not defined"));
                };
                let tree = Arc::clone(tree);
                let new_dot = match pipe {
                    Some(p) => self.pipe(p, dot)?,
                    None => Value::Missing,
                };
                self.enter()?;
                let saved_vars =
                    std::mem::replace(&mut self.vars, vec![("$".to_string(), new_dot.clone())]);
                let saved_tmpl = std::mem::replace(&mut self.tmpl, name.clone());
                let r = self.list(&tree.list, &new_dot);
                self.vars = saved_vars;
                self.tmpl = saved_tmpl;
                self.depth -= 1;
                r?;
            }
            Node::Break => return Ok(Flow::Break),
            Node::Continue => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn if_with(&mut self, c: &Control, dot: &Value, with: bool) -> R<Flow> {
        self.enter()?;
        let mark = self.vars.len();
        let v = self.pipe(&c.pipe, dot)?;
        let flow = if v.is_true() {
            if with {
                self.list(&c.list, &v)?
            } else {
                self.list(&c.list, dot)?
            }
        } else if let Some(e) = &c.else_list {
            self.list(e, dot)?
        } else {
            Flow::Normal
        };
        self.vars.truncate(mark);
        self.depth -= 1;
        Ok(flow)
    }

    fn range(&mut self, c: &Control, dot: &Value) -> R<Flow> {
        self.enter()?;
        let mark = self.vars.len();
        let v = self.pipe(&c.pipe, dot)?;
        let mark_iter = self.vars.len();
        let items: Vec<(Value, Value)> = match &v {
            Value::List(l) => l
                .iter()
                .enumerate()
                .map(|(i, x)| (Value::Int(i as i64), x.clone()))
                .collect(),
            Value::Map(m) => m
                .iter()
                .map(|(k, x)| (Value::String(k.clone()), x.clone()))
                .collect(),
            Value::Int(n) => {
                if c.pipe.decl.len() > 1 {
                    return self.fail(format!(
                        "can't use {n} to iterate over more than one variable"
                    ));
                }
                if *n as u64 > self.limits.max_steps {
                    return self.fail(format!(
                        "execution exceeded {} steps",
                        self.limits.max_steps
                    ));
                }
                (0..(*n).max(0))
                    .map(|i| (Value::Int(i), Value::Int(i)))
                    .collect()
            }
            Value::Missing => Vec::new(),
            other => {
                return self.fail(format!(
                    "range can't iterate over {}",
                    gofmt::format_v(other)
                ));
            }
        };
        let mut flow = Flow::Normal;
        if items.is_empty() {
            if let Some(e) = &c.else_list {
                flow = self.list(e, dot)?;
            }
        }
        for (key, elem) in items {
            self.step()?;
            match (c.pipe.decl.len(), c.pipe.is_assign) {
                (0, _) => {}
                (1, false) => self.vars[mark_iter - 1].1 = elem.clone(),
                (_, false) => {
                    self.vars[mark_iter - 2].1 = key;
                    self.vars[mark_iter - 1].1 = elem.clone();
                }
                (1, true) => self.set_var(&c.pipe.decl[0], elem.clone())?,
                (_, true) => {
                    self.set_var(&c.pipe.decl[0], key)?;
                    self.set_var(&c.pipe.decl[1], elem.clone())?;
                }
            }
            let r = self.list(&c.list, &elem)?;
            self.vars.truncate(mark_iter);
            if matches!(r, Flow::Break) {
                break;
            }
        }
        if matches!(flow, Flow::Break | Flow::Continue) {
            // break/continue in the else branch belong to an enclosing range.
        } else {
            flow = Flow::Normal;
        }
        self.vars.truncate(mark);
        self.depth -= 1;
        Ok(flow)
    }

    fn set_var(&mut self, name: &str, v: Value) -> R<()> {
        match self.vars.iter_mut().rev().find(|(n, _)| n == name) {
            Some(slot) => {
                slot.1 = v;
                Ok(())
            }
            None => self.fail(format!("undefined variable: {name}")),
        }
    }

    fn var(&self, name: &str) -> R<Value> {
        match self.vars.iter().rev().find(|(n, _)| n == name) {
            Some((_, v)) => Ok(v.clone()),
            None => self.fail(format!("undefined variable: {name}")),
        }
    }

    fn pipe(&mut self, p: &Pipe, dot: &Value) -> R<Value> {
        let mut value: Option<Value> = None;
        for cmd in &p.cmds {
            let v = self.cmd(cmd, dot, value.take())?;
            // Go digs a nil out of its interface here, which turns JSON null into "no value".
            value = Some(if v == Value::Nil { Value::Missing } else { v });
        }
        let value = value.unwrap_or(Value::Missing);
        for name in &p.decl {
            if p.is_assign {
                self.set_var(name, value.clone())?;
            } else {
                self.vars.push((name.clone(), value.clone()));
            }
        }
        Ok(value)
    }

    fn cmd(&mut self, cmd: &Cmd, dot: &Value, fin: Option<Value>) -> R<Value> {
        self.at = Some((cmd.pos, cmd.src.clone()));
        let has_args = cmd.args.len() > 1 || fin.is_some();
        let not_a_function = |this: &Self| -> R<()> {
            if has_args {
                return this.fail(format!(
                    "can't give argument to non-function {}",
                    cmd.src.split(' ').next().unwrap_or("")
                ));
            }
            Ok(())
        };
        match &cmd.args[0] {
            Arg::Ident(name) => self.call(name, &cmd.args[1..], dot, fin),
            Arg::Field(names) => self.field_chain(dot.clone(), names, has_args),
            Arg::Var(name, names) => {
                let v = self.var(name)?;
                if names.is_empty() {
                    not_a_function(self)?;
                    Ok(v)
                } else {
                    self.field_chain(v, names, has_args)
                }
            }
            Arg::Chain(p, names) => {
                if names.is_empty() {
                    not_a_function(self)?;
                }
                self.enter()?;
                let v = self.pipe(p, dot)?;
                self.depth -= 1;
                self.at = Some((cmd.pos, cmd.src.clone()));
                if names.is_empty() {
                    Ok(v)
                } else {
                    self.field_chain(v, names, has_args)
                }
            }
            Arg::Nil => self.fail("nil is not a command"),
            other => {
                not_a_function(self)?;
                Ok(self.literal(other, dot))
            }
        }
    }

    fn literal(&self, a: &Arg, dot: &Value) -> Value {
        match a {
            Arg::Dot => dot.clone(),
            Arg::Bool(b) => Value::Bool(*b),
            Arg::Int(i) => Value::Int(*i),
            Arg::Float(f) => Value::Float(*f),
            Arg::Str(s) => Value::String(s.clone()),
            _ => Value::Nil,
        }
    }

    /// `.a.b.c` on `receiver`. Go: a missing receiver stays missing, a nil one is an error,
    /// and only maps have fields in JSON data.
    fn field_chain(&mut self, receiver: Value, names: &[String], has_args: bool) -> R<Value> {
        let mut cur = receiver;
        for (i, name) in names.iter().enumerate() {
            let last = i + 1 == names.len();
            cur = match &cur {
                Value::Missing => return Ok(Value::Missing),
                Value::Nil => {
                    return self.fail(format!("nil pointer evaluating interface {{}}.{name}"));
                }
                Value::Map(m) => {
                    if last && has_args {
                        return self.fail(format!("{name} is not a method but has arguments"));
                    }
                    m.get(name).cloned().unwrap_or(Value::Missing)
                }
                other => {
                    // Values reached through a map have Go's static type interface {}.
                    let ty = if i == 0 {
                        other.type_name()
                    } else {
                        "interface {}"
                    };
                    return self.fail(format!("can't evaluate field {name} in type {ty}"));
                }
            };
        }
        Ok(cur)
    }

    /// Evaluates one argument the way Go's `evalArg` does for the parameter kind.
    fn arg(&mut self, a: &Arg, dot: &Value, kind: Param) -> R<Value> {
        let v = match a {
            Arg::Field(names) => self.field_chain(dot.clone(), names, false)?,
            Arg::Var(name, names) => {
                let v = self.var(name)?;
                self.field_chain(v, names, false)?
            }
            Arg::Chain(p, names) => {
                let at = self.at.clone();
                self.enter()?;
                let v = self.pipe(p, dot)?;
                self.depth -= 1;
                self.at = at;
                self.field_chain(v, names, false)?
            }
            Arg::Ident(name) => {
                let at = self.at.clone();
                let v = self.call(name, &[], dot, None)?;
                self.at = at;
                v
            }
            Arg::Nil => {
                return match kind {
                    Param::Value | Param::Any => Ok(Value::Nil),
                    Param::String => self.fail("cannot assign nil to string"),
                    Param::Strings => self.fail("cannot assign nil to []string"),
                };
            }
            Arg::Dot => dot.clone(),
            other => {
                // Go checks constants against the parameter type with its own wording.
                let v = self.literal(other, dot);
                return match (kind, &v) {
                    (Param::String, Value::String(_)) | (Param::Value | Param::Any, _) => Ok(v),
                    (Param::String, _) => {
                        self.fail(format!("expected string; found {}", gofmt::format_v(&v)))
                    }
                    (Param::Strings, _) => self.fail(format!(
                        "can't handle {} for arg of type []string",
                        gofmt::format_v(&v)
                    )),
                };
            }
        };
        self.convert(v, kind)
    }

    fn convert(&self, v: Value, kind: Param) -> R<Value> {
        match kind {
            Param::Value => Ok(v),
            Param::Any => Ok(if v == Value::Missing { Value::Nil } else { v }),
            Param::String => match v {
                Value::String(_) => Ok(v),
                Value::Missing => self.fail("invalid value; expected string"),
                Value::Nil => self.fail("wrong type for value; expected string; got interface {}"),
                other => self.fail(format!(
                    "wrong type for value; expected string; got {}",
                    other.type_name()
                )),
            },
            Param::Strings => match &v {
                Value::List(l) if l.iter().all(|x| matches!(x, Value::String(_))) => Ok(v),
                Value::Missing => self.fail("invalid value; expected []string"),
                other => self.fail(format!(
                    "wrong type for value; expected []string; got {}",
                    other.type_name()
                )),
            },
        }
    }

    fn call(&mut self, name: &str, args: &[Arg], dot: &Value, fin: Option<Value>) -> R<Value> {
        let Some(f) = self.funcs.get(name) else {
            return self.fail(format!("{name:?} is not a defined function"));
        };
        let f = f.clone();
        let at = self.at.clone();
        let n_in = args.len() + usize::from(fin.is_some());
        let fixed = f.params.len();
        if (f.variadic.is_none() && n_in != fixed) || (f.variadic.is_some() && n_in < fixed) {
            let want = if f.variadic.is_some() {
                format!("at least {fixed}")
            } else {
                fixed.to_string()
            };
            return self.fail(format!(
                "wrong number of args for {name}: want {want} got {n_in}"
            ));
        }
        let kind_of = |i: usize| -> Param {
            if i < fixed {
                f.params[i]
            } else {
                f.variadic.unwrap_or(Param::Any)
            }
        };
        match &f.kind {
            Kind::And | Kind::Or => {
                let want_truth = matches!(f.kind, Kind::Or);
                let mut last = Value::Missing;
                for a in args {
                    last = self.arg(a, dot, Param::Value)?;
                    if last.is_true() == want_truth {
                        return Ok(last);
                    }
                }
                if let Some(v) = fin {
                    last = v;
                }
                Ok(last)
            }
            Kind::Call => {
                let first = match args.first() {
                    Some(a) => self.arg(a, dot, Param::Value)?,
                    None => fin.unwrap_or(Value::Missing),
                };
                self.at = at;
                if first.is_nil() {
                    self.fail("call of nil")
                } else {
                    self.fail(format!(
                        "non-function {} of type {}",
                        gofmt::format_v(&first),
                        first.type_name()
                    ))
                }
            }
            Kind::Body(body) => {
                let mut argv = Vec::with_capacity(n_in);
                for (i, a) in args.iter().enumerate() {
                    argv.push(self.arg(a, dot, kind_of(i))?);
                }
                self.at = at;
                if let Some(v) = fin {
                    argv.push(self.convert(v, kind_of(n_in - 1))?);
                }
                match body(&argv) {
                    Ok(v) => {
                        if let Value::String(s) = &v {
                            if s.len() > self.limits.max_output {
                                return self.fail(format!(
                                    "error calling {name}: result exceeds {} bytes",
                                    self.limits.max_output
                                ));
                            }
                        }
                        Ok(v)
                    }
                    Err(e) => self.fail(format!("error calling {name}: {e}")),
                }
            }
        }
    }
}
