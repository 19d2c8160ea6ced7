//! What an alert adds to its message in a chat, as the original relay did: a line with the
//! alert's expression under the message (or "No alert expression"), and, when Grafana is
//! configured, an image of that expression, rendered once per alert and shared by every
//! chat.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::Value as Json;
use tokio::sync::OnceCell;

use crate::grafana::{AlertQuery, Grafana, alert_expression, alert_query};
use crate::metrics::Metrics;
use crate::settings::ChannelKind;

/// A rendered alert image, or why there is none.
pub type ImageResult = Result<(Bytes, AlertQuery), String>;

/// One alert, as every chat output sees it; images are cached per expression label.
pub struct AlertSlot {
    alert: Json,
    images: Mutex<HashMap<String, Arc<OnceCell<ImageResult>>>>,
}

impl AlertSlot {
    /// A slot for `alert` (the event's `data`).
    pub fn new(alert: Json) -> AlertSlot {
        AlertSlot {
            alert,
            images: Mutex::new(HashMap::new()),
        }
    }

    /// The line the original put under every alert message: the expression found under
    /// `expr_label`, in the chat's italics, or "No alert expression".
    pub fn query_line(&self, kind: ChannelKind, expr_label: &str) -> String {
        match alert_expression(&self.alert, expr_label) {
            // Escaped, unlike the original: a `<` in PromQL would make Telegram refuse the
            // HTML and Slack read a link.
            Ok(expr) if kind == ChannelKind::Telegram => format!("<i>{}</i>", html_escape(&expr)),
            Ok(expr) if kind == ChannelKind::Slack => format!("_{}_", html_escape(&expr)),
            Ok(expr) => format!("_{expr}_"),
            Err(why) => why,
        }
    }

    /// The Grafana image of the expression under `expr_label`, rendered on first request.
    pub async fn image(
        &self,
        expr_label: &str,
        grafana: &Grafana,
        period: u64,
        metrics: &Metrics,
    ) -> ImageResult {
        let cell = {
            let mut m = self
                .images
                .lock()
                .map_err(|_| "image cache poisoned".to_string())?;
            Arc::clone(m.entry(expr_label.to_string()).or_default())
        };
        cell.get_or_init(|| async {
            let q = alert_query(&self.alert, expr_label, period)?;
            let r = grafana.render(&q).await.map(|png| (png, q));
            let c = if r.is_ok() {
                &metrics.grafana_rendered
            } else {
                &metrics.grafana_failed
            };
            c.fetch_add(1, Ordering::Relaxed);
            r
        })
        .await
        .clone()
    }
}

/// Telegram's HTML and Slack's mrkdwn both want `&`, `<` and `>` as entities.
pub fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_line_is_in_each_chats_italics() {
        let slot = AlertSlot::new(json!({
            "labels": {"alertname": "Slow"},
            "generatorURL": "http://p/graph?g0.expr=rate%28x%5B5m%5D%29+%3E+0.5&g0.tab=1",
        }));
        let line = |k| slot.query_line(k, "g0.expr");
        assert_eq!(line(ChannelKind::Telegram), "<i>rate(x[5m]) &gt; 0.5</i>");
        assert_eq!(line(ChannelKind::Slack), "_rate(x[5m]) &gt; 0.5_");
        assert_eq!(line(ChannelKind::Workchat), "_rate(x[5m]) > 0.5_");
        assert_eq!(
            slot.query_line(ChannelKind::Telegram, "other"),
            "No alert expression"
        );
    }
}
