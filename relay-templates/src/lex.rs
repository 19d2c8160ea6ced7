//! Tokenizer for Go template text. Trim markers (`{{- ` / ` -}}`) are applied here, to the
//! neighbouring text, exactly as Go's lexer does, so the parser never sees them.

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Text(String),
    Left,
    Right,
    Space,
    Ident(String),
    /// `.name` (without the dot).
    Field(String),
    /// `$name` including the `$`.
    Var(String),
    Dot,
    Str(String),
    Char(i64),
    Number(String),
    Bool(bool),
    Nil,
    Pipe,
    LParen,
    RParen,
    Declare,
    Assign,
    Comma,
    Keyword(&'static str),
    Eof,
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    pub line: usize,
    pub col: usize,
    /// Byte offset of the token in the source (used to quote the source in errors).
    pub offset: usize,
}

pub(crate) struct LexError {
    pub line: usize,
    pub message: String,
}

const KEYWORDS: &[&str] = &[
    "block", "break", "continue", "define", "else", "end", "if", "range", "template", "with",
];

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// 1-based line and 0-based byte column of `offset`.
pub(crate) fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = &src.as_bytes()[..offset];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let col = offset
        - before
            .iter()
            .rposition(|b| *b == b'\n')
            .map(|i| i + 1)
            .unwrap_or(0);
    (line, col)
}

pub(crate) fn lex(src: &str) -> Result<Vec<Token>, LexError> {
    Lexer {
        src,
        pos: 0,
        toks: Vec::new(),
        paren_depth: 0,
    }
    .run()
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    toks: Vec<Token>,
    paren_depth: usize,
}

impl<'a> Lexer<'a> {
    fn line_col(&self, offset: usize) -> (usize, usize) {
        line_col(self.src, offset)
    }

    fn push(&mut self, tok: Tok, offset: usize) {
        // Tokens arrive in source order, so lines are counted incrementally.
        let (mut line, mut line_start, from) = match self.toks.last() {
            Some(t) if t.offset <= offset => (t.line, t.offset - t.col, t.offset),
            _ => (1, 0, 0),
        };
        for (i, b) in self.src.as_bytes()[from..offset].iter().enumerate() {
            if *b == b'\n' {
                line += 1;
                line_start = from + i + 1;
            }
        }
        let col = offset - line_start;
        self.toks.push(Token {
            tok,
            line,
            col,
            offset,
        });
    }

    fn err<T>(&self, offset: usize, message: impl Into<String>) -> Result<T, LexError> {
        let (line, _) = self.line_col(offset.min(self.src.len()));
        Err(LexError {
            line,
            message: message.into(),
        })
    }

    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    fn run(mut self) -> Result<Vec<Token>, LexError> {
        let mut trim_next_text = false;
        loop {
            // Text up to the next left delimiter.
            let rest = self.rest();
            let (text_end, found) = match rest.find("{{") {
                Some(i) => (self.pos + i, true),
                None => (self.src.len(), false),
            };
            let mut text = &self.src[self.pos..text_end];
            let left_trim = found && {
                let after = &self.src[text_end + 2..];
                after.starts_with('-') && after[1..].starts_with(is_space)
            };
            if trim_next_text {
                text = text.trim_start_matches(is_space);
            }
            if left_trim {
                text = text.trim_end_matches(is_space);
            }
            if !text.is_empty() {
                self.push(Tok::Text(text.to_string()), self.pos);
            }
            if !found {
                self.push(Tok::Eof, self.src.len());
                return Ok(self.toks);
            }
            self.pos = text_end;
            let open = self.pos;
            self.pos += 2;
            if left_trim {
                self.pos += 2;
            }
            // Comment: {{/* ... */}} with optional trim markers.
            if self.rest().starts_with("/*") {
                let Some(end) = self.rest().find("*/") else {
                    return self.err(open, "unclosed comment");
                };
                self.pos += end + 2;
                let r = self.rest();
                if r.starts_with("}}") {
                    self.pos += 2;
                    trim_next_text = false;
                } else if r.len() >= 4 && r.starts_with(is_space) && r[1..].starts_with("-}}") {
                    self.pos += 4;
                    trim_next_text = true;
                } else {
                    return self.err(open, "comment ends before closing delimiter");
                }
                continue;
            }
            self.push(Tok::Left, open);
            trim_next_text = self.inside_action(open)?;
        }
    }

