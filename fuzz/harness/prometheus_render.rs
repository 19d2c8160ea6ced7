//! Any bytes as a statsd_exporter mapper file (`PROMETHEUS_MAPPER_YAML`) and statistic
//! names (which carry request values under `detailed_metric` and `value_to_metric`): the
//! file is read or refused, and whatever the names, `/metrics` is valid text exposition
//! format. Shared by the cargo-fuzz target and the stable corpus replay test
//! (`servers/ratelimit/tests/fuzz_corpus.rs`), which include this file by path.
//!
//! Input: the mapper file, a line `---`, then one statistic name per line. Without the
//! `---` line every line is a name, mapped by upstream's default mapping.

use ratelimit_server::metrics::Value;
use ratelimit_server::metrics::histogram::Histogram;
use ratelimit_server::metrics::prometheus::{default_mappings, parse_mapper, render};

/// Returns whether the input had a mapper file that was read.
pub fn run(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let (mappings, names, read) = match text.split_once("\n---\n") {
        Some((file, names)) => match parse_mapper(file) {
            Ok(m) => (m, names, true),
            Err(_) => (default_mappings(), names, false),
        },
        None => (default_mappings(), &text[..], false),
    };
    let timer = Histogram::default();
    timer.observe_nanos(1_500_000);
    let stats: Vec<(String, Value)> = names
        .lines()
        .enumerate()
        .map(|(i, name)| {
            let value = match i % 3 {
                0 => Value::Counter(i as u64),
                1 => Value::Gauge(7),
                _ => Value::Timer(timer.snapshot()),
            };
            (name.to_owned(), value)
        })
        .collect();
    let out = render(&stats, &mappings, read);
    for line in out.lines() {
        check_line(line).unwrap_or_else(|e| panic!("{e} in {line:?}\n{out}"));
    }
    read
}

fn is_name(s: &str, colons: bool) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (colons && c == ':'))
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colons && c == ':'))
}

/// One line of the text exposition format as Prometheus's parser reads it.
fn check_line(line: &str) -> Result<(), String> {
    if let Some(rest) = line.strip_prefix("# ") {
        let mut parts = rest.splitn(3, ' ');
        let (kind, name) = (parts.next(), parts.next());
        return match (kind, name) {
            (Some("HELP" | "TYPE"), Some(n)) if is_name(n, true) => Ok(()),
            _ => Err("a bad comment line".into()),
        };
    }
    let end = line.find(['{', ' ']).ok_or_else(|| "no value".to_owned())?;
    if !is_name(&line[..end], true) {
        return Err(format!("bad metric name {:?}", &line[..end]));
    }
    let mut rest = &line[end..];
    if let Some(labels) = rest.strip_prefix('{') {
        rest = labels;
        let mut seen = Vec::new();
        loop {
            let eq = rest.find('=').ok_or("a label without =")?;
            let name = &rest[..eq];
            if !is_name(name, false) {
                return Err(format!("bad label name {name:?}"));
            }
            if seen.contains(&name) {
                return Err(format!("label {name:?} twice"));
            }
            seen.push(name);
            rest = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or("an unquoted label value")?;
            // The value runs to the first quote not escaped; only \\, \" and \n escape.
            let mut chars = rest.char_indices();
            let close = loop {
                match chars.next() {
                    None => return Err("an unclosed label value".into()),
                    Some((_, '\\')) => match chars.next() {
                        Some((_, '\\' | '"' | 'n')) => {}
                        _ => return Err("a bad escape".into()),
                    },
                    Some((i, '"')) => break i,
                    Some((_, '\n')) => return Err("a raw newline".into()),
                    Some(_) => {}
                }
            };
            rest = &rest[close + 1..];
            if let Some(r) = rest.strip_prefix(',') {
                rest = r;
            } else {
                rest = rest.strip_prefix('}').ok_or("labels not closed")?;
                break;
            }
        }
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    value
        .parse::<f64>()
        .map(|_| ())
        .map_err(|_| format!("bad value {value:?}"))
}
