//! Delivery: one bounded queue and one worker task per output, so a slow or dead chat
//! never slows the HTTP answer nor the other outputs. A full queue drops the new message
//! (counted). Each API call is retried on timeouts, connection errors, 429 and 5xx with
//! exponential backoff, and a 429's `retry_after`/`Retry-After` is honoured. Long messages
//! are split, so nothing is lost to a length limit.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::Value as Json;
use tokio::sync::mpsc;

use crate::alert::AlertSlot;
use crate::client::{ClientError, HttpClient, Multipart, Reply};
use crate::grafana::{AlertQuery, Grafana};
use crate::log::{Level, Logger};
use crate::metrics::Metrics;
use crate::outputs::redact;
use crate::settings::{Channel, ChannelKind, Delivery};
use crate::trace::{SpanContext, Tracer};

/// Telegram's limits for a message text and a photo caption.
pub const TELEGRAM_TEXT: usize = 4096;
/// Telegram photo caption limit.
pub const TELEGRAM_CAPTION: usize = 1024;
/// Slack truncates `text` beyond this.
pub const SLACK_TEXT: usize = 40_000;
/// Workplace (Graph Send API) text limit.
pub const WORKCHAT_TEXT: usize = 2000;
/// Longest backoff between retries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Per-key token buckets: Telegram allows about 20 messages a minute into a group, and
/// answers 429 beyond; pacing ourselves keeps bursts of alerts from being throttled.
#[derive(Debug)]
pub struct Pacer {
    per_minute: u32,
    buckets: HashMap<String, (f64, Instant)>,
}

/// Buckets kept at most; full ones are forgotten first.
const MAX_BUCKETS: usize = 10_000;

impl Pacer {
    /// `per_minute` calls per key and minute, bursts of as many; 0 turns pacing off.
    pub fn new(per_minute: u32) -> Pacer {
        Pacer {
            per_minute,
            buckets: HashMap::new(),
        }
    }

    /// Takes a token for `key` and says how long to wait before using it.
    pub fn reserve(&mut self, key: &str, now: Instant) -> Duration {
        if self.per_minute == 0 {
            return Duration::ZERO;
        }
        let cap = f64::from(self.per_minute);
        let rate = cap / 60.0;
        if self.buckets.len() >= MAX_BUCKETS {
            self.buckets.retain(|_, (tokens, last)| {
                *tokens + now.saturating_duration_since(*last).as_secs_f64() * rate < cap
            });
        }
        let (tokens, last) = self.buckets.entry(key.to_string()).or_insert((cap, now));
        let available =
            (*tokens + now.saturating_duration_since(*last).as_secs_f64() * rate).min(cap);
        // A negative balance is the queue of calls already promised a later slot.
        *tokens = available - 1.0;
        *last = now;
        if *tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-*tokens / rate)
        }
    }
}

/// One message for one target of one output.
pub struct Job {
    /// Target URL, subject or address.
    pub target: String,
    /// Rendered message.
    pub message: String,
    /// `K8sEvent` / `AlertmanagerEvent`.
    pub event_type: &'static str,
    /// The alert, for its expression line and image (alerts to chat outputs only).
    pub alert: Option<Arc<AlertSlot>>,
    /// The event's span, parent of this delivery's span.
    pub span: Option<SpanContext>,
    /// When it was queued (the delivery span starts here, so queueing time shows).
    pub queued: chrono::DateTime<chrono::Utc>,
}

/// A call's failure: worth retrying (maybe after a given wait) or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// Timeouts, connection errors, 429, 5xx.
    Retry {
        /// What the server asked us to wait.
        after: Option<Duration>,
        /// Why.
        reason: String,
    },
    /// Anything else (4xx, bad settings): retrying would fail the same way.
    Fatal(String),
}

/// The sending side of an output's queue.
pub struct Queue {
    /// Output name.
    pub name: &'static str,
    tx: mpsc::Sender<Job>,
}

impl Queue {
    /// Queues `job`; returns false (and the caller counts a drop) when the queue is full.
    pub fn push(&self, job: Job) -> bool {
        self.tx.try_send(job).is_ok()
    }
}

/// Everything a worker needs besides its queue.
pub struct Shared {
    /// HTTP client.
    pub client: HttpClient,
    /// Grafana, when configured.
    pub grafana: Option<Grafana>,
    /// Default time range of alert images.
    pub grafana_period: u64,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Records.
    pub log: Arc<Logger>,
    /// Spans.
    pub tracer: Option<Arc<Tracer>>,
    /// Retry policy.
    pub delivery: Delivery,
}

