//! The relay's own counters in the Prometheus text exposition format (0.0.4). Hand-written:
//! a handful of counters with one fixed label does not need a metrics library.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one output.
#[derive(Debug, Default)]
pub struct OutputCounters {
    /// Messages rendered for it (one per target).
    pub rendered: AtomicU64,
    /// Messages delivered.
    pub sent: AtomicU64,
    /// Messages given up on (render error, refused, retries exhausted).
    pub failed: AtomicU64,
    /// Messages dropped because its queue was full.
    pub dropped: AtomicU64,
    /// Retries made.
    pub retries: AtomicU64,
}

/// Every counter of the relay.
#[derive(Debug)]
pub struct Metrics {
    /// Per output, in configuration order.
    pub outputs: Vec<(&'static str, OutputCounters)>,
    /// Grafana panels rendered.
    pub grafana_rendered: AtomicU64,
    /// Grafana renders that failed.
    pub grafana_failed: AtomicU64,
}

impl Metrics {
    /// Counters for these outputs.
    pub fn new(outputs: &[&'static str]) -> Metrics {
        Metrics {
            outputs: outputs
                .iter()
                .map(|n| (*n, OutputCounters::default()))
                .collect(),
            grafana_rendered: AtomicU64::new(0),
            grafana_failed: AtomicU64::new(0),
        }
    }

    /// Counters of output `name`.
    pub fn output(&self, name: &str) -> Option<&OutputCounters> {
        self.outputs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| c)
    }

    /// The text exposition; `stats` adds the relay-wide counters.
    pub fn render(&self, stats: &crate::Stats) -> String {
        let mut out = String::new();
        let single = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        };
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        single(
            &mut out,
            "events_received_total",
            "Events decoded from requests (one per admission review, one per alert).",
            load(&stats.received),
        );
        single(
            &mut out,
            "events_render_dropped_total",
            "Events dropped because too many were being rendered.",
            load(&stats.dropped),
        );
        type Pick = fn(&OutputCounters) -> &AtomicU64;
        let families: [(&str, &str, Pick); 5] = [
            (
                "events_output_rendered_total",
                "Messages rendered for an output, one per target.",
                |c| &c.rendered,
            ),
            (
                "events_output_sent_total",
                "Messages an output delivered.",
                |c| &c.sent,
            ),
            (
                "events_output_failed_total",
                "Messages an output failed to render or deliver.",
                |c| &c.failed,
            ),
            (
                "events_output_dropped_total",
                "Messages dropped because the output's queue was full.",
                |c| &c.dropped,
            ),
            (
                "events_output_retries_total",
                "Delivery retries (timeouts, 429, 5xx).",
                |c| &c.retries,
            ),
        ];
        for (name, help, pick) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (output, c) in &self.outputs {
                let _ = writeln!(out, "{name}{{output=\"{output}\"}} {}", load(pick(c)));
            }
        }
        let _ = writeln!(
            out,
            "# HELP events_grafana_renders_total Grafana panel renders by result.\n# TYPE events_grafana_renders_total counter\nevents_grafana_renders_total{{result=\"ok\"}} {}\nevents_grafana_renders_total{{result=\"error\"}} {}",
            load(&self.grafana_rendered),
            load(&self.grafana_failed)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_lists_every_output() {
        let m = Metrics::new(&["telegram", "nats"]);
        m.output("nats")
            .unwrap()
            .dropped
            .fetch_add(2, Ordering::Relaxed);
        let text = m.render(&crate::Stats::default());
        assert!(
            text.contains("events_output_dropped_total{output=\"nats\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("events_output_sent_total{output=\"telegram\"} 0\n"));
        assert!(text.contains("# TYPE events_received_total counter\nevents_received_total 0\n"));
        // Every sample line is `name{labels} value` or `name value`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = line.rsplit_once(' ').unwrap();
            v.parse::<u64>().unwrap();
        }
    }
}
