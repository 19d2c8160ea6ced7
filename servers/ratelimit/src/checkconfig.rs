//! `ratelimit check-config PATH...`: validates rule files offline, for CI and for editors.
//!
//! It runs the server's own loader (`ratelimit_core::parse_document` and
//! `RuleSet::compile`), so a file it accepts is a file the server accepts. The loader stops
//! at the first problem; to report every problem of a file, the checker repairs the
//! offending node in a copy of the document (drops an unknown key, gives an empty key a
//! placeholder, ...) and runs the loader again, until the document loads or nothing more
//! can be repaired. Each problem is printed as `file:line: message (at path)`; the line
//! comes from a position-aware pass over the original text that maps each node path to
//! where it is written.
//!
//! Across files it checks what the server checks when loading them together: the same
//! domain in two files (unless `--merge-domain-config`), and with merging, the same
//! descriptor twice in one domain.
//!
//! Exit status: 0 when everything is valid, 1 when there is a problem, 2 for a usage error.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ratelimit_core::{ConfigError, ConfigErrorKind, Document, RuleSet, Stats, parse_document};
use serde_yaml::Value;

const USAGE: &str = "usage: ratelimit check-config [--merge-domain-config] [--ignore-dotfiles] PATH...

Validates rate limit rule files with the server's loader and prints every problem as
`file:line: message (at path)`. A directory stands for its *.yaml and *.yml files.

  --merge-domain-config  allow one domain in several files (default: MERGE_DOMAIN_CONFIG)
  --ignore-dotfiles      skip files starting with '.' in directories (default: RUNTIME_IGNOREDOTFILES)

Exit status: 0 all valid, 1 problems found, 2 usage error.";

/// One problem, ready to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file as given (or as found in a given directory).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Upstream's message text.
    pub message: String,
    /// Path of the node in the document, empty for the whole file.
    pub path: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.file, self.message)?,
            None => write!(f, "{}: {}", self.file, self.message)?,
        }
        if !self.path.is_empty() {
            write!(f, " (at {})", self.path)?;
        }
        Ok(())
    }
}

/// Options of a check.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// `MERGE_DOMAIN_CONFIG`.
    pub merge_domains: bool,
    /// `RUNTIME_IGNOREDOTFILES`, for directories.
    pub ignore_dotfiles: bool,
}

/// The result of checking a set of files.
#[derive(Debug, Default)]
pub struct Report {
    /// Every problem, per file in the order given, by line within a file.
    pub problems: Vec<Problem>,
    /// Files checked.
    pub files: usize,
    /// Domains in the files that loaded.
    pub domains: usize,
    /// Rules in the files that loaded.
    pub rules: usize,
}

/// Entry point of the subcommand; `args` are the arguments after `check-config`.
pub fn main(args: &[String]) -> ExitCode {
    let mut opts = Options {
        merge_domains: env_bool("MERGE_DOMAIN_CONFIG"),
        ignore_dotfiles: env_bool("RUNTIME_IGNOREDOTFILES"),
    };
    let mut paths = Vec::new();
    let mut only_paths = false;
    for a in args {
        match a.as_str() {
            _ if only_paths => paths.push(PathBuf::from(a)),
            "--" => only_paths = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "--merge-domain-config" => opts.merge_domains = true,
            "--ignore-dotfiles" => opts.ignore_dotfiles = true,
            s if s.starts_with('-') => {
                eprintln!("ratelimit check-config: unknown option {s}\n\n{USAGE}");
                return ExitCode::from(2);
            }
            _ => paths.push(PathBuf::from(a)),
        }
    }
    if paths.is_empty() {
        eprintln!("ratelimit check-config: no file or directory given\n\n{USAGE}");
        return ExitCode::from(2);
    }
    let report = check_paths(&paths, opts);
    for p in &report.problems {
        println!("{p}");
    }
    if report.problems.is_empty() {
        println!(
            "ok: {} file(s), {} domain(s), {} rule(s)",
            report.files, report.domains, report.rules
        );
        ExitCode::SUCCESS
    } else {
        let files: std::collections::BTreeSet<&str> =
            report.problems.iter().map(|p| p.file.as_str()).collect();
        println!(
            "{} problem(s) in {} of {} file(s)",
            report.problems.len(),
            files.len(),
            report.files
        );
        ExitCode::FAILURE
    }
}