/// Creates the queue of `channel`; the receiver goes to [`run_worker`].
pub fn queue(channel: &Channel, size: usize) -> (Queue, mpsc::Receiver<Job>) {
    let (tx, rx) = mpsc::channel(size);
    (
        Queue {
            name: channel.kind.name(),
            tx,
        },
        rx,
    )
}

/// Delivers jobs from `rx` one after another until every sender is gone.
pub async fn run_worker(channel: Channel, mut rx: mpsc::Receiver<Job>, shared: Arc<Shared>) {
    let name = channel.kind.name();
    let mut out = Output::new(channel, Arc::clone(&shared));
    while let Some(job) = rx.recv().await {
        let result = out.deliver(&job).await;
        let Some(counters) = shared.metrics.output(name) else {
            continue;
        };
        let target = redact(&job.target);
        match &result {
            Ok(()) => {
                counters.sent.fetch_add(1, Ordering::Relaxed);
                shared.log.log(
                    Level::Info,
                    "message sent",
                    &[
                        ("delivered", name),
                        ("target", &target),
                        ("event_type", job.event_type),
                    ],
                );
            }
            Err(e) => {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                shared.log.log(
                    Level::Error,
                    &format!("{name}: not sent: {e}"),
                    &[
                        ("delivered", name),
                        ("target", &target),
                        ("event_type", job.event_type),
                    ],
                );
            }
        }
        if let (Some(tracer), Some(parent)) = (&shared.tracer, &job.span) {
            tracer.child(
                parent,
                &format!("send {name}"),
                job.queued,
                crate::now(),
                &[("output", name), ("target", &target)],
                result.as_ref().err().map(String::as_str),
            );
        }
    }
}

/// Per-output state that lives in the worker.
struct Output {
    channel: Channel,
    shared: Arc<Shared>,
    timeout: Duration,
    nats: Option<async_nats::Client>,
    pacer: Mutex<Pacer>,
}

fn classify(r: Result<Reply, ClientError>) -> Result<Reply, SendError> {
    let reply = match r {
        Ok(r) => r,
        Err(e @ ClientError::Url(_)) => return Err(SendError::Fatal(e.to_string())),
        Err(e) => {
            return Err(SendError::Retry {
                after: None,
                reason: e.to_string(),
            });
        }
    };
    let status = reply.status;
    if status.is_success() {
        return Ok(reply);
    }
    let body = reply.json();
    // Telegram: {"ok":false,"description":"...","parameters":{"retry_after":N}}; Slack:
    // {"ok":false,"error":"..."}; Graph: {"error":{"message":"..."}}.
    let description = body
        .get("description")
        .or_else(|| body.get("error").and_then(|e| e.get("message").or(Some(e))))
        .and_then(Json::as_str)
        .map(|d| d.chars().take(200).collect::<String>())
        .unwrap_or_default();
    let reason = format!(
        "HTTP {}{}{}",
        status.as_u16(),
        if description.is_empty() { "" } else { ": " },
        description
    );
    let after = body
        .pointer("/parameters/retry_after")
        .and_then(Json::as_u64)
        .map(Duration::from_secs)
        .or_else(|| reply.retry_after());
    // Graph API throttling codes (4, 17, 32, 613) come as 400/403.
    let graph_throttled = matches!(
        body.pointer("/error/code").and_then(Json::as_u64),
        Some(4 | 17 | 32 | 613)
    );
    if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() || graph_throttled {
        Err(SendError::Retry { after, reason })
    } else {
        Err(SendError::Fatal(reason))
    }
}

/// `ok: false` in a 200 answer (Slack answers errors that way).
fn check_ok(reply: Reply) -> Result<Reply, SendError> {
    let body = reply.json();
    if body.get("ok") == Some(&Json::Bool(false)) {
        let err = body
            .get("error")
            .or_else(|| body.get("description"))
            .and_then(Json::as_str)
            .unwrap_or("ok: false");
        if err == "ratelimited" {
            return Err(SendError::Retry {
                after: reply.retry_after(),
                reason: err.to_string(),
            });
        }
        return Err(SendError::Fatal(err.chars().take(200).collect()));
    }
    Ok(reply)
}

