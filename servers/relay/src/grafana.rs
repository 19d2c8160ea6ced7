//! Alert images through Grafana, the original relay's way: a throw-away dashboard with one
//! panel plotting the alert expression (threshold drawn as a red line), rendered by
//! Grafana's image renderer, then deleted.
//!
//! Differences from the original, because current Grafana needs them: the panel is a
//! `timeseries` (the legacy `graph` panel and legacy alerts are gone) with the threshold as
//! a threshold line, and the dashboard is deleted by UID (`/api/dashboards/db/<slug>` no
//! longer exists, so the original leaked a dashboard per alert).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::Method;
use serde_json::{Value as Json, json};

use crate::client::{HttpClient, query_pairs};

/// Grafana settings (`EVENTS_GRAFANA_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrafanaSettings {
    /// Base URL, e.g. `http://grafana:3000`.
    pub url: String,
    /// API key (Bearer), or `user:password` (Basic) when it has exactly one `:`.
    pub api_key: String,
    /// Organisation id.
    pub org: String,
    /// Data source name for the panel.
    pub datasource: String,
    /// Time range in minutes when the alert has no `minutes` label.
    pub period_minutes: u64,
    /// Image size.
    pub width: u32,
    /// Image size.
    pub height: u32,
    /// Whole-operation timeout.
    pub timeout: Duration,
}

/// What an alert asks to plot.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertQuery {
    /// The whole expression (`metric > 0.5`); also the image caption.
    pub expr: String,
    /// Left side of a top-level comparison, or the whole expression.
    pub metric: String,
    /// Comparison operator, when there is one.
    pub op: Option<String>,
    /// Numeric right side of the comparison.
    pub threshold: Option<f64>,
    /// `alertname` label.
    pub title: String,
    /// `unit` label (Grafana unit id), empty for none.
    pub unit: String,
    /// Time range.
    pub minutes: u64,
}

/// Splits `expr` at its top-level comparison (outside brackets and strings).
pub fn split_comparison(expr: &str) -> (String, Option<String>, Option<f64>) {
    let b = expr.as_bytes();
    let mut depth = 0i32;
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match c {
            b'"' | b'\'' | b'`' => quote = Some(c),
            b'(' | b'{' | b'[' => depth += 1,
            b')' | b'}' | b']' => depth -= 1,
            b'>' | b'<' | b'=' | b'!' if depth == 0 => {
                let two = expr.get(i..i + 2).unwrap_or("");
                let op = if [">=", "<=", "==", "!="].contains(&two) {
                    two
                } else if c == b'>' || c == b'<' {
                    &expr[i..=i]
                } else {
                    i += 1;
                    continue;
                };
                let left = expr[..i].trim().to_string();
                let right = expr[i + op.len()..].trim();
                let right = right.strip_prefix("bool ").unwrap_or(right).trim();
                return (left, Some(op.to_string()), right.parse::<f64>().ok());
            }
            _ => {}
        }
        i += 1;
    }
    (expr.trim().to_string(), None, None)
}

/// The alert's expression: label `expr_label` (default `g0.expr`) from the alert's labels
/// or its `generatorURL` query; "No alert expression" (the original's words) when blank.
pub fn alert_expression(alert: &Json, expr_label: &str) -> Result<String, String> {
    let from_label = alert
        .get("labels")
        .and_then(|l| l.get(expr_label))
        .and_then(Json::as_str)
        .map(str::to_string);
    let from_url = || {
        let url = alert.get("generatorURL").and_then(Json::as_str)?;
        query_pairs(url)
            .into_iter()
            .find(|(k, _)| k == expr_label)
            .map(|(_, v)| v)
    };
    from_label
        .or_else(from_url)
        .filter(|e| !e.trim().is_empty())
        .ok_or_else(|| "No alert expression".to_string())
}

/// What to plot for an alert: its expression (see [`alert_expression`]) split at the
/// comparison, with the title, unit and time range from its labels.
pub fn alert_query(
    alert: &Json,
    expr_label: &str,
    default_minutes: u64,
) -> Result<AlertQuery, String> {
    let expr = alert_expression(alert, expr_label)?;
    let labels = alert.get("labels").cloned().unwrap_or(Json::Null);
    let label = |k: &str| labels.get(k).and_then(Json::as_str).map(str::to_string);
    let (metric, op, threshold) = split_comparison(&expr);
    Ok(AlertQuery {
        metric,
        op,
        threshold,
        title: label("alertname").unwrap_or_default(),
        unit: label("unit").unwrap_or_default(),
        minutes: label("minutes")
            .and_then(|m| m.trim().parse().ok())
            .filter(|m| *m > 0)
            .unwrap_or(default_minutes),
        expr,
    })
}

/// Renders alert panels.
#[derive(Clone)]
pub struct Grafana {
    settings: GrafanaSettings,
    client: HttpClient,
}

fn uid_for(title: &str, now_nanos: i64) -> String {
    // FNV-1a: only needs to be unique among dashboards alive at the same moment.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in title.bytes().chain(now_nanos.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("event-relay-{h:016x}")
}

impl Grafana {
    /// A renderer using `client`.
    pub fn new(settings: GrafanaSettings, client: HttpClient) -> Grafana {
        Grafana { settings, client }
    }

    fn auth(&self) -> String {
        let key = &self.settings.api_key;
        if key.matches(':').count() == 1 {
            format!("Basic {}", STANDARD.encode(key.as_bytes()))
        } else {
            format!("Bearer {key}")
        }
    }

