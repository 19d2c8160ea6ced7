//! Push sinks: statsd over TCP (upstream's default, tags folded into names as
//! `.__key=value`), DogStatsD over UDP (tags as `|#key:value`, with mogrifiers that rewrite
//! names into name + tags), and the log.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use super::histogram::HistogramSnapshot;
use super::{Metrics, Value};
use crate::log::{self, Level};

/// Rewrites a metric name into a name and tags (`DOG_STATSD_MOGRIFIER_<NAME>_*`).
#[derive(Debug, Clone)]
pub struct Mogrifier {
    /// `_PATTERN`
    pub pattern: Regex,
    /// `_NAME`, with `$1`-style group references.
    pub name: String,
    /// `_TAGS`, `key:$1` pairs.
    pub tags: Vec<(String, String)>,
}

/// How lines are written.
#[derive(Debug, Clone)]
pub enum Flavor {
    /// Plain statsd: tags become `.__key=value` name suffixes.
    Statsd,
    /// DogStatsD: tags after `|#`, names rewritten by the first matching mogrifier.
    Dog(Vec<Mogrifier>),
    /// Lines to the log (upstream's behaviour when statsd is off).
    Log,
}

/// Turns a name into (name, tags) through the first matching mogrifier. A tag value is
/// part of a name, which may carry a request value: its commas become `_`, or they would
/// split it into tags the client chose.
pub fn mogrify(mogrifiers: &[Mogrifier], name: &str) -> (String, Vec<(String, String)>) {
    for m in mogrifiers {
        if let Some(caps) = m.pattern.captures(name) {
            let mut n = String::new();
            caps.expand(&m.name, &mut n);
            let tags = m
                .tags
                .iter()
                .map(|(k, v)| {
                    let mut out = String::new();
                    caps.expand(v, &mut out);
                    (k.clone(), out.replace(',', "_"))
                })
                .collect();
            return (n, tags);
        }
    }
    (name.to_owned(), Vec::new())
}

/// The lines for one flush: counter deltas since `prev`, gauges, timer samples.
pub fn render(
    flavor: &Flavor,
    now: &[(String, Value)],
    prev: &std::collections::HashMap<String, Value>,
    extra_tags: &[(String, String)],
) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, v) in now {
        let (name, mut tags) = match flavor {
            Flavor::Dog(m) => mogrify(m, name),
            _ => (name.clone(), Vec::new()),
        };
        tags.extend(extra_tags.iter().cloned());
        let mut samples: Vec<(String, &'static str, Option<f64>)> = Vec::new();
        match v {
            Value::Counter(c) => {
                let before = match prev.get(&name).or_else(|| prev.get(name.as_str())) {
                    Some(Value::Counter(p)) => *p,
                    _ => 0,
                };
                let d = c.saturating_sub(before);
                if d > 0 {
                    samples.push((d.to_string(), "c", None));
                }
            }
            Value::Gauge(g) => samples.push((g.to_string(), "g", None)),
            Value::Timer(h) => {
                let before = match prev.get(&name) {
                    Some(Value::Timer(p)) => p.clone(),
                    _ => HistogramSnapshot::default(),
                };
                let d = h.since(&before);
                // One line per non-empty bucket, its count carried by the sample rate, so
                // the daemon sees every observation without one packet each.
                for (i, n) in d.buckets.iter().enumerate() {
                    if *n > 0 {
                        let rate = 1.0 / *n as f64;
                        samples.push((
                            format!("{:.3}", HistogramSnapshot::bucket_ms(i)),
                            "ms",
                            Some(rate),
                        ));
                    }
                }
            }
        }
        for (value, kind, rate) in samples {
            let mut line = String::with_capacity(name.len() + 32);
            match flavor {
                Flavor::Statsd | Flavor::Log => {
                    line.push_str(&name);
                    for (k, v) in &tags {
                        let _ = write!(line, ".__{k}={v}");
                    }
                    let _ = write!(line, ":{value}|{kind}");
                    if let Some(r) = rate {
                        let _ = write!(line, "|@{r}");
                    }
                }
                Flavor::Dog(_) => {
                    let _ = write!(line, "{name}:{value}|{kind}");
                    if let Some(r) = rate {
                        let _ = write!(line, "|@{r}");
                    }
                    if !tags.is_empty() {
                        line.push_str("|#");
                        let joined: Vec<String> =
                            tags.iter().map(|(k, v)| format!("{k}:{v}")).collect();
                        line.push_str(&joined.join(","));
                    }
                }
            }
            lines.push(line);
        }
    }
    lines
}

