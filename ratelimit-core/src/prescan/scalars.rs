//! The scanner's scalars: plain, quoted, tagged and block scalars, which the prescan
//! skips over without building them.

use super::{Scanner, is_alpha};

impl Scanner<'_> {
    pub(super) fn plain_start(&self) -> bool {
        let c = self.at(0);
        let indicator = self.is_blankz(0)
            || matches!(
                c,
                b'-' | b'?'
                    | b':'
                    | b','
                    | b'['
                    | b']'
                    | b'{'
                    | b'}'
                    | b'#'
                    | b'&'
                    | b'*'
                    | b'!'
                    | b'|'
                    | b'>'
                    | b'\''
                    | b'"'
                    | b'%'
                    | b'@'
                    | b'`'
            );
        !indicator
            || (c == b'-' && !self.is_blank(1))
            || (self.flow == 0 && matches!(c, b'?' | b':') && !self.is_blankz(1))
    }

    /// A tag: `!<uri>`, or a handle and a suffix, then a blank (or `,` in a flow).
    pub(super) fn tag(&mut self) -> bool {
        let uri = |c: u8, verbatim: bool| {
            is_alpha(c)
                || b";/?:@&=+$.%!~*'()".contains(&c)
                || (verbatim && matches!(c, b',' | b'[' | b']'))
        };
        self.bump();
        if self.at(0) == b'<' {
            self.bump();
            while uri(self.at(0), true) {
                self.bump();
            }
            if self.at(0) != b'>' {
                return self.tolerant;
            }
            self.bump();
        } else {
            // YAML 1.2 tags also take `#`.
            while uri(self.at(0), false) || (self.tolerant && self.at(0) == b'#') {
                self.bump();
            }
        }
        self.is_blankz(0) || (self.flow > 0 && self.at(0) == b',') || self.tolerant
    }

    /// A single- or double-quoted scalar, which may span lines.
    pub(super) fn quoted(&mut self, double: bool) -> bool {
        self.bump();
        loop {
            if self.eof() {
                return false;
            }
            if self.is_break(0) {
                self.bump_break();
                continue;
            }
            match self.at(0) {
                b'\'' if !double => {
                    self.bump();
                    if self.at(0) != b'\'' {
                        return true;
                    }
                    self.bump();
                }
                b'"' if double => {
                    self.bump();
                    return true;
                }
                b'\\' if double => {
                    self.bump();
                    if self.is_break(0) {
                        self.bump_break();
                    } else if !self.eof() {
                        self.bump();
                    }
                }
                _ => self.bump(),
            }
        }
    }

    /// libyaml's `scan_plain_scalar`; returns whether it ended after a line break (which
    /// allows a simple key next), `None` where libyaml stops with an error.
    pub(super) fn plain(&mut self) -> Option<bool> {
        let indent = self.indent() + 1;
        let mut leading_blanks = false;
        loop {
            if self.document_marker() || self.at(0) == b'#' {
                break;
            }
            while !self.is_blankz(0) {
                let c = self.at(0);
                if self.flow > 0
                    && c == b':'
                    && matches!(self.at(1), b',' | b'?' | b'[' | b']' | b'{' | b'}')
                    && !self.tolerant
                {
                    return None;
                }
                if (c == b':' && self.is_blankz(1))
                    || (self.flow > 0 && matches!(c, b',' | b'[' | b']' | b'{' | b'}'))
                {
                    break;
                }
                self.bump();
            }
            if !(self.is_blank(0) || self.is_break(0)) {
                break;
            }
            while self.is_blank(0) || self.is_break(0) {
                if self.is_blank(0) {
                    if leading_blanks
                        && (self.col as isize) < indent
                        && self.at(0) == b'\t'
                        && !self.tolerant
                    {
                        return None;
                    }
                    self.bump();
                } else {
                    self.bump_break();
                    leading_blanks = true;
                }
            }
            if self.flow == 0 && (self.col as isize) < indent {
                break;
            }
        }
        Some(leading_blanks)
    }

    /// libyaml's `scan_block_scalar`: the header, then every line indented at least as far
    /// as the first non-empty one (or the explicit indentation).
    pub(super) fn block_scalar(&mut self) -> bool {
        self.bump();
        let mut increment = 0;
        for _ in 0..2 {
            match self.at(0) {
                b'+' | b'-' => self.bump(),
                c @ b'1'..=b'9' if increment == 0 => {
                    increment = usize::from(c - b'0');
                    self.bump();
                }
                b'0' if !self.tolerant => return false,
                b'0' => self.bump(),
                _ => {}
            }
        }
        while self.is_blank(0) {
            self.bump();
        }
        if self.at(0) == b'#' {
            while !self.eof() && !self.is_break(0) {
                self.bump();
            }
        }
        if !self.is_blankz(0) {
            if !self.tolerant {
                return false;
            }
            while !self.eof() && !self.is_break(0) {
                self.bump();
            }
        }
        if self.is_break(0) {
            self.bump_break();
        }
        let parent = self.indent();
        let mut indent = if increment == 0 {
            0
        } else if parent >= 0 {
            parent as usize + increment
        } else {
            increment
        };
        if !self.block_breaks(&mut indent) {
            return false;
        }
        while self.col == indent && !self.eof() {
            while !self.eof() && !self.is_break(0) {
                self.bump();
            }
            if self.eof() {
                break;
            }
            self.bump_break();
            if !self.block_breaks(&mut indent) {
                return false;
            }
        }
        true
    }

    /// libyaml's `scan_block_scalar_breaks`: empty lines and indentation; settles an
    /// undetermined indentation (0).
    pub(super) fn block_breaks(&mut self, indent: &mut usize) -> bool {
        let mut max_indent = 0;
        loop {
            while (*indent == 0 || self.col < *indent) && self.at(0) == b' ' {
                self.bump();
            }
            max_indent = max_indent.max(self.col);
            if (*indent == 0 || self.col < *indent) && self.at(0) == b'\t' {
                if !self.tolerant {
                    return false;
                }
                break;
            }
            if !self.is_break(0) {
                break;
            }
            self.bump_break();
        }
        if *indent == 0 {
            let parent_next = (self.indent() + 1).max(1) as usize;
            *indent = max_indent.max(parent_next);
        }
        true
    }
}