    /// The dashboard the panel lives on.
    pub fn dashboard(&self, q: &AlertQuery, uid: &str) -> Json {
        let mut steps = vec![json!({"color": "green", "value": null})];
        if let Some(t) = q.threshold {
            steps.push(json!({"color": "red", "value": t}));
        }
        let mut defaults = json!({
            "unit": q.unit,
            "thresholds": {"mode": "absolute", "steps": steps},
            "custom": {"thresholdsStyle": {"mode": if q.threshold.is_some() {"line"} else {"off"}}},
        });
        if let Some(t) = q.threshold {
            // The original's y-axis: threshold +-5%, so the line is always in view
            // (soft limits still let the data widen the axis).
            defaults["custom"]["axisSoftMin"] = json!(t - t.abs() * 0.05);
            defaults["custom"]["axisSoftMax"] = json!(t + t.abs() * 0.05);
        }
        json!({
            "dashboard": {
                "uid": uid,
                "title": format!("{} - {uid}", q.title),
                "tags": ["event-relay"],
                "timezone": "utc",
                "time": {"from": format!("now-{}m", q.minutes), "to": "now"},
                "panels": [{
                    "id": 1,
                    "type": "timeseries",
                    "title": q.title,
                    "datasource": self.settings.datasource,
                    "gridPos": {"h": 8, "w": 24, "x": 0, "y": 0},
                    "targets": [{"refId": "A", "expr": q.metric}],
                    "fieldConfig": {"defaults": defaults, "overrides": []},
                    "options": {"legend": {"displayMode": "table", "placement": "bottom",
                        "calcs": ["mean", "min", "max", "lastNotNull"]}},
                }],
            },
            "overwrite": false,
        })
    }

    /// Renders the panel for `q` as PNG bytes.
    pub async fn render(&self, q: &AlertQuery) -> Result<Bytes, String> {
        let timeout = self.settings.timeout;
        tokio::time::timeout(timeout, self.render_inner(q))
            .await
            .map_err(|_| format!("grafana: no image within {timeout:?}"))?
    }

    async fn render_inner(&self, q: &AlertQuery) -> Result<Bytes, String> {
        let base = self.settings.url.trim_end_matches('/');
        let now = crate::now();
        let uid = uid_for(&q.title, now.timestamp_nanos_opt().unwrap_or(0));
        let auth = self.auth();
        let t = self.settings.timeout;
        let create = self
            .client
            .send(
                Method::POST,
                &format!("{base}/api/dashboards/db"),
                &[
                    ("authorization", auth.clone()),
                    ("content-type", "application/json".into()),
                ],
                Bytes::from(self.dashboard(q, &uid).to_string()),
                t,
            )
            .await
            .map_err(|e| format!("grafana: creating the dashboard: {e}"))?;
        if !create.status.is_success() {
            return Err(format!(
                "grafana: creating the dashboard: HTTP {}",
                create.status.as_u16()
            ));
        }
        let answer = create.json();
        let uid = answer
            .get("uid")
            .and_then(Json::as_str)
            .unwrap_or(&uid)
            .to_string();
        let slug = answer
            .get("slug")
            .and_then(Json::as_str)
            .unwrap_or("event-relay")
            .to_string();
        let to = now.timestamp_millis();
        let from = to - (q.minutes as i64) * 60_000;
        let s = &self.settings;
        let render_url = format!(
            "{base}/render/d-solo/{uid}/{slug}?orgId={}&panelId=1&from={from}&to={to}&width={}&height={}&tz=utc",
            s.org, s.width, s.height
        );
        let image = self
            .client
            .send(
                Method::GET,
                &render_url,
                &[("authorization", auth.clone())],
                Bytes::new(),
                t,
            )
            .await;
        // The dashboard goes whatever the render did; a failed delete only leaves clutter.
        let _ = self
            .client
            .send(
                Method::DELETE,
                &format!("{base}/api/dashboards/uid/{uid}"),
                &[("authorization", auth)],
                Bytes::new(),
                t,
            )
            .await;
        let image = image.map_err(|e| format!("grafana: rendering: {e}"))?;
        if !image.status.is_success() {
            return Err(format!(
                "grafana: rendering: HTTP {}",
                image.status.as_u16()
            ));
        }
        if !image.body.starts_with(b"\x89PNG") {
            return Err("grafana: rendering: the answer is not a PNG image".into());
        }
        Ok(image.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_split_at_top_level() {
        assert_eq!(
            split_comparison("histogram_quantile(0.99, sum by (le) (rate(x{a=\"<\"}[5m]))) > 0.5"),
            (
                "histogram_quantile(0.99, sum by (le) (rate(x{a=\"<\"}[5m])))".to_string(),
                Some(">".to_string()),
                Some(0.5)
            )
        );
        assert_eq!(
            split_comparison("up == bool 0"),
            ("up".to_string(), Some("==".to_string()), Some(0.0))
        );
        assert_eq!(
            split_comparison("rate(x[5m])"),
            ("rate(x[5m])".to_string(), None, None)
        );
        assert_eq!(
            split_comparison("a >= b"),
            ("a".to_string(), Some(">=".to_string()), None)
        );
    }

    #[test]
    fn expression_comes_from_labels_or_generator_url() {
        let alert = json!({
            "labels": {"alertname": "High", "unit": "s", "minutes": "30"},
            "generatorURL": "http://p:9090/graph?g0.expr=up+%3E+0.5&g0.tab=1",
        });
        let q = alert_query(&alert, "g0.expr", 60).unwrap();
        assert_eq!((q.expr.as_str(), q.metric.as_str()), ("up > 0.5", "up"));
        assert_eq!(
            (q.threshold, q.minutes, q.unit.as_str()),
            (Some(0.5), 30, "s")
        );
        assert_eq!(
            alert_query(&json!({"labels": {}}), "g0.expr", 60).unwrap_err(),
            "No alert expression"
        );
    }
}
