//! Parser: tokens -> one tree per template name, following Go's `text/template/parse`
//! rules (variables must be declared before use, functions must exist at parse time,
//! `define` only at the top level, `else if`/`else with` chains, `break`/`continue` only
//! inside `range`).

use crate::lex::{Tok, Token, lex};

/// Deepest nesting of control structures and parentheses a template may have. Keeps the
/// recursive parser and executor far away from the stack limit on hostile input.
pub(crate) const MAX_NESTING: usize = 100;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Pos {
    pub line: usize,
    pub col: usize,
}

#[derive(Debug)]
pub(crate) enum Node {
    Text(String),
    Action(Pipe),
    If(Control),
    Range(Control),
    With(Control),
    Template {
        pos: Pos,
        name: String,
        pipe: Option<Pipe>,
    },
    Break,
    Continue,
}

#[derive(Debug)]
pub(crate) struct Control {
    pub pipe: Pipe,
    pub list: Vec<Node>,
    pub else_list: Option<Vec<Node>>,
}

#[derive(Debug)]
pub(crate) struct Pipe {
    pub decl: Vec<String>,
    pub is_assign: bool,
    pub cmds: Vec<Cmd>,
}

#[derive(Debug)]
pub(crate) struct Cmd {
    pub pos: Pos,
    /// Source text of the command, quoted in execution errors like Go's `at <...>`.
    pub src: String,
    pub args: Vec<Arg>,
}

#[derive(Debug)]
pub(crate) enum Arg {
    Dot,
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// A function name.
    Ident(String),
    /// `.a.b.c`
    Field(Vec<String>),
    /// `$x.a.b`
    Var(String, Vec<String>),
    /// `(pipeline).a.b`
    Chain(Box<Pipe>, Vec<String>),
}

/// A parsed template body.
#[derive(Debug)]
pub(crate) struct Tree {
    pub name: String,
    /// Top-level nodes of the body.
    pub list: Vec<Node>,
}

pub(crate) struct ParseFailure {
    pub name: String,
    pub line: usize,
    pub message: String,
}

/// Parses `src` as the body of `name`; returns every tree it defines (the top-level body
/// under `name`, plus each `define`/`block`).
pub(crate) fn parse(
    name: &str,
    src: &str,
    is_func: &dyn Fn(&str) -> bool,
) -> Result<Vec<Tree>, ParseFailure> {
    let toks = lex(src).map_err(|e| ParseFailure {
        name: name.to_string(),
        line: e.line,
        message: e.message,
    })?;
    let mut p = Parser {
        src,
        toks,
        i: 0,
        vars: vec!["$".to_string()],
        is_func,
        trees: Vec::new(),
        name: name.to_string(),
        depth: 0,
        range_depth: 0,
    };
    let mut top = Vec::new();
    loop {
        if p.peek().tok == Tok::Eof {
            break;
        }
        if p.peek().tok == Tok::Left && p.peek_keyword_after_left() == Some("define") {
            p.next();
            p.skip_space();
            p.next(); // define
            p.definition()?;
            continue;
        }
        match p.text_or_action()? {
            Item::Node(n) => top.push(n),
            Item::End(t) | Item::Else(t) => {
                return Err(p.fail_at(&t, format!("unexpected {}", describe(&t.tok))));
            }
        }
    }
    p.add(Tree {
        name: name.to_string(),
        list: top,
    })?;
    Ok(p.trees)
}

/// Go's `IsEmptyTree`: only whitespace text (and comments, which we drop).
pub(crate) fn is_empty_tree(list: &[Node]) -> bool {
    list.iter()
        .all(|n| matches!(n, Node::Text(t) if t.trim().is_empty()))
}

enum Item {
    Node(Node),
    End(Token),
    Else(Token),
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    i: usize,
    vars: Vec<String>,
    is_func: &'a dyn Fn(&str) -> bool,
    trees: Vec<Tree>,
    name: String,
    depth: usize,
    range_depth: usize,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Text(s) => format!("text {s:?}"),
        Tok::Left => "\"{{\"".into(),
        Tok::Right => "\"}}\"".into(),
        Tok::Space => "space".into(),
        Tok::Ident(s) => format!("identifier {s:?}"),
        Tok::Field(s) => format!("field \".{s}\""),
        Tok::Var(s) => format!("variable {s:?}"),
        Tok::Dot => "\".\"".into(),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::Char(c) => format!("character {c}"),
        Tok::Number(n) => format!("number {n}"),
        Tok::Bool(b) => format!("{b}"),
        Tok::Nil => "nil".into(),
        Tok::Pipe => "\"|\"".into(),
        Tok::LParen => "\"(\"".into(),
        Tok::RParen => "\")\"".into(),
        Tok::Declare => "\":=\"".into(),
        Tok::Assign => "\"=\"".into(),
        Tok::Comma => "\",\"".into(),
        Tok::Keyword(k) => format!("<{k}>"),
        Tok::Eof => "EOF".into(),
    }
}

