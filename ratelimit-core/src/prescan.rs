//! Bounds on a rule document's size and nesting, checked in one linear pass before any
//! YAML parser sees the text.
//!
//! libyaml (behind `serde_yaml`) and `saphyr-parser` re-check every open flow level on
//! every token, so `[[[[...]]]]` costs time quadratic in its depth: 200 KB of brackets kept
//! a parser busy for minutes. Rule trees are a few levels deep, so a document nested deeper
//! than [`Limits::max_depth`] is refused before parsing.
//!
//! The pass follows libyaml's scanner where it decides what is a token (comments, quoted,
//! plain and block scalars, tags, anchors, flow and block indicators), so brackets inside a
//! string or a comment do not count and brackets that the parser would see always do. Where
//! the parser would stop with a syntax error, the pass stops too: the parser never reaches
//! what follows. The depth it computes is never below the depth of the parsed value: block
//! indentation levels (an indentless sequence counts one more), open flow mappings, and
//! twice the open flow sequences (an entry of one may be a single-pair mapping, `[a: b]`,
//! which only a later `:` reveals). So it may refuse a document up to twice as deep as
//! the bound, never accept a deeper one. Aliases do not add depth here: `serde_yaml` bounds
//! their expansion.

use std::fmt;

/// Size and nesting bounds for one rule document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted document, in bytes.
    pub max_bytes: usize,
    /// Deepest accepted nesting of collections (a rule tree `descriptors` level costs 2: the
    /// list and the entry's mapping).
    pub max_depth: usize,
}

impl Limits {
    /// 16 MiB and 64 levels. A 20,000-rule file is under 4 MB and a deep rule tree about
    /// 20 levels; past 64, parsing time would grow with the square of the depth.
    pub const DEFAULT: Limits = Limits {
        max_bytes: 16 << 20,
        max_depth: 64,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// How a document exceeds its [`Limits`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exceeded {
    /// Larger than `max_bytes`.
    Size {
        /// The document's length.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// Nested deeper than `max_depth`.
    Depth {
        /// The bound.
        max: usize,
        /// 1-based line where the nesting first goes past it.
        line: usize,
    },
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exceeded::Size { bytes, max } => {
                write!(
                    f,
                    "the document is {bytes} bytes, more than the {max} allowed"
                )
            }
            Exceeded::Depth { max, line } => write!(
                f,
                "collections nested more than {max} levels deep (line {line})"
            ),
        }
    }
}

/// Checks `text` against `limits` in time linear in its length.
pub fn check(text: &str, limits: &Limits) -> Result<(), Exceeded> {
    check_as(text, limits, false)
}

/// Like [`check`], but reads on past the syntax errors that stop libyaml, for a parser that
/// accepts more (`saphyr-parser` takes tab indentation, for one). It counts as libyaml would
/// have if it went on, which is a guess, but a linear one.
pub fn check_tolerant(text: &str, limits: &Limits) -> Result<(), Exceeded> {
    check_as(text, limits, true)
}

fn check_as(text: &str, limits: &Limits, tolerant: bool) -> Result<(), Exceeded> {
    if text.len() > limits.max_bytes {
        return Err(Exceeded::Size {
            bytes: text.len(),
            max: limits.max_bytes,
        });
    }
    let (_, over) = scan_as(text, limits.max_depth, tolerant);
    match over {
        Some(line) => Err(Exceeded::Depth {
            max: limits.max_depth,
            line,
        }),
        None => Ok(()),
    }
}

/// The deepest nesting of `text` as the pass counts it, stopping as soon as it goes past
/// `stop_above` (then also the 1-based line where it did).
pub fn scan(text: &str, stop_above: usize) -> (usize, Option<usize>) {
    scan_as(text, stop_above, false)
}

fn scan_as(text: &str, stop_above: usize, tolerant: bool) -> (usize, Option<usize>) {
    let mut s = Scanner {
        tolerant,
        b: text.as_bytes(),
        i: 0,
        line: 1,
        col: 0,
        flow: 0,
        flow_levels: Vec::new(),
        flow_depth: 0,
        indents: Vec::new(),
        block_depth: 0,
        key: None,
        key_flow: 0,
        key_allowed: true,
        stop_above,
        deepest: 0,
        over: None,
    };
    s.run();
    (s.deepest, s.over)
}