    /// Lexes one action; returns whether it ended with a right trim marker.
    fn inside_action(&mut self, open: usize) -> Result<bool, LexError> {
        self.paren_depth = 0;
        loop {
            let r = self.rest();
            if r.is_empty() {
                return self.err(open, "unclosed action");
            }
            if r.len() >= 4 && r.starts_with(is_space) && r[1..].starts_with("-}}") {
                if self.paren_depth > 0 {
                    return self.err(self.pos, "unclosed left paren");
                }
                self.push(Tok::Right, self.pos + 1);
                self.pos += 4;
                return Ok(true);
            }
            if r.starts_with("}}") {
                if self.paren_depth > 0 {
                    return self.err(self.pos, "unclosed left paren");
                }
                self.push(Tok::Right, self.pos);
                self.pos += 2;
                return Ok(false);
            }
            let start = self.pos;
            let c = r.chars().next().unwrap_or(' ');
            match c {
                c if is_space(c) => {
                    let n = r.len() - r.trim_start_matches(is_space).len();
                    // A space right before " -}}" belongs to the trim marker check above.
                    let n = if r[n..].starts_with("-}}") { n - 1 } else { n };
                    self.pos += n.max(1);
                    if n > 0 {
                        self.push(Tok::Space, start);
                    }
                }
                '|' => {
                    self.pos += 1;
                    self.push(Tok::Pipe, start);
                }
                ',' => {
                    self.pos += 1;
                    self.push(Tok::Comma, start);
                }
                '(' => {
                    self.pos += 1;
                    self.paren_depth += 1;
                    self.push(Tok::LParen, start);
                }
                ')' => {
                    if self.paren_depth == 0 {
                        return self.err(start, "unexpected right paren");
                    }
                    self.paren_depth -= 1;
                    self.pos += 1;
                    self.push(Tok::RParen, start);
                }
                ':' => {
                    if r.starts_with(":=") {
                        self.pos += 2;
                        self.push(Tok::Declare, start);
                    } else {
                        return self.err(start, "expected :=");
                    }
                }
                '=' => {
                    self.pos += 1;
                    self.push(Tok::Assign, start);
                }
                '"' => {
                    let s = self.quoted()?;
                    self.push(Tok::Str(s), start);
                }
                '`' => {
                    let Some(end) = r[1..].find('`') else {
                        return self.err(start, "unterminated raw quoted string");
                    };
                    let s = r[1..1 + end].replace('\r', "");
                    self.pos += end + 2;
                    self.push(Tok::Str(s), start);
                }
                '\'' => {
                    let v = self.char_const()?;
                    self.push(Tok::Char(v), start);
                }
                '$' => {
                    let n = 1 + r[1..].len() - r[1..].trim_start_matches(is_alnum).len();
                    self.pos += n;
                    self.push(Tok::Var(r[..n].to_string()), start);
                }
                '.' => {
                    let next = r[1..].chars().next();
                    if next.is_some_and(|c| c.is_ascii_digit()) {
                        self.number()?;
                    } else if next.is_some_and(is_alnum) {
                        let n = 1 + r[1..].len() - r[1..].trim_start_matches(is_alnum).len();
                        self.pos += n;
                        self.push(Tok::Field(r[1..n].to_string()), start);
                    } else {
                        self.pos += 1;
                        self.push(Tok::Dot, start);
                    }
                }
                '+' | '-' | '0'..='9' => self.number()?,
                c if is_alnum(c) => {
                    let n = r.len() - r.trim_start_matches(is_alnum).len();
                    let word = &r[..n];
                    self.pos += n;
                    let tok = match word {
                        "true" => Tok::Bool(true),
                        "false" => Tok::Bool(false),
                        "nil" => Tok::Nil,
                        w => match KEYWORDS.iter().find(|k| **k == w) {
                            Some(k) => Tok::Keyword(k),
                            None => Tok::Ident(w.to_string()),
                        },
                    };
                    self.push(tok, start);
                }
                c => return self.err(start, format!("unrecognized character in action: {c:?}")),
            }
        }
    }