impl Parser<'_> {
    fn peek(&self) -> &Token {
        &self.toks[self.i.min(self.toks.len() - 1)]
    }

    fn next(&mut self) -> Token {
        let t = self.toks[self.i.min(self.toks.len() - 1)].clone();
        if self.i < self.toks.len() - 1 {
            self.i += 1;
        }
        t
    }

    fn skip_space(&mut self) {
        while self.peek().tok == Tok::Space {
            self.next();
        }
    }

    fn next_non_space(&mut self) -> Token {
        self.skip_space();
        self.next()
    }

    fn peek_non_space(&mut self) -> Token {
        self.skip_space();
        self.peek().clone()
    }

    fn peek_keyword_after_left(&self) -> Option<&'static str> {
        let mut j = self.i + 1;
        while j < self.toks.len() && self.toks[j].tok == Tok::Space {
            j += 1;
        }
        match self.toks.get(j).map(|t| &t.tok) {
            Some(Tok::Keyword(k)) => Some(k),
            _ => None,
        }
    }

    fn fail_at(&self, t: &Token, message: String) -> ParseFailure {
        ParseFailure {
            name: self.name.clone(),
            line: t.line,
            message,
        }
    }

    fn fail<T>(&self, t: &Token, message: impl Into<String>) -> Result<T, ParseFailure> {
        Err(self.fail_at(t, message.into()))
    }

    fn pos(t: &Token) -> Pos {
        Pos {
            line: t.line,
            col: t.col,
        }
    }

    fn add(&mut self, tree: Tree) -> Result<(), ParseFailure> {
        if let Some(existing) = self.trees.iter_mut().find(|t| t.name == tree.name) {
            if is_empty_tree(&existing.list) {
                *existing = tree;
                return Ok(());
            }
            if !is_empty_tree(&tree.list) {
                return Err(ParseFailure {
                    name: self.name.clone(),
                    line: 0,
                    message: format!("template: multiple definition of template {:?}", tree.name),
                });
            }
            return Ok(());
        }
        self.trees.push(tree);
        Ok(())
    }

    fn enter(&mut self, t: &Token) -> Result<(), ParseFailure> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return self.fail(
                t,
                format!("template nesting deeper than {MAX_NESTING} levels"),
            );
        }
        Ok(())
    }

    /// `{{define "name"}} ... {{end}}` (the `define` keyword is consumed).
    fn definition(&mut self) -> Result<(), ParseFailure> {
        let t = self.next_non_space();
        let name = match t.tok {
            Tok::Str(s) => s,
            _ => {
                return self.fail(
                    &t,
                    format!("unexpected {} in define clause", describe(&t.tok)),
                );
            }
        };
        let t = self.next_non_space();
        if t.tok != Tok::Right {
            return self.fail(
                &t,
                format!("unexpected {} in define clause", describe(&t.tok)),
            );
        }
        let saved_vars = std::mem::replace(&mut self.vars, vec!["$".to_string()]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        let (list, end) = self.item_list()?;
        self.vars = saved_vars;
        self.range_depth = saved_range;
        if let Item::Else(t) = end {
            return self.fail(&t, "unexpected <else>");
        }
        self.add(Tree { name, list })
    }

    /// Nodes until `{{end}}` or `{{else}}`.
    fn item_list(&mut self) -> Result<(Vec<Node>, Item), ParseFailure> {
        let mut list = Vec::new();
        loop {
            if self.peek().tok == Tok::Left && self.peek_keyword_after_left() == Some("define") {
                let t = self.peek().clone();
                return self.fail(&t, "unexpected <define> in command");
            }
            if self.peek().tok == Tok::Eof {
                let t = self.peek().clone();
                return self.fail(&t, "unexpected EOF");
            }
            match self.text_or_action()? {
                Item::Node(n) => list.push(n),
                other => return Ok((list, other)),
            }
        }
    }

    fn text_or_action(&mut self) -> Result<Item, ParseFailure> {
        let t = self.next();
        match t.tok {
            Tok::Text(s) => Ok(Item::Node(Node::Text(s))),
            Tok::Left => self.action(),
            ref other => self.fail(&t, format!("unexpected {}", describe(other))),
        }
    }

    fn expect_right(&mut self, context: &str) -> Result<Token, ParseFailure> {
        let t = self.next_non_space();
        if t.tok != Tok::Right {
            return self.fail(&t, format!("unexpected {} in {context}", describe(&t.tok)));
        }
        Ok(t)
    }

    fn action(&mut self) -> Result<Item, ParseFailure> {
        let t = self.peek_non_space();
        if let Tok::Keyword(k) = t.tok {
            self.next();
            return match k {
                "block" => self.block(&t).map(Item::Node),
                "break" | "continue" => {
                    if self.range_depth == 0 {
                        return self.fail(&t, format!("{{{{{k}}}}} outside {{{{range}}}}"));
                    }
                    self.expect_right(k)?;
                    Ok(Item::Node(if k == "break" {
                        Node::Break
                    } else {
                        Node::Continue
                    }))
                }
                "else" => {
                    // `else if` / `else with` leave the keyword pending for the caller.
                    let p = self.peek_non_space();
                    if !matches!(p.tok, Tok::Keyword("if") | Tok::Keyword("with")) {
                        self.expect_right("else")?;
                    }
                    Ok(Item::Else(t))
                }
                "end" => {
                    self.expect_right("end")?;
                    Ok(Item::End(t))
                }
                "if" => self.control("if", &t).map(|c| Item::Node(Node::If(c))),
                "range" => self
                    .control("range", &t)
                    .map(|c| Item::Node(Node::Range(c))),
                "with" => self.control("with", &t).map(|c| Item::Node(Node::With(c))),
                "template" => self.template_call(&t).map(Item::Node),
                _ => self.fail(&t, format!("unexpected <{k}> in command")),
            };
        }
        let pipe = self.pipeline("command", Tok::Right)?;
        Ok(Item::Node(Node::Action(pipe)))
    }

    fn control(&mut self, context: &str, kw: &Token) -> Result<Control, ParseFailure> {
        self.enter(kw)?;
        let mark = self.vars.len();
        let pipe = self.pipeline(context, Tok::Right)?;
        if pipe.cmds.is_empty() {
            return self.fail(kw, format!("missing value for {context}"));
        }
        if context == "range" {
            self.range_depth += 1;
        }
        let (list, end) = self.item_list()?;
        if context == "range" {
            self.range_depth -= 1;
        }
        let else_list = match end {
            Item::End(_) => None,
            Item::Else(_) => {
                let p = self.peek_non_space();
                match (context, &p.tok) {
                    ("if", Tok::Keyword("if")) => {
                        self.next();
                        Some(vec![Node::If(self.control("if", &p)?)])
                    }
                    ("with", Tok::Keyword("with")) => {
                        self.next();
                        Some(vec![Node::With(self.control("with", &p)?)])
                    }
                    (_, Tok::Keyword(k @ ("if" | "with"))) => {
                        return self
                            .fail(&p, format!("unexpected <{k}> after <else> in {context}"));
                    }
                    _ => {
                        let (list, end) = self.item_list()?;
                        match end {
                            Item::End(_) => Some(list),
                            Item::Else(t) => return self.fail(&t, "expected end; found <else>"),
                            Item::Node(_) => None,
                        }
                    }
                }
            }
            Item::Node(_) => None,
        };
        self.vars.truncate(mark);
        self.depth -= 1;
        Ok(Control {
            pipe,
            list,
            else_list,
        })
    }

    fn template_call(&mut self, kw: &Token) -> Result<Node, ParseFailure> {
        let t = self.next_non_space();
        let name = match t.tok {
            Tok::Str(s) => s,
            ref other => {
                return self.fail(
                    &t,
                    format!("unexpected {} in template clause", describe(other)),
                );
            }
        };
        let pipe = if self.peek_non_space().tok == Tok::Right {
            self.next();
            None
        } else {
            Some(self.pipeline("template", Tok::Right)?)
        };
        Ok(Node::Template {
            pos: Self::pos(kw),
            name,
            pipe,
        })
    }

    /// `{{block "name" pipeline}} default {{end}}` = define + template call.
    fn block(&mut self, kw: &Token) -> Result<Node, ParseFailure> {
        let t = self.next_non_space();
        let name = match t.tok {
            Tok::Str(s) => s,
            ref other => {
                return self.fail(
                    &t,
                    format!("unexpected {} in block clause", describe(other)),
                );
            }
        };
        let pipe = if self.peek_non_space().tok == Tok::Right {
            self.next();
            None
        } else {
            Some(self.pipeline("block", Tok::Right)?)
        };
        self.enter(kw)?;
        let saved_vars = std::mem::replace(&mut self.vars, vec!["$".to_string()]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        let (list, end) = self.item_list()?;
        self.vars = saved_vars;
        self.range_depth = saved_range;
        self.depth -= 1;
        if let Item::Else(t) = end {
            return self.fail(&t, "unexpected <else> in block clause");
        }
        self.add(Tree {
            name: name.clone(),
            list,
        })?;
        Ok(Node::Template {
            pos: Self::pos(kw),
            name,
            pipe,
        })
    }

    fn pipeline(&mut self, context: &str, end: Tok) -> Result<Pipe, ParseFailure> {
        let first = self.peek_non_space();
        let mut decl = Vec::new();
        let mut is_assign = false;
        // Declarations: `$x :=`, `$x =`, `$i, $v :=` (range only).
        if let Tok::Var(_) = first.tok {
            let save = self.i;
            let mut names = Vec::new();
            loop {
                let v = self.next_non_space();
                let Tok::Var(name) = v.tok.clone() else {
                    self.i = save;
                    names.clear();
                    break;
                };
                names.push((name, v.clone()));
                let sep = self.peek_non_space();
                match sep.tok {
                    Tok::Declare | Tok::Assign => {
                        self.next();
                        is_assign = sep.tok == Tok::Assign;
                        break;
                    }
                    Tok::Comma if context == "range" && names.len() < 2 => {
                        self.next();
                    }
                    Tok::Comma => {
                        let msg = if context == "range" {
                            "too many declarations in range".to_string()
                        } else {
                            format!("unexpected \",\" in {context}")
                        };
                        return self.fail(&sep, msg);
                    }
                    _ => {
                        if names.len() > 1 {
                            return self.fail(
                                &sep,
                                format!("expected := or = after {} variables", names.len()),
                            );
                        }
                        self.i = save;
                        names.clear();
                        break;
                    }
                }
            }
            // Go checks declarations only: assigning an unknown variable fails when executed.
            decl.extend(names.into_iter().map(|(name, _)| name));
        }
        let mut cmds = Vec::new();
        loop {
            let t = self.peek_non_space();
            if t.tok == end {
                self.next();
                if cmds.is_empty() && !decl.is_empty() {
                    return self.fail(&t, format!("missing value for {context}"));
                }
                if cmds.is_empty() && context == "command" {
                    return self.fail(&t, "missing value for command");
                }
                break;
            }
            match t.tok {
                Tok::Eof | Tok::Right | Tok::RParen => {
                    return self.fail(&t, format!("unexpected {} in {context}", describe(&t.tok)));
                }
                _ => {}
            }
            // Go accepts a trailing `|` (`{{.a | }}`), so this does too.
            cmds.push(self.command(&end)?);
        }
        // Stages after the first receive the previous value: literals cannot take it.
        for (i, c) in cmds.iter().enumerate().skip(1) {
            if let Some(a) = c.args.first() {
                if matches!(
                    a,
                    Arg::Bool(_) | Arg::Dot | Arg::Nil | Arg::Int(_) | Arg::Float(_) | Arg::Str(_)
                ) {
                    return Err(ParseFailure {
                        name: self.name.clone(),
                        line: c.pos.line,
                        message: format!("non executable command in pipeline stage {}", i + 1),
                    });
                }
            }
        }
        // Declared (and, as in Go, assigned) names are visible after their pipeline, so
        // `$x := $x` with a new `$x` is rejected.
        for d in &decl {
            self.vars.push(d.clone());
        }
        Ok(Pipe {
            decl,
            is_assign,
            cmds,
        })
    }

    fn command(&mut self, end: &Tok) -> Result<Cmd, ParseFailure> {
        let start = self.peek_non_space();
        let mut args = Vec::new();
        let end_off;
        loop {
            self.skip_space();
            let t = self.peek().clone();
            if t.tok == *end || t.tok == Tok::Pipe {
                end_off = t.offset;
                if t.tok == Tok::Pipe {
                    self.next();
                }
                break;
            }
            match t.tok {
                Tok::Right | Tok::RParen | Tok::Eof => {
                    return self.fail(&t, format!("unexpected {} in operand", describe(&t.tok)));
                }
                _ => {}
            }
            if !args.is_empty() && self.toks[self.i - 1].tok != Tok::Space {
                return self.fail(
                    &t,
                    format!("missing space? unexpected {} in command", describe(&t.tok)),
                );
            }
            args.push(self.operand()?);
        }
        if args.is_empty() {
            return self.fail(&start, "missing value for command");
        }
        let src = self
            .src
            .get(start.offset..end_off)
            .unwrap_or("")
            .trim_end()
            .to_string();
        Ok(Cmd {
            pos: Self::pos(&start),
            src,
            args,
        })
    }

    fn operand(&mut self) -> Result<Arg, ParseFailure> {
        let t = self.next();
        let term = match t.tok {
            Tok::Ident(ref name) => {
                if !(self.is_func)(name) {
                    return self.fail(&t, format!("function {name:?} not defined"));
                }
                Arg::Ident(name.clone())
            }
            Tok::Dot => Arg::Dot,
            Tok::Nil => Arg::Nil,
            Tok::Bool(b) => Arg::Bool(b),
            Tok::Str(ref s) => Arg::Str(s.clone()),
            Tok::Char(c) => Arg::Int(c),
            Tok::Number(ref n) => self.number(&t, n)?,
            Tok::Field(ref f) => {
                let mut names = vec![f.clone()];
                self.fields(&mut names);
                return Ok(Arg::Field(names));
            }
            Tok::Var(ref v) => {
                if !self.vars.contains(v) {
                    return self.fail(&t, format!("undefined variable {v:?}"));
                }
                let mut names = Vec::new();
                self.fields(&mut names);
                return Ok(Arg::Var(v.clone(), names));
            }
            Tok::LParen => {
                self.enter(&t)?;
                let p = self.pipeline("parenthesized pipeline", Tok::RParen)?;
                self.depth -= 1;
                let mut names = Vec::new();
                self.fields(&mut names);
                return Ok(Arg::Chain(Box::new(p), names));
            }
            ref other => {
                return self.fail(&t, format!("unexpected {} in operand", describe(other)));
            }
        };
        if let Tok::Field(_) = self.peek().tok {
            return self.fail(
                &t,
                format!(
                    "unexpected . after term {:?}",
                    self.src.get(t.offset..self.peek().offset).unwrap_or("")
                ),
            );
        }
        Ok(term)
    }

    fn fields(&mut self, names: &mut Vec<String>) {
        while let Tok::Field(f) = &self.peek().tok {
            names.push(f.clone());
            self.next();
        }
    }

    fn number(&self, t: &Token, text: &str) -> Result<Arg, ParseFailure> {
        let bad = || self.fail_at(t, format!("bad number syntax: {text:?}"));
        let clean: String = text.chars().filter(|c| *c != '_').collect();
        if clean.contains("__") || text.ends_with('_') {
            return Err(bad());
        }
        let (neg, body) = match clean.strip_prefix('-') {
            Some(b) => (true, b.to_string()),
            None => (false, clean.strip_prefix('+').unwrap_or(&clean).to_string()),
        };
        let lower = body.to_ascii_lowercase();
        let int = if let Some(h) = lower.strip_prefix("0x") {
            if h.contains('p') || h.contains('.') {
                None
            } else {
                Some(i64::from_str_radix(h, 16))
            }
        } else if let Some(o) = lower.strip_prefix("0o") {
            Some(i64::from_str_radix(o, 8))
        } else if let Some(b) = lower.strip_prefix("0b") {
            Some(i64::from_str_radix(b, 2))
        } else if lower.contains(['.', 'e']) {
            None
        } else if lower.len() > 1 && lower.starts_with('0') {
            Some(i64::from_str_radix(&lower[1..], 8))
        } else {
            Some(lower.parse::<i64>())
        };
        match int {
            Some(Ok(v)) => Ok(Arg::Int(if neg { -v } else { v })),
            Some(Err(e)) => {
                if matches!(
                    e.kind(),
                    std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow
                ) {
                    // Go: an integer constant that does not fit is still a float constant,
                    // but executing it as an int fails; keep it as a float like Go's parser.
                    return lower
                        .parse::<f64>()
                        .map(|f| Arg::Float(if neg { -f } else { f }))
                        .map_err(|_| bad());
                }
                Err(bad())
            }
            None => {
                if let Some(hex) = lower.strip_prefix("0x") {
                    return parse_hex_float(hex)
                        .map(|f| Arg::Float(if neg { -f } else { f }))
                        .ok_or_else(bad);
                }
                lower
                    .parse::<f64>()
                    .map(|f| Arg::Float(if neg { -f } else { f }))
                    .map_err(|_| bad())
            }
        }
    }
}

fn parse_hex_float(s: &str) -> Option<f64> {
    let (mant, exp) = s.split_once('p')?;
    let exp: i32 = exp.parse().ok()?;
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let mut v = 0f64;
    for c in int.chars() {
        v = v * 16.0 + c.to_digit(16)? as f64;
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars() {
        v += c.to_digit(16)? as f64 * scale;
        scale /= 16.0;
    }
    Some(v * 2f64.powi(exp))
}