#[derive(Debug, Clone, Copy)]
struct Indent {
    col: usize,
    map: bool,
    /// An indentless sequence (`key:` then `- item` at the key's column) inside this mapping.
    indentless: bool,
}

/// A cursor over the text with libyaml's notion of lines and (character) columns.
struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    line: usize,
    col: usize,
    /// Open flow collections.
    flow: usize,
    /// Levels each open flow collection stands for: a sequence 2, since any entry of it
    /// may be a single-pair mapping (`[a: b]`), a mapping 1.
    flow_levels: Vec<usize>,
    flow_depth: usize,
    /// libyaml's indentation stack; it only changes outside flow collections.
    indents: Vec<Indent>,
    /// Levels the indentation stack stands for.
    block_depth: usize,
    /// Where a possible simple key (a node that `: ` may turn into a mapping key) starts,
    /// outside flow collections.
    key: Option<(usize, usize)>,
    /// The deepest flow nesting inside that key: when `: ` makes it a key, the mapping
    /// opens before it, around that nesting.
    key_flow: usize,
    key_allowed: bool,
    stop_above: usize,
    /// Read on where libyaml stops with a syntax error.
    tolerant: bool,
    deepest: usize,
    over: Option<usize>,
}

fn is_alpha(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

impl Scanner<'_> {
    fn at(&self, k: usize) -> u8 {
        self.b.get(self.i + k).copied().unwrap_or(0)
    }

    fn eof(&self) -> bool {
        self.i >= self.b.len()
    }

    /// Length of the line break at `i + k`, 0 if there is none. libyaml also breaks lines
    /// at NEL, LS and PS.
    fn break_len(&self, k: usize) -> usize {
        match (self.at(k), self.at(k + 1), self.at(k + 2)) {
            (b'\r', b'\n', _) => 2,
            (b'\r' | b'\n', _, _) => 1,
            (0xC2, 0x85, _) => 2,
            (0xE2, 0x80, 0xA8 | 0xA9) => 3,
            _ => 0,
        }
    }

    fn is_break(&self, k: usize) -> bool {
        self.break_len(k) > 0
    }

    fn is_blank(&self, k: usize) -> bool {
        matches!(self.at(k), b' ' | b'\t')
    }

    fn is_blankz(&self, k: usize) -> bool {
        self.i + k >= self.b.len() || self.is_blank(k) || self.is_break(k)
    }

    /// One character that is not a line break.
    fn bump(&mut self) {
        let c = self.b[self.i];
        let len = match c {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        self.i = (self.i + len).min(self.b.len());
        self.col += 1;
    }

    fn bump_break(&mut self) {
        self.i += self.break_len(0);
        self.line += 1;
        self.col = 0;
    }

    fn depth(&self) -> usize {
        self.flow_depth + self.block_depth
    }

    fn note_depth(&mut self) -> bool {
        self.note(self.depth())
    }

    /// Records a depth reached; false once it is past the bound.
    fn note(&mut self, d: usize) -> bool {
        if d > self.deepest {
            self.deepest = d;
        }
        if d > self.stop_above {
            self.over = Some(self.line);
            return false;
        }
        true
    }

    fn indent(&self) -> isize {
        self.indents.last().map_or(-1, |t| t.col as isize)
    }

    fn roll(&mut self, col: usize, map: bool) -> bool {
        if col as isize > self.indent() {
            self.indents.push(Indent {
                col,
                map,
                indentless: false,
            });
            self.block_depth += 1;
        } else if !map
            && let Some(top) = self.indents.last_mut()
            && top.col == col
            && top.map
            && !top.indentless
        {
            top.indentless = true;
            self.block_depth += 1;
        } else {
            return true;
        }
        self.note_depth()
    }

    fn unroll(&mut self, col: usize) {
        while let Some(top) = self.indents.last() {
            if top.col <= col {
                break;
            }
            self.block_depth -= 1 + usize::from(top.indentless);
            self.indents.pop();
        }
    }

    fn save_key(&mut self) {
        if self.flow == 0 && self.key_allowed {
            self.key = Some((self.line, self.col));
            self.key_flow = 0;
        }
    }

    fn run(&mut self) {
        loop {
            self.skip_to_token();
            if self.eof() {
                return;
            }
            if !self.token() {
                return;
            }
        }
    }

    /// libyaml's `scan_to_next_token`: blanks, comments and line breaks.
    fn skip_to_token(&mut self) {
        loop {
            if self.col == 0 && self.b[self.i..].starts_with(b"\xEF\xBB\xBF") {
                self.bump();
            }
            while self.at(0) == b' '
                || ((self.flow > 0 || !self.key_allowed) && self.at(0) == b'\t')
            {
                self.bump();
            }
            if self.at(0) == b'#' {
                while !self.eof() && !self.is_break(0) {
                    self.bump();
                }
            }
            if !self.is_break(0) {
                return;
            }
            self.bump_break();
            if self.flow == 0 {
                self.key_allowed = true;
            }
        }
    }

    fn document_marker(&self) -> bool {
        self.col == 0
            && (self.b[self.i..].starts_with(b"---") || self.b[self.i..].starts_with(b"..."))
            && self.is_blankz(3)
    }

    /// One token at the cursor; false to stop (past the bound, or where libyaml stops with
    /// a syntax error).
    fn token(&mut self) -> bool {
        let col = self.col;
        if self.flow == 0 {
            self.unroll(col);
        }
        let c = self.at(0);
        match c {
            b'%' if col == 0 => {
                // A directive line.
                self.indents.clear();
                self.block_depth = 0;
                self.key = None;
                self.key_allowed = false;
                while !self.eof() && !self.is_break(0) {
                    self.bump();
                }
            }
            _ if self.document_marker() => {
                self.indents.clear();
                self.block_depth = 0;
                self.key = None;
                self.key_allowed = false;
                self.i += 3;
                self.col += 3;
            }
            b'[' | b'{' => {
                self.save_key();
                let levels = if c == b'[' { 2 } else { 1 };
                self.flow += 1;
                self.flow_levels.push(levels);
                self.flow_depth += levels;
                self.key_flow = self.key_flow.max(self.flow_depth);
                self.key_allowed = true;
                self.bump();
                return self.note_depth();
            }
            b']' | b'}' => {
                if let Some(levels) = self.flow_levels.pop() {
                    self.flow -= 1;
                    self.flow_depth -= levels;
                } else {
                    self.key = None;
                }
                self.key_allowed = false;
                self.bump();
            }
            b',' => {
                if self.flow == 0 {
                    self.key = None;
                }
                self.key_allowed = true;
                self.bump();
            }
            b'-' if self.is_blankz(1) => {
                self.bump();
                if self.flow == 0 {
                    self.key = None;
                    self.key_allowed = true;
                    return self.roll(col, false);
                }
                self.key_allowed = true;
            }
            b'?' | b':' if self.flow > 0 || self.is_blankz(1) => {
                self.bump();
                if self.flow == 0 {
                    return match self.key.take() {
                        Some((line, key_col)) if c == b':' && line == self.line => {
                            self.key_allowed = false;
                            self.roll(key_col, true) && self.note(self.block_depth + self.key_flow)
                        }
                        _ => {
                            self.key_allowed = true;
                            self.roll(col, true)
                        }
                    };
                }
                self.key_allowed = false;
            }
            b'*' | b'&' => {
                self.save_key();
                self.bump();
                let start = self.i;
                while is_alpha(self.at(0)) {
                    self.bump();
                }
                self.key_allowed = false;
                if self.i == start
                    || !(self.is_blankz(0)
                        || matches!(
                            self.at(0),
                            b'?' | b':' | b',' | b']' | b'}' | b'%' | b'@' | b'`'
                        ))
                {
                    return self.tolerant;
                }
            }
            b'!' => {
                self.save_key();
                self.key_allowed = false;
                return self.tag();
            }
            b'|' | b'>' if self.flow == 0 => {
                self.key = None;
                self.key_allowed = true;
                return self.block_scalar();
            }
            b'\'' | b'"' => {
                self.save_key();
                self.key_allowed = false;
                return self.quoted(c == b'"');
            }
            _ if self.plain_start() => {
                self.save_key();
                match self.plain() {
                    Some(after_break) => self.key_allowed = after_break,
                    None => return false,
                }
            }
            _ if self.tolerant => self.bump(),
            _ => return false,
        }
        true
    }
}

mod scalars;
#[cfg(test)]
mod tests;
