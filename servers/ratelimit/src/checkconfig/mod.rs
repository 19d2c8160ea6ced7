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

mod positions;
mod repair;

pub use positions::Positions;
use positions::saphyr_can_scan;
use repair::Repair;

const USAGE: &str = "usage: ratelimit check-config [--merge-domain-config] [--ignore-dotfiles] PATH...

Validates rate limit rule files with the server's loader and prints every problem as
`file:line: message (at path)`. A directory stands for its *.yaml and *.yml files.

  --merge-domain-config  allow one domain in several files (default: MERGE_DOMAIN_CONFIG)
  --ignore-dotfiles      skip files starting with '.' in directories (default: RUNTIME_IGNOREDOTFILES)
  --print-rules          when valid, print the rules as the server's /rlconfig shows them

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
    /// The rules as `/rlconfig` shows them, when everything loaded.
    pub dump: String,
}

/// Entry point of the subcommand; `args` are the arguments after `check-config`.
pub fn main(args: &[String]) -> ExitCode {
    let mut opts = Options {
        merge_domains: env_bool("MERGE_DOMAIN_CONFIG"),
        ignore_dotfiles: env_bool("RUNTIME_IGNOREDOTFILES"),
    };
    let mut paths = Vec::new();
    let mut only_paths = false;
    let mut print_rules = false;
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
            "--print-rules" => print_rules = true,
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
        if print_rules {
            print!("{}", report.dump);
        }
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
    report.dump = checked.dump;
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
                report.dump = set.dump();
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

#[cfg(test)]
mod tests;
