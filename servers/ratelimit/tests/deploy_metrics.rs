//! The Grafana dashboard and the alerting rules of `deploy/monitoring/` name only metrics
//! the server exports: every metric name in their queries is looked up in a scrape of a
//! running server (Redis store, Prometheus sink, the rules of the Kubernetes ConfigMap).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use test_support::stores::redis;

use crate::common::{post_json, request, start};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// PromQL words that are not metric names.
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
];

/// Words followed by a label list rather than an expression.
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The part of `text` after the bracketed group that opens at its start (`(`, `{`, `[`),
/// quotes respected.
fn skip_group(text: &str) -> &str {
    let mut depth = 0;
    let mut quote = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'' | '`') => quote = Some(c),
            (None, '(' | '{' | '[') => depth += 1,
            (None, ')' | '}' | ']') => {
                depth -= 1;
                if depth == 0 {
                    return &text[i + 1..];
                }
            }
            _ => {}
        }
    }
    ""
}

/// The metric names a PromQL expression selects: identifiers that are not functions or
/// aggregations (followed by `(` or by a grouping), keywords, label names (inside `{...}` or a grouping list), strings,
/// durations or numbers.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = expr;
    while let Some(c) = rest.chars().next() {
        if c == '{' || c == '[' {
            rest = skip_group(rest);
        } else if c == '"' || c == '\'' || c == '`' {
            rest = rest[1..].find(c).map_or("", |end| &rest[end + 2..]);
        } else if c.is_ascii_digit() || c == '.' {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
                .unwrap_or(rest.len());
            rest = &rest[end..];
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let word = &rest[..end];
            let after = rest[end..].trim_start();
            if GROUPING.contains(&word) && after.starts_with('(') {
                rest = skip_group(after);
            } else {
                // A function call, or an aggregation with its grouping first (`sum by (a) (x)`).
                let call = after.starts_with('(')
                    || ["by", "without"].iter().any(|g| {
                        after
                            .strip_prefix(g)
                            .is_some_and(|a| a.trim_start().starts_with('('))
                    });
                if !call && !KEYWORDS.contains(&word.to_lowercase().as_str()) {
                    names.insert(word.to_owned());
                }
                rest = &rest[end..];
            }
        } else {
            rest = &rest[c.len_utf8()..];
        }
    }
    names
}

/// Grafana's `label_values(selector, label)`: the selector's metric names.
fn template_names(query: &str) -> BTreeSet<String> {
    let inner = query
        .trim()
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
        .unwrap_or_else(|| panic!("template query {query:?} is not label_values(...)"));
    let selector = inner.rsplit_once(',').map_or(inner, |(s, _)| s);
    metric_names(selector)
}

/// Every `expr` and templating query of the dashboard, with where it is.
fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<(String, BTreeSet<String>)> {
    let mut out = Vec::new();
    let panels = dashboard["panels"].as_array().expect("panels");
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or("?");
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("every target has an expr");
            out.push((format!("panel {title:?}: {expr}"), metric_names(expr)));
        }
    }
    for var in dashboard["templating"]["list"].as_array().unwrap() {
        if var["type"] == "query" {
            let q = var["query"]["query"].as_str().unwrap();
            out.push((format!("variable {}: {q}", var["name"]), template_names(q)));
        }
    }
    out
}

fn alert_queries(rules: &serde_yaml::Value) -> Vec<(String, BTreeSet<String>)> {
    let mut out = Vec::new();
    for group in rules["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let name = rule["alert"].as_str().or(rule["record"].as_str()).unwrap();
            let expr = rule["expr"].as_str().expect("expr");
            out.push((format!("alert {name}: {expr}"), metric_names(expr)));
        }
    }
    out
}

/// The names of the samples in a text exposition (`name{labels} value` lines).
fn exported(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// The rules of `deploy/kubernetes/rules-configmap.yaml`, as files.
fn configmap_rules() -> Vec<(String, String)> {
    let path = repo_root().join("deploy/kubernetes/rules-configmap.yaml");
    let cm: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    cm["data"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().unwrap().to_owned(),
                v.as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn promql_names_are_told_from_functions_labels_and_keywords() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (instance, le) (rate(a_bucket{x=~"b|c", y="by (z)"}[5m]))) / on (instance) group_left b_total offset 5m > bool 1e3 and up and topk without(q) (3, sum(c))"#,
    );
    let want = ["a_bucket", "b_total", "up", "c"].map(String::from);
    assert_eq!(names, BTreeSet::from(want));
    let grafana = metric_names(r#"sum(rate(c{instance=~"$instance"}[$__rate_interval]))"#);
    assert_eq!(grafana, BTreeSet::from(["c".to_owned()]));
    let vars = template_names("label_values(d{job=\"x\"}, domain)");
    assert_eq!(vars, BTreeSet::from(["d".to_owned()]));
}

#[test]
fn dashboard_and_alerts_use_only_exported_metrics() {
    let store = redis();
    let rules = configmap_rules();
    let rules: Vec<(&str, &str)> = rules
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let url = format!("127.0.0.1:{}", store.port);
    let srv = start(
        &rules,
        &[
            ("BACKEND_TYPE", "redis"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", &url),
            ("USE_PROMETHEUS", "true"),
            ("PROMETHEUS_ADDR", "127.0.0.1:0"),
        ],
    );
    let metrics = crate::common::prometheus_addr(&srv);
    // One decision on each face: the gRPC service's counters exist once it has served.
    let decision = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"api_key","value":"m"}]}]}"#;
    assert_eq!(post_json(srv.http, decision).status, 200);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ch = crate::grpc_face::channel(&srv.grpc).await;
        crate::grpc_face::call(&ch, &crate::grpc_face::req("rl", &[("api_key", "g")]))
            .await
            .unwrap();
    });
    let scrape = request(metrics, "GET", "/metrics", b"");
    assert_eq!(scrape.status, 200);
    // Both decisions' Redis calls were timed.
    let store_calls: u64 = scrape
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("ratelimit_store_response_time_seconds_count "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no store timer in {}", scrape.text()));
    assert_eq!(store_calls, 2);
    let mut known = exported(&scrape.text());
    // Prometheus itself adds `up` to every target it scrapes.
    known.insert("up".to_owned());

    let dashboard_path = repo_root().join("deploy/monitoring/grafana-dashboard.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dashboard_path).unwrap()).unwrap();
    let alerts_path = repo_root().join("deploy/monitoring/alerts.yaml");
    let alerts: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(alerts_path).unwrap()).unwrap();
    let queries = [dashboard_queries(&dashboard), alert_queries(&alerts)].concat();

    let mut used = BTreeSet::new();
    for (what, names) in &queries {
        assert!(!names.is_empty(), "{what} names no metric");
        let unknown: Vec<&String> = names.difference(&known).collect();
        assert!(
            unknown.is_empty(),
            "{what} uses {unknown:?}, which the server does not export; it exports {known:?}"
        );
        used.extend(names.iter().cloned());
    }
    // What the issue asks them to show: decisions by result, over-limit by rule, store
    // errors and latency, rule load errors, health.
    for needed in [
        "ratelimit_service_rate_limit_within_limit",
        "ratelimit_service_rate_limit_over_limit",
        "ratelimit_service_should_rate_limit_error",
        "ratelimit_service_response_time_seconds_bucket",
        "ratelimit_store_response_time_seconds_bucket",
        "ratelimit_redis_pool_cx_active",
        "ratelimit_service_config_load_error",
        "ratelimit_server_healthy",
    ] {
        assert!(used.contains(needed), "nothing shows {needed}");
    }
}
