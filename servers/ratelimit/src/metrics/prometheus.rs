//! The pull sink: statsd-style names mapped to Prometheus metrics and labels with
//! statsd_exporter's glob mapping format (the format of upstream's
//! `PROMETHEUS_MAPPER_YAML`), and upstream's default mapping built in.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Deserialize;

use super::Value;
use super::histogram::BUCKETS;

/// One mapping rule: a glob over dot-separated parts (`*` = one part, captured as `$n`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Mapping {
    /// The glob, e.g. `ratelimit.service.rate_limit.*.*.near_limit`.
    #[serde(rename = "match")]
    pub pattern: String,
    /// The metric name; may use `$n`.
    pub name: String,
    /// Label name -> value template.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct MapperFile {
    mappings: Vec<Mapping>,
}

/// Reads a mapper file's text (`mappings:` list).
pub fn parse_mapper(yaml: &str) -> Result<Vec<Mapping>, String> {
    let f: MapperFile = serde_yaml::from_str(yaml).map_err(|e| e.to_string())?;
    for m in &f.mappings {
        if !valid_metric_name(&m.name.replace('$', "x")) {
            return Err(format!(
                "mapping {:?}: invalid metric name {:?}",
                m.pattern, m.name
            ));
        }
        if let Some(label) = m.labels.keys().find(|l| !valid_label_name(l)) {
            return Err(format!(
                "mapping {:?}: invalid label name {label:?}",
                m.pattern
            ));
        }
    }
    Ok(f.mappings)
}

/// A label name of the exposition format: a metric name without colons.
fn valid_label_name(n: &str) -> bool {
    !n.contains(':') && valid_metric_name(n)
}

fn valid_metric_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars().enumerate().all(|(i, c)| {
            c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
        })
}

fn rule(stat: &str, depth: usize) -> Mapping {
    let stars = vec!["*"; depth].join(".");
    let mut labels = BTreeMap::new();
    labels.insert("domain".to_owned(), "$1".to_owned());
    for k in 1..depth {
        labels.insert(format!("key{k}"), format!("${}", k + 1));
    }
    Mapping {
        pattern: format!("ratelimit.service.rate_limit.{stars}.{stat}"),
        name: format!("ratelimit_service_rate_limit_{stat}"),
        labels,
    }
}

/// Upstream's default mapping: rule statistics with one or two key levels, errors,
/// requests, timings and config loads.
pub fn default_mappings() -> Vec<Mapping> {
    let mut out = Vec::new();
    for stat in [
        "near_limit",
        "over_limit",
        "total_hits",
        "within_limit",
        "shadow_mode",
        "over_limit_with_local_cache",
    ] {
        out.push(rule(stat, 2));
        out.push(rule(stat, 3));
    }
    let one = |pattern: &str, name: &str, label: Option<(&str, &str)>| Mapping {
        pattern: pattern.into(),
        name: name.into(),
        labels: label
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    };
    out.push(one(
        "ratelimit.service.call.should_rate_limit.*",
        "ratelimit_service_should_rate_limit_error",
        Some(("err_type", "$1")),
    ));
    out.push(one(
        "ratelimit_server.*.total_requests",
        "ratelimit_service_total_requests",
        Some(("grpc_method", "$1")),
    ));
    out.push(one(
        "ratelimit_server.*.response_time",
        "ratelimit_service_response_time_seconds",
        Some(("grpc_method", "$1")),
    ));
    out.push(one(
        "ratelimit.store.response_time",
        "ratelimit_store_response_time_seconds",
        None,
    ));
    out.push(one(
        "ratelimit.service.config_load_success",
        "ratelimit_service_config_load_success",
        None,
    ));
    out.push(one(
        "ratelimit.service.config_load_error",
        "ratelimit_service_config_load_error",
        None,
    ));
    out
}

/// Matches `name` against a glob; returns the captured parts.
fn glob(pattern: &str, name: &str) -> Option<Vec<String>> {
    let p: Vec<&str> = pattern.split('.').collect();
    let n: Vec<&str> = name.split('.').collect();
    if p.len() != n.len() {
        return None;
    }
    let mut caps = Vec::new();
    for (a, b) in p.iter().zip(&n) {
        if *a == "*" {
            caps.push((*b).to_owned());
        } else if a != b {
            return None;
        }
    }
    Some(caps)
}

fn expand(template: &str, caps: &[String]) -> String {
    let mut out = template.to_owned();
    // Highest numbers first so that $1 does not eat the start of $12.
    for (i, c) in caps.iter().enumerate().rev() {
        out = out.replace(&format!("${}", i + 1), c);
    }
    out
}