fn env_bool(name: &str) -> bool {
    matches!(
        std::env::var(name).as_deref(),
        Ok("1" | "t" | "T" | "TRUE" | "true" | "True")
    )
}

/// Checks files and directories.
pub fn check_paths(paths: &[PathBuf], opts: Options) -> Report {
    let mut report = Report::default();
    let mut files: Vec<(String, String)> = Vec::new();
    for p in paths {
        match list(p, opts.ignore_dotfiles) {
            Ok(found) => {
                for f in found {
                    let name = f.display().to_string();
                    match crate::files::read_rule_file(&f) {
                        Ok(Some(text)) => files.push((name, text)),
                        Ok(None) => report
                            .problems
                            .push(whole_file(&name, "cannot read: it no longer exists")),
                        Err(e) => report
                            .problems
                            .push(whole_file(&name, &format!("cannot read: {e}"))),
                    }
                    report.files += 1;
                }
            }
            Err(e) => report
                .problems
                .push(whole_file(&p.display().to_string(), &e)),
        }
    }
    let checked = check_texts(&files, opts.merge_domains);
    report.problems.extend(checked.problems);
    report.domains = checked.domains;
    report.rules = checked.rules;
    report
}

fn whole_file(file: &str, message: &str) -> Problem {
    Problem {
        file: file.to_owned(),
        line: None,
        message: message.to_owned(),
        path: String::new(),
    }
}

