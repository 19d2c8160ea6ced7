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
use serde_json::{Value as Json, json};
use tokio::sync::mpsc;

use crate::alert::AlertSlot;
use crate::client::{ClientError, HttpClient, Multipart, Reply, form, query_pairs};
use crate::grafana::{AlertQuery, Grafana};
use crate::log::{Level, Logger};
use crate::metrics::Metrics;
use crate::outputs::redact;
use crate::settings::{Channel, ChannelKind, Delivery};
use crate::split::split;
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

    async fn telegram(&self, job: &Job) -> Result<(), String> {
        let url = &job.target;
        // Limits are per chat; the bot token in the path does not matter for them.
        let chat = query_pairs(url)
            .into_iter()
            .find(|(k, _)| k == "chat_id")
            .map(|(_, v)| v)
            .unwrap_or_default();
        let quiet = self.var("DisableNotification", "false");
        let with_line = self.with_query_line(job);
        let mut text = Some(with_line.as_str());
        if let Some((png, _)) = self.image(job).await {
            let caption = if with_line.encode_utf16().count() <= TELEGRAM_CAPTION {
                text = None;
                with_line.clone()
            } else {
                // Too long for a caption: the photo carries the query line, the message
                // follows as text.
                text = Some(job.message.as_str());
                let line = self.query_line(job).unwrap_or_default();
                split(&line, TELEGRAM_CAPTION, true).swap_remove(0)
            };
            let photo_url = url.replacen("/sendMessage", "/sendPhoto", 1);
            self.pace(&chat).await;
            self.attempt("sendPhoto", || {
                let form = Multipart::new()
                    .text("caption", &caption)
                    .text("parse_mode", "HTML")
                    .text("disable_notification", &quiet)
                    .file("photo", "alert.png", "image/png", &png);
                async { self.multipart(&photo_url, form).await.and_then(check_ok) }
            })
            .await?;
        }
        if let Some(text) = text {
            for part in split(text, TELEGRAM_TEXT, true) {
                self.pace(&chat).await;
                self.attempt("sendMessage", || {
                    let form = Multipart::new()
                        .text("text", &part)
                        .text("parse_mode", "HTML")
                        .text("disable_web_page_preview", "true")
                        .text("disable_notification", &quiet);
                    async { self.multipart(url, form).await.and_then(check_ok) }
                })
                .await?;
            }
        }
        Ok(())
    }

    async fn slack(&self, job: &Job) -> Result<(), String> {
        // `--slack-url` keeps the original's shape (`.../api/files.upload?token=T&channels=C`);
        // the token and channels come from it, the methods are the current ones.
        let q = query_pairs(&job.target);
        let find = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let token = find("token").ok_or("the Slack URL has no token parameter")?;
        let channels = find("channels")
            .or_else(|| find("channel"))
            .ok_or("the Slack URL has no channels parameter")?;
        let path = job.target.split('?').next().unwrap_or("");
        let base = path.rsplit_once('/').map(|(b, _)| b).unwrap_or(path);
        let auth = ("authorization", format!("Bearer {token}"));
        let image = self.image(job).await;
        let with_line = self.with_query_line(job);
        for channel in channels.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            if let Some((png, q)) = &image {
                let ticket = self
                    .attempt("files.getUploadURLExternal", || {
                        let body = form(&[
                            ("filename", "alert.png"),
                            ("length", &png.len().to_string()),
                        ]);
                        let headers = [
                            auth.clone(),
                            ("content-type", "application/x-www-form-urlencoded".into()),
                        ];
                        async move {
                            self.http(
                                Method::POST,
                                &format!("{base}/files.getUploadURLExternal"),
                                &headers,
                                body,
                            )
                            .await
                            .and_then(check_ok)
                        }
                    })
                    .await?
                    .json();
                let (Some(upload_url), Some(file_id)) = (
                    ticket.get("upload_url").and_then(Json::as_str),
                    ticket.get("file_id").and_then(Json::as_str),
                ) else {
                    return Err(
                        "files.getUploadURLExternal: no upload_url/file_id in the answer".into(),
                    );
                };
                self.attempt("file upload", || {
                    let headers = [("content-type", "application/octet-stream".to_string())];
                    async move {
                        self.http(Method::POST, upload_url, &headers, png.clone())
                            .await
                    }
                })
                .await?;
                let files = json!([{"id": file_id, "title": q.expr}]).to_string();
                self.attempt("files.completeUploadExternal", || {
                    let body = form(&[
                        ("files", &files),
                        ("channel_id", channel),
                        ("initial_comment", &job.message),
                    ]);
                    let headers = [
                        auth.clone(),
                        ("content-type", "application/x-www-form-urlencoded".into()),
                    ];
                    async move {
                        self.http(
                            Method::POST,
                            &format!("{base}/files.completeUploadExternal"),
                            &headers,
                            body,
                        )
                        .await
                        .and_then(check_ok)
                    }
                })
                .await?;
                continue;
            }
            // Without an image the line replaces the file title that showed the expression.
            for part in split(&with_line, SLACK_TEXT, false) {
                self.attempt("chat.postMessage", || {
                    let body = Bytes::from(json!({"channel": channel, "text": part}).to_string());
                    let headers = [
                        auth.clone(),
                        ("content-type", "application/json; charset=utf-8".into()),
                    ];
                    async move {
                        self.http(
                            Method::POST,
                            &format!("{base}/chat.postMessage"),
                            &headers,
                            body,
                        )
                        .await
                        .and_then(check_ok)
                    }
                })
                .await?;
            }
        }
        Ok(())
    }

    async fn workchat(&self, job: &Job) -> Result<(), String> {
        let url = &job.target;
        let kind = self.var("NotificationType", "REGULAR");
        if let Some((png, _)) = self.image(job).await {
            let attachment =
                json!({"attachment": {"type": "image", "payload": {"is_reusable": true}}})
                    .to_string();
            self.attempt("image", || {
                let form = Multipart::new()
                    .text("message", &attachment)
                    .text("notification_type", &kind)
                    .file("filedata", "alert.png", "image/png", &png);
                async { self.multipart(url, form).await }
            })
            .await?;
        }
        for part in split(&self.with_query_line(job), WORKCHAT_TEXT, false) {
            // Proper JSON: the original built it with string formatting and broke on quotes.
            let message = json!({"text": part}).to_string();
            self.attempt("message", || {
                let form = Multipart::new()
                    .text("message", &message)
                    .text("notification_type", &kind);
                async { self.multipart(url, form).await }
            })
            .await?;
        }
        Ok(())
    }

    async fn nats(&mut self, job: &Job) -> Result<(), String> {
        let timeout = self.timeout;
        let server = self.channel.server.as_str();
        let payload = Bytes::from(job.message.clone());
        let existing = self.nats.clone();
        let client = self
            .attempt("publish", || {
                let subject = job.target.clone();
                let payload = payload.clone();
                let existing = existing.clone();
                async move {
                    let retry = |reason: String| SendError::Retry {
                        after: None,
                        reason,
                    };
                    // The client reconnects by itself once connected; only the first
                    // connection is made here.
                    let c = match existing {
                        Some(c) => c,
                        None => tokio::time::timeout(timeout, async_nats::connect(server))
                            .await
                            .map_err(|_| {
                                retry(format!("connecting: no answer within {timeout:?}"))
                            })?
                            .map_err(|e| retry(format!("connecting: {e}")))?,
                    };
                    let publish = async {
                        c.publish(subject, payload)
                            .await
                            .map_err(|e| e.to_string())?;
                        c.flush().await.map_err(|e| e.to_string())
                    };
                    match tokio::time::timeout(timeout, publish).await {
                        Ok(Ok(())) => Ok(c),
                        Ok(Err(e)) => Err(retry(e)),
                        Err(_) => Err(retry(format!("no flush within {timeout:?}"))),
                    }
                }
            })
            .await?;
        self.nats = Some(client);
        Ok(())
    }

    async fn collector(&self, job: &Job) -> Result<(), String> {
        let address = job.target.clone();
        let payload = job.message.clone();
        self.attempt("datagram", || {
            let address = address.clone();
            let payload = payload.clone();
            async move {
                let fatal = |e: String| SendError::Fatal(e);
                let addr = tokio::net::lookup_host(address.as_str())
                    .await
                    .map_err(|e| SendError::Retry {
                        after: None,
                        reason: format!("resolving {address}: {e}"),
                    })?
                    .next()
                    .ok_or_else(|| fatal(format!("{address}: no address")))?;
                let local = if addr.is_ipv4() {
                    "0.0.0.0:0"
                } else {
                    "[::]:0"
                };
                let sock = tokio::net::UdpSocket::bind(local)
                    .await
                    .map_err(|e| fatal(format!("binding a UDP socket: {e}")))?;
                sock.send_to(payload.as_bytes(), addr)
                    .await
                    .map_err(|e| SendError::Retry {
                        after: None,
                        reason: format!("sending to {address}: {e}"),
                    })?;
                Ok(())
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, body: &str, retry_after: Option<&str>) -> Result<Reply, ClientError> {
        let mut headers = http::HeaderMap::new();
        if let Some(r) = retry_after {
            headers.insert(http::header::RETRY_AFTER, r.parse().unwrap());
        }
        Ok(Reply {
            status: StatusCode::from_u16(status).unwrap(),
            headers,
            body: Bytes::from(body.to_string()),
        })
    }

    #[test]
    fn pacer_allows_a_burst_then_spaces_calls() {
        let t0 = Instant::now();
        let mut p = Pacer::new(20);
        for _ in 0..20 {
            assert_eq!(p.reserve("-100", t0), Duration::ZERO);
        }
        // Twenty a minute: one every three seconds once the burst is used.
        assert_eq!(p.reserve("-100", t0), Duration::from_secs(3));
        assert_eq!(p.reserve("-100", t0), Duration::from_secs(6));
        // Other chats have their own bucket.
        assert_eq!(p.reserve("-200", t0), Duration::ZERO);
        // Time refills the bucket: 30 s later, ten tokens minus the two promised.
        let later = t0 + Duration::from_secs(30);
        for _ in 0..8 {
            assert_eq!(p.reserve("-100", later), Duration::ZERO);
        }
        assert!(p.reserve("-100", later) > Duration::ZERO);
        let mut off = Pacer::new(0);
        for _ in 0..100 {
            assert_eq!(off.reserve("-100", t0), Duration::ZERO);
        }
    }

    #[test]
    fn answers_are_classified() {
        assert!(classify(reply(200, "{}", None)).is_ok());
        assert_eq!(
            classify(reply(429, r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3","parameters":{"retry_after":3}}"#, None)).unwrap_err(),
            SendError::Retry { after: Some(Duration::from_secs(3)), reason: "HTTP 429: Too Many Requests: retry after 3".into() }
        );
        assert_eq!(
            classify(reply(429, "", Some("7"))).unwrap_err(),
            SendError::Retry {
                after: Some(Duration::from_secs(7)),
                reason: "HTTP 429".into()
            }
        );
        assert!(matches!(
            classify(reply(502, "", None)),
            Err(SendError::Retry { after: None, .. })
        ));
        assert_eq!(
            classify(reply(
                400,
                r#"{"ok":false,"description":"Bad Request: chat not found"}"#,
                None
            ))
            .unwrap_err(),
            SendError::Fatal("HTTP 400: Bad Request: chat not found".into())
        );
        assert!(matches!(
            classify(reply(
                400,
                r#"{"error":{"message":"slow down","code":613}}"#,
                None
            )),
            Err(SendError::Retry { .. })
        ));
        assert!(matches!(
            classify(Err(ClientError::Io("refused".into()))),
            Err(SendError::Retry { .. })
        ));
        assert_eq!(
            check_ok(reply(200, r#"{"ok":false,"error":"channel_not_found"}"#, None).unwrap())
                .unwrap_err(),
            SendError::Fatal("channel_not_found".into())
        );
    }
}