/// statsd_exporter's fallback for unmapped names: anything outside `[a-zA-Z0-9_:]` -> `_`.
/// A name must have a first character, so an empty one (a mapped name of only an empty
/// capture) becomes `_`.
fn escape_name(n: &str) -> String {
    let mut s: String = n
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn label_text(labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// Renders the text exposition format.
pub fn render(stats: &[(String, Value)], mappings: &[Mapping], timer_millis: bool) -> String {
    // name -> (type, series)
    let mut families: BTreeMap<String, (&'static str, Vec<String>)> = BTreeMap::new();
    for (stat, value) in stats {
        let (name, labels) = mappings
            .iter()
            .find_map(|m| {
                glob(&m.pattern, stat).map(|caps| {
                    let labels: BTreeMap<String, String> = m
                        .labels
                        .iter()
                        .map(|(k, v)| (k.clone(), expand(v, &caps)))
                        .collect();
                    (escape_name(&expand(&m.name, &caps)), labels)
                })
            })
            .unwrap_or_else(|| (escape_name(stat), BTreeMap::new()));
        let kind = match value {
            Value::Counter(_) => "counter",
            Value::Gauge(_) => "gauge",
            Value::Timer(_) => "histogram",
        };
        let fam = families.entry(name.clone()).or_insert((kind, Vec::new()));
        if fam.0 != kind {
            // Two statistics of different kinds mapped to one name: keep the first kind.
            continue;
        }
        match value {
            Value::Counter(v) | Value::Gauge(v) => {
                fam.1.push(format!("{name}{} {v}", label_text(&labels)))
            }
            Value::Timer(h) => {
                let scale = if timer_millis { 1000.0 } else { 1.0 };
                let mut cumulative = 0;
                for (i, bound) in BUCKETS.iter().enumerate() {
                    cumulative += h.buckets[i];
                    let mut l = labels.clone();
                    l.insert("le".into(), format!("{}", bound * scale));
                    fam.1
                        .push(format!("{name}_bucket{} {cumulative}", label_text(&l)));
                }
                let mut l = labels.clone();
                l.insert("le".into(), "+Inf".into());
                fam.1
                    .push(format!("{name}_bucket{} {}", label_text(&l), h.count));
                fam.1.push(format!(
                    "{name}_sum{} {}",
                    label_text(&labels),
                    h.sum * scale
                ));
                fam.1
                    .push(format!("{name}_count{} {}", label_text(&labels), h.count));
            }
        }
    }
    let mut out = String::new();
    for (name, (kind, series)) in families {
        let _ = writeln!(out, "# HELP {name} ratelimit statistic {name}.");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for s in series {
            out.push_str(&s);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_mapping_gives_domain_and_key_labels() {
        let stats = vec![
            (
                "ratelimit.service.rate_limit.rl.api_key.over_limit".to_owned(),
                Value::Counter(2),
            ),
            (
                "ratelimit.service.rate_limit.rl.route.method.total_hits".to_owned(),
                Value::Counter(5),
            ),
            (
                "ratelimit.service.call.should_rate_limit.redis_error".to_owned(),
                Value::Counter(1),
            ),
            ("ratelimit.localcache.hitCount".to_owned(), Value::Gauge(3)),
        ];
        let text = render(&stats, &default_mappings(), false);
        assert!(
            text.contains(
                "ratelimit_service_rate_limit_over_limit{domain=\"rl\",key1=\"api_key\"} 2\n"
            ),
            "{text}"
        );
        assert!(text.contains("ratelimit_service_rate_limit_total_hits{domain=\"rl\",key1=\"route\",key2=\"method\"} 5\n"), "{text}");
        assert!(
            text.contains(
                "ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "# TYPE ratelimit_localcache_hitCount gauge\nratelimit_localcache_hitCount 3\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn mapper_files_are_checked() {
        let m =
            parse_mapper("mappings:\n- match: a.*.b\n  name: x_$1\n  labels: {k: $1}\n").unwrap();
        assert_eq!(m[0].labels["k"], "$1");
        assert!(parse_mapper("mappings:\n- match: a\n  name: 'bad name'\n").is_err());
        assert!(parse_mapper("nope: 1").is_err());
        for bad in ["'a b'", "'a:b'", "9a", "''"] {
            let file = format!("mappings:\n- match: a\n  name: x\n  labels: {{{bad}: v}}\n");
            let err = parse_mapper(&file).expect_err(bad);
            assert!(err.contains("invalid label name"), "{err}");
        }
        assert_eq!(escape_name(""), "_");
    }
}