impl Output {
    fn new(channel: Channel, shared: Arc<Shared>) -> Output {
        let timeout = channel
            .vars
            .get("Timeout")
            .and_then(|t| t.parse().ok())
            .map(Duration::from_secs)
            .unwrap_or(Duration::from_secs(30));
        let per_minute = channel
            .vars
            .get("RateLimit")
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        Output {
            channel,
            shared,
            timeout,
            nats: None,
            pacer: Mutex::new(Pacer::new(per_minute)),
        }
    }

    fn var(&self, k: &str, default: &str) -> String {
        self.channel
            .vars
            .get(k)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }

    /// Runs `call` until it succeeds, fails for good, or the retries are used up.
    async fn attempt<T, F, Fut>(&self, what: &str, mut call: F) -> Result<T, String>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SendError>>,
    {
        let policy = &self.shared.delivery;
        let mut backoff = policy.backoff;
        let mut tries = 0u32;
        loop {
            match call().await {
                Ok(v) => return Ok(v),
                Err(SendError::Fatal(e)) => return Err(format!("{what}: {e}")),
                Err(SendError::Retry { after, reason }) => {
                    tries += 1;
                    if tries > policy.retries {
                        return Err(format!("{what}: {reason} (gave up after {tries} attempts)"));
                    }
                    let wait = match after {
                        Some(a) if a > policy.max_retry_after => {
                            return Err(format!(
                                "{what}: {reason}; asked to wait {a:?}, more than the {:?} allowed",
                                policy.max_retry_after
                            ));
                        }
                        Some(a) => a,
                        None => {
                            let b = backoff;
                            backoff = (backoff * 2).min(MAX_BACKOFF);
                            b
                        }
                    };
                    if let Some(c) = self.shared.metrics.output(self.channel.kind.name()) {
                        c.retries.fetch_add(1, Ordering::Relaxed);
                    }
                    self.shared.log.log(
                        Level::Warn,
                        &format!(
                            "{}: {what}: {reason}; retrying in {wait:?}",
                            self.channel.kind.name()
                        ),
                        &[],
                    );
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn http(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<Reply, SendError> {
        classify(
            self.shared
                .client
                .send(method, url, headers, body, self.timeout)
                .await,
        )
    }

    async fn multipart(&self, url: &str, form: Multipart) -> Result<Reply, SendError> {
        let (ct, body) = form.finish();
        self.http(Method::POST, url, &[("content-type", ct)], body)
            .await
    }

    /// The line under an alert's message (see [`AlertSlot::query_line`]); `None` for
    /// other events.
    fn query_line(&self, job: &Job) -> Option<String> {
        let label = self.var("AlertExpression", "g0.expr");
        Some(job.alert.as_ref()?.query_line(self.channel.kind, &label))
    }

    /// The message with the alert's line under it, as the original sent alerts.
    fn with_query_line(&self, job: &Job) -> String {
        match self.query_line(job) {
            Some(line) => format!("{}\n{line}", job.message),
            None => job.message.clone(),
        }
    }

    async fn image(&self, job: &Job) -> Option<(Bytes, AlertQuery)> {
        let slot = job.alert.as_ref()?;
        let grafana = self.shared.grafana.as_ref()?;
        let label = self.var("AlertExpression", "g0.expr");
        match slot
            .image(
                &label,
                grafana,
                self.shared.grafana_period,
                &self.shared.metrics,
            )
            .await
        {
            Ok(img) => Some(img),
            Err(e) => {
                self.shared.log.log(
                    Level::Warn,
                    &format!(
                        "{}: no alert image, sending text only: {e}",
                        self.channel.kind.name()
                    ),
                    &[],
                );
                None
            }
        }
    }

    async fn deliver(&mut self, job: &Job) -> Result<(), String> {
        match self.channel.kind {
            ChannelKind::Telegram => self.telegram(job).await,
            ChannelKind::Slack => self.slack(job).await,
            ChannelKind::Workchat => self.workchat(job).await,
            ChannelKind::Nats => self.nats(job).await,
            ChannelKind::Collector => self.collector(job).await,
        }
    }

    /// Waits for a slot to send to `key`.
    async fn pace(&self, key: &str) {
        let wait = match self.pacer.lock() {
            Ok(mut p) => p.reserve(key, Instant::now()),
            Err(_) => Duration::ZERO,
        };
        if !wait.is_zero() {
            self.shared.log.log(
                Level::Debug,
                &format!(
                    "{}: pacing, next send in {wait:?}",
                    self.channel.kind.name()
                ),
                &[],
            );
            tokio::time::sleep(wait).await;
        }
    }
}

mod chats;
mod wire;

#[cfg(test)]
mod tests;
