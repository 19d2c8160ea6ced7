//! Where each node of a rule file is written, for `file:line` in problem reports.

use std::collections::HashMap;

use ratelimit_core::{ConfigError, ConfigErrorKind};

use super::Problem;
use super::repair::quoted;

/// Whether `text` is within the loader's bounds as `saphyr-parser` reads it, which like
/// libyaml takes time quadratic in the nesting depth. The pre-scan follows libyaml;
/// saphyr reads on past some of libyaml's syntax errors and, following YAML 1.2, does not
/// break lines at NEL, LS and PS, so the text is checked tolerantly, and once more with
/// those as ordinary characters when it has any.
pub(super) fn saphyr_can_scan(text: &str) -> bool {
    const NOT_BREAKS: [char; 3] = ['\u{85}', '\u{2028}', '\u{2029}'];
    let limits = ratelimit_core::Limits::DEFAULT;
    let within = |t: &str| ratelimit_core::prescan::check_tolerant(t, &limits).is_ok();
    within(text) && (!text.contains(NOT_BREAKS) || within(&text.replace(NOT_BREAKS, "x")))
}

/// Where each node of a document is written: path (as in error messages) to 1-based line.
/// For a mapping entry the line of its key, for a list element the line it starts on.
#[derive(Debug, Default)]
pub struct Positions {
    lines: HashMap<String, usize>,
}

enum Frame {
    Map {
        path: String,
        expect_key: bool,
        key_path: Option<String>,
    },
    Seq {
        path: String,
        next: usize,
    },
}

/// A path no error message can carry, for nodes under complex (non-scalar) keys.
const NOWHERE: &str = "\u{0}";

impl Positions {
    /// Scans `text`; a syntax error ends the scan with what was found so far.
    pub fn scan(text: &str) -> Positions {
        use saphyr_parser::{Event, Parser};
        let mut lines = HashMap::new();
        let mut stack: Vec<Frame> = Vec::new();
        let mut seen_root = false;
        for item in Parser::new_from_str(text) {
            let Ok((event, span)) = item else { break };
            let line = span.start.line();
            let is_node = matches!(
                event,
                Event::Scalar(..)
                    | Event::Alias(_)
                    | Event::MappingStart(..)
                    | Event::SequenceStart(..)
            );
            if is_node {
                let node_path = match stack.last_mut() {
                    None => {
                        if seen_root {
                            // A second document: the loader rejects it anyway.
                            break;
                        }
                        seen_root = true;
                        lines.entry(String::new()).or_insert(line);
                        String::new()
                    }
                    Some(Frame::Map {
                        path,
                        expect_key,
                        key_path,
                    }) => {
                        if *expect_key {
                            *expect_key = false;
                            *key_path = match &event {
                                Event::Scalar(v, ..) if path != NOWHERE => {
                                    let p = join(path, v);
                                    lines.entry(p.clone()).or_insert(line);
                                    Some(p)
                                }
                                _ => None,
                            };
                            NOWHERE.to_owned()
                        } else {
                            *expect_key = true;
                            key_path.take().unwrap_or_else(|| NOWHERE.to_owned())
                        }
                    }
                    Some(Frame::Seq { path, next }) => {
                        let p = if path == NOWHERE {
                            NOWHERE.to_owned()
                        } else {
                            format!("{path}[{next}]")
                        };
                        *next += 1;
                        lines.entry(p.clone()).or_insert(line);
                        p
                    }
                };
                match event {
                    Event::MappingStart(..) => stack.push(Frame::Map {
                        path: node_path,
                        expect_key: true,
                        key_path: None,
                    }),
                    Event::SequenceStart(..) => stack.push(Frame::Seq {
                        path: node_path,
                        next: 0,
                    }),
                    _ => {}
                }
            } else if matches!(event, Event::MappingEnd | Event::SequenceEnd) {
                stack.pop();
            }
        }
        Positions { lines }
    }

    /// The line of `path`, or of its nearest written ancestor.
    pub fn line(&self, path: &str) -> Option<usize> {
        let mut p = path;
        loop {
            if let Some(l) = self.lines.get(p) {
                return Some(*l);
            }
            if p.is_empty() {
                return None;
            }
            p = match (p.rfind('.'), p.rfind('[')) {
                (Some(d), Some(b)) => &p[..d.max(b)],
                (Some(d), None) => &p[..d],
                (None, Some(b)) => &p[..b],
                (None, None) => "",
            };
        }
    }

    pub(super) fn problem(&self, e: &ConfigError) -> Problem {
        let line = e.line.or_else(|| match e.kind {
            // The path names the mapping; the line of the offending key is more useful.
            ConfigErrorKind::UnknownKey => quoted(&e.message)
                .and_then(|k| self.lines.get(&join(&e.path, &k)).copied())
                .or_else(|| self.line(&e.path)),
            _ => self.line(&e.path),
        });
        Problem {
            file: e.file.clone(),
            line,
            message: e.message.clone(),
            path: e.path.clone(),
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}