/// Flushes every `interval` until `shutdown` flips (and once more then). Rules removed by a
/// reload are reported by the next flush, then forgotten.
pub async fn run(
    metrics: Arc<Metrics>,
    flavor: Flavor,
    target: Option<SocketAddr>,
    interval: Duration,
    extra_tags: Vec<(String, String)>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut prev: std::collections::HashMap<String, Value> = std::collections::HashMap::new();
    let mut tcp: Option<tokio::net::TcpStream> = None;
    metrics.stats.hold_retired(true);
    let udp = match (&flavor, target) {
        (Flavor::Dog(_), Some(_)) => tokio::net::UdpSocket::bind("0.0.0.0:0").await.ok(),
        _ => None,
    };
    loop {
        let stop = tokio::select! {
            _ = tokio::time::sleep(interval) => false,
            _ = shutdown.changed() => true,
        };
        let (now, flushed) = metrics.collect_for_flush();
        let lines = render(&flavor, &now, &prev, &extra_tags);
        prev = now.into_iter().collect();
        if !lines.is_empty() {
            match (&flavor, target) {
                (Flavor::Log, _) | (_, None) => {
                    for l in &lines {
                        log::log(Level::Info, &format!("stat {l}"));
                    }
                }
                (Flavor::Dog(_), Some(addr)) => {
                    if let Some(sock) = &udp {
                        // Keep datagrams under a typical MTU.
                        let mut buf = String::new();
                        for l in &lines {
                            if !buf.is_empty() && buf.len() + l.len() + 1 > 1400 {
                                let _ = sock.send_to(buf.as_bytes(), addr).await;
                                buf.clear();
                            }
                            if !buf.is_empty() {
                                buf.push('\n');
                            }
                            buf.push_str(l);
                        }
                        if !buf.is_empty() {
                            let _ = sock.send_to(buf.as_bytes(), addr).await;
                        }
                    }
                }
                (Flavor::Statsd, Some(addr)) => {
                    let mut payload = lines.join("\n");
                    payload.push('\n');
                    if tcp.is_none() {
                        tcp = tokio::time::timeout(
                            Duration::from_secs(2),
                            tokio::net::TcpStream::connect(addr),
                        )
                        .await
                        .ok()
                        .and_then(Result::ok);
                    }
                    let sent = match tcp.as_mut() {
                        Some(s) => s.write_all(payload.as_bytes()).await.is_ok(),
                        None => false,
                    };
                    if !sent {
                        // Statsd being away must not affect serving: drop this flush,
                        // reconnect next time.
                        tcp = None;
                        log::log(
                            Level::Debug,
                            &format!(
                                "statsd at {addr} unreachable; dropped {} stats",
                                lines.len()
                            ),
                        );
                    }
                }
            }
        }
        // Released even when the daemon was away: a removed rule's last counts are lost
        // then, like every other count of that flush.
        metrics.stats.release_flushed(flushed);
        if stop {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mogrifiers_rewrite_names_into_tags() {
        let m = Mogrifier {
            pattern: Regex::new(r"^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$")
                .unwrap(),
            name: "ratelimit.service.rate_limit.$3".into(),
            tags: vec![
                ("domain".into(), "$1".into()),
                ("descriptor".into(), "$2".into()),
            ],
        };
        let (n, t) = mogrify(
            std::slice::from_ref(&m),
            "ratelimit.service.rate_limit.rl.api_key.over_limit",
        );
        assert_eq!(n, "ratelimit.service.rate_limit.over_limit");
        assert_eq!(
            t,
            [
                ("domain".to_owned(), "rl".to_owned()),
                ("descriptor".to_owned(), "api_key".to_owned())
            ]
        );
        // A request value (`detailed_metric`) with a comma stays one tag on the wire.
        let now = vec![(
            "ratelimit.service.rate_limit.rl.api_key_a,env_prod.total_hits".to_owned(),
            Value::Counter(1),
        )];
        let lines = render(&Flavor::Dog(vec![m]), &now, &Default::default(), &[]);
        assert_eq!(
            lines,
            [
                "ratelimit.service.rate_limit.total_hits:1|c|#domain:rl,descriptor:api_key_a_env_prod"
            ]
        );
    }

    #[test]
    fn counters_flush_as_deltas() {
        let now = vec![
            ("a.b".to_owned(), Value::Counter(5)),
            ("g".to_owned(), Value::Gauge(2)),
        ];
        let mut prev = std::collections::HashMap::new();
        prev.insert("a.b".to_owned(), Value::Counter(3));
        let tags = vec![("env".to_owned(), "prod".to_owned())];
        assert_eq!(
            render(&Flavor::Statsd, &now, &prev, &tags),
            ["a.b.__env=prod:2|c", "g.__env=prod:2|g"]
        );
        assert_eq!(
            render(&Flavor::Dog(vec![]), &now, &prev, &tags),
            ["a.b:2|c|#env:prod", "g:2|g|#env:prod"]
        );
    }
}