/// A file is itself; a directory is its `*.yaml` / `*.yml` entries that are not
/// directories, sorted, as the server reads it.
fn list(p: &Path, ignore_dotfiles: bool) -> Result<Vec<PathBuf>, String> {
    let meta = match std::fs::metadata(p) {
        Ok(m) => m,
        // A symlink that leads nowhere: reading it says why.
        Err(_) if std::fs::symlink_metadata(p).is_ok() => return Ok(vec![p.to_owned()]),
        Err(e) => return Err(format!("cannot read: {e}")),
    };
    if !meta.is_dir() {
        return Ok(vec![p.to_owned()]);
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(p).map_err(|e| format!("cannot list: {e}"))? {
        let entry = entry.map_err(|e| format!("cannot list: {e}"))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // What cannot be read as a file (a dangling symlink, a FIFO) is reported when read.
        if crate::files::is_rule_file_name(&name, ignore_dotfiles) && !entry.path().is_dir() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// Checks `(name, text)` documents: each on its own, then together.
pub fn check_texts(files: &[(String, String)], merge_domains: bool) -> Report {
    let mut report = Report::default();
    let mut positions: HashMap<&str, Positions> = HashMap::new();
    let mut docs: Vec<Document> = Vec::new();
    for (name, text) in files {
        report.files += 1;
        let pos = if saphyr_can_scan(text) {
            Positions::scan(text)
        } else {
            Positions::default()
        };
        let (doc, errors) = check_document(name, text);
        let mut problems: Vec<Problem> = errors.iter().map(|e| pos.problem(e)).collect();
        problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
        report.problems.extend(problems);
        positions.insert(name.as_str(), pos);
        if let Some(d) = doc {
            docs.push(d);
        }
    }
    // Together: a document the server would refuse next to the others is reported and
    // left out, so that the rest are still checked against each other.
    let stats = Stats::default();
    for _ in 0..=docs.len() {
        match RuleSet::compile(&docs, merge_domains, &stats) {
            Ok(set) => {
                report.domains = set.domain_count();
                report.rules = set.rules().len();
                break;
            }
            Err(e) => {
                let problem = match positions.get(e.file.as_str()) {
                    Some(pos) => pos.problem(&e),
                    None => whole_file(&e.file, &e.message),
                };
                report.problems.push(problem);
                docs.retain(|d| d.name != e.file);
            }
        }
    }
    report
}

/// Every problem of one document, in the loader's order, and the document if it has none.
pub fn check_document(name: &str, text: &str) -> (Option<Document>, Vec<ConfigError>) {
    let stats = Stats::default();
    let load = |text: &str| {
        parse_document(name, text).and_then(|doc| {
            RuleSet::compile(std::slice::from_ref(&doc), false, &stats).map(|_| doc)
        })
    };
    let first = match load(text) {
        Ok(doc) => return (Some(doc), Vec::new()),
        Err(e) => e,
    };
    // Refused unparsed: parsing it is what the bound prevents.
    if first.kind == ConfigErrorKind::Limits {
        return (None, vec![first]);
    }
    // Syntax errors leave nothing to repair.
    let Ok(mut value) = serde_yaml::from_str::<Value>(text) else {
        return (None, vec![first]);
    };
    let mut errors = vec![first];
    let mut repair = Repair::default();
    // Each round repairs one node; the bound only guards against a repair that fails to
    // make progress in a way the equality check below misses.
    for _ in 0..1000 {
        let last = errors.last().cloned().expect("at least one error");
        let before = value.clone();
        if !repair.apply(&mut value, &last) || value == before {
            break;
        }
        let Ok(text) = serde_yaml::to_string(&value) else {
            break;
        };
        match load(&text) {
            Ok(_) => break,
            Err(mut e) => {
                // Positions of the repaired text mean nothing for the original.
                e.line = None;
                if errors.contains(&e) {
                    break;
                }
                errors.push(e);
            }
        }
    }
    (None, errors)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn parse_path(path: &str) -> Vec<Seg> {
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

fn node_mut<'a>(root: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
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

fn mapping_at<'a>(root: &'a mut Value, path: &[Seg]) -> Option<&'a mut serde_yaml::Mapping> {
    match node_mut(root, path)? {
        Value::Mapping(m) => Some(m),
        _ => None,
    }
}

/// Makes the node an error points at acceptable to the loader, without moving any other
/// node (list elements are replaced, never removed, so later paths stay right).
#[derive(Default)]
struct Repair {
    placeholders: usize,
}

impl Repair {
    fn placeholder(&mut self) -> Value {
        self.placeholders += 1;
        Value::String(format!("check-config-placeholder-{}", self.placeholders))
    }

    fn apply(&mut self, root: &mut Value, e: &ConfigError) -> bool {
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
            ConfigErrorKind::EmptyReplaces | ConfigErrorKind::ReplacesSelf => {
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
fn quoted(msg: &str) -> Option<String> {
    let start = msg.find('\'')? + 1;
    let len = msg[start..].find('\'')?;
    Some(msg[start..start + len].to_owned())
}

/// Whether `text` is within the loader's bounds as `saphyr-parser` reads it, which like
/// libyaml takes time quadratic in the nesting depth. The pre-scan follows libyaml;
/// saphyr reads on past some of libyaml's syntax errors and, following YAML 1.2, does not
/// break lines at NEL, LS and PS, so the text is checked tolerantly, and once more with
/// those as ordinary characters when it has any.
fn saphyr_can_scan(text: &str) -> bool {
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

    fn problem(&self, e: &ConfigError) -> Problem {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(text: &str) -> Vec<String> {
        let r = check_texts(&[("f.yaml".to_owned(), text.to_owned())], false);
        r.problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn positions_follow_block_and_flow_styles() {
        let text = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: b\n    descriptors:\n      - key: c\n        rate_limit:\n          unit: minute\n";
        let p = Positions::scan(text);
        assert_eq!(p.line("domain"), Some(1));
        assert_eq!(p.line("descriptors[0]"), Some(3));
        assert_eq!(p.line("descriptors[0].rate_limit.unit"), Some(4));
        assert_eq!(p.line("descriptors[1].descriptors[0].rate_limit"), Some(8));
        assert_eq!(
            p.line("descriptors[1].descriptors[0].rate_limit.unit"),
            Some(9)
        );
        // Not written: the nearest ancestor.
        assert_eq!(p.line("descriptors[1].descriptors[0].value"), Some(7));
    }

    #[test]
    fn every_problem_of_a_file_is_reported_with_its_line() {
        let text = "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimied: true\n      unit: second\n  - key: b\n    rate_limit: {unit: fortnight}\n  - value: x\n  - key: b\n    ratelimit: {}\n";
        assert_eq!(
            lines_of(text),
            [
                "f.yaml:5: config error, unknown key 'unlimied' (at descriptors[0].rate_limit)",
                "f.yaml:8: invalid rate limit unit 'fortnight' (at descriptors[1].rate_limit)",
                "f.yaml:9: descriptor has empty key (at descriptors[2])",
                "f.yaml:10: duplicate descriptor composite key 'd.b' (at descriptors[3])",
                "f.yaml:11: config error, unknown key 'ratelimit' (at descriptors[3])",
            ]
        );
    }

    #[test]
    fn syntax_errors_carry_the_parser_line() {
        let out = lines_of("domain: d\ndescriptors:\n  - key: [a\n");
        assert_eq!(out.len(), 1);
        assert!(out[0].starts_with("f.yaml:"), "{out:?}");
        assert!(out[0].contains("error loading config file"), "{out:?}");
    }

    #[test]
    fn duplicate_domains_across_files() {
        let a = "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1}}]\n";
        let b = "\ndomain: d\ndescriptors: [{key: b, rate_limit: {unit: second, requests_per_unit: 1}}]\n";
        let files = [
            ("a.yaml".to_owned(), a.to_owned()),
            ("b.yaml".to_owned(), b.to_owned()),
        ];
        let r = check_texts(&files, false);
        let out: Vec<String> = r.problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            out,
            ["b.yaml:2: duplicate domain 'd' in config file (at domain)"]
        );
        let r = check_texts(&files, true);
        assert!(r.problems.is_empty());
        assert_eq!((r.domains, r.rules), (1, 2));
    }

    #[test]
    fn nesting_past_the_bound_is_refused_unparsed() {
        let deep = format!(
            "domain: d\ndescriptors: {}{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(
            lines_of(&deep),
            [
                "f.yaml:2: error loading config file: collections nested more than 64 levels deep (line 2)"
            ]
        );
        // Deep only where saphyr reads NEL as an ordinary character: line numbers are
        // skipped, the loader (libyaml) still decides.
        let text = format!("a: b\u{85}\"\nc: {} \"\n", "[".repeat(100));
        assert!(ratelimit_core::prescan::check(&text, &ratelimit_core::Limits::DEFAULT).is_ok());
        assert!(!saphyr_can_scan(&text));
        assert!(saphyr_can_scan("domain: d\n# \u{85}\n"));
        // libyaml stops at the tab; saphyr reads on.
        let text = format!("\t{}", "[".repeat(100));
        assert!(ratelimit_core::prescan::check(&text, &ratelimit_core::Limits::DEFAULT).is_ok());
        assert!(!saphyr_can_scan(&text));
    }

    #[test]
    fn paths_parse() {
        assert_eq!(
            parse_path("descriptors[1].rate_limit.replaces[0]"),
            [
                Seg::Key("descriptors".into()),
                Seg::Index(1),
                Seg::Key("rate_limit".into()),
                Seg::Key("replaces".into()),
                Seg::Index(0)
            ]
        );
    }
}