    fn number(&mut self) -> Result<(), LexError> {
        let start = self.pos;
        let r = self.rest();
        let b = r.as_bytes();
        let mut i = 0;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let mut digits: &[u8] = b"0123456789_";
        let mut exp: &[u8] = b"eE";
        if i + 1 < b.len() && b[i] == b'0' {
            match b[i + 1] {
                b'x' | b'X' => {
                    i += 2;
                    digits = b"0123456789abcdefABCDEF_";
                    exp = b"pP";
                }
                b'o' | b'O' => {
                    i += 2;
                    digits = b"01234567_";
                    exp = b"";
                }
                b'b' | b'B' => {
                    i += 2;
                    digits = b"01_";
                    exp = b"";
                }
                _ => {}
            }
        }
        while i < b.len() && digits.contains(&b[i]) {
            i += 1;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            while i < b.len() && digits.contains(&b[i]) {
                i += 1;
            }
        }
        if !exp.is_empty() && i < b.len() && exp.contains(&b[i]) {
            i += 1;
            if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
                i += 1;
            }
            while i < b.len() && b[i].is_ascii_digit() || i < b.len() && b[i] == b'_' {
                i += 1;
            }
        }
        let text = &r[..i];
        if i < b.len() && (is_alnum(b[i] as char) || b[i] == b'.') {
            let end = r[i..]
                .find(|c: char| !is_alnum(c) && c != '.')
                .map(|e| i + e)
                .unwrap_or(r.len());
            return self.err(start, format!("bad number syntax: {:?}", &r[..end]));
        }
        if text == "+" || text == "-" || text.is_empty() {
            return self.err(start, format!("bad number syntax: {text:?}"));
        }
        self.pos += i;
        self.push(Tok::Number(text.to_string()), start);
        Ok(())
    }

    fn quoted(&mut self) -> Result<String, LexError> {
        let start = self.pos;
        let r = self.rest();
        let mut chars = r.char_indices().skip(1);
        let mut out = String::new();
        loop {
            let Some((i, c)) = chars.next() else {
                return self.err(start, "unterminated quoted string");
            };
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Ok(out);
                }
                '\n' => return self.err(start, "unterminated quoted string"),
                '\\' => {
                    let Some((_, e)) = chars.next() else {
                        return self.err(start, "unterminated quoted string");
                    };
                    match self.escape(e, &mut chars, '"') {
                        Some(c) => out.push(c),
                        None => {
                            return self.err(
                                start,
                                format!(
                                    "invalid syntax: {}",
                                    r.get(..i + 1 + e.len_utf8()).unwrap_or(r)
                                ),
                            );
                        }
                    }
                }
                c => out.push(c),
            }
        }
    }

    fn escape(
        &self,
        e: char,
        chars: &mut impl Iterator<Item = (usize, char)>,
        quote: char,
    ) -> Option<char> {
        let hex = |chars: &mut dyn Iterator<Item = (usize, char)>, n: usize| -> Option<u32> {
            let mut v = 0u32;
            for _ in 0..n {
                let (_, c) = chars.next()?;
                v = v * 16 + c.to_digit(16)?;
            }
            Some(v)
        };
        match e {
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            '\\' => Some('\\'),
            c if c == quote => Some(c),
            'x' => hex(chars, 2).and_then(char::from_u32),
            'u' => hex(chars, 4).and_then(char::from_u32),
            'U' => hex(chars, 8).and_then(char::from_u32),
            '0'..='7' => {
                let mut v = e.to_digit(8)?;
                for _ in 0..2 {
                    let (_, c) = chars.next()?;
                    v = v * 8 + c.to_digit(8)?;
                }
                if v > 255 { None } else { char::from_u32(v) }
            }
            _ => None,
        }
    }

    fn char_const(&mut self) -> Result<i64, LexError> {
        let start = self.pos;
        let r = self.rest();
        let mut chars = r.char_indices().skip(1);
        let c = match chars.next() {
            Some((_, '\\')) => {
                let Some((_, e)) = chars.next() else {
                    return self.err(start, "unterminated character constant");
                };
                match self.escape(e, &mut chars, '\'') {
                    Some(c) => c,
                    None => return self.err(start, "invalid syntax in character constant"),
                }
            }
            Some((_, '\'')) | Some((_, '\n')) | None => {
                return self.err(start, "unterminated character constant");
            }
            Some((_, c)) => c,
        };
        match chars.next() {
            Some((i, '\'')) => {
                self.pos += i + 1;
                Ok(c as i64)
            }
            _ => self.err(start, "unterminated character constant"),
        }
    }
}
