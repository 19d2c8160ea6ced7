//! The `event-relay` server: a thin shell around `relay-templates`.
//!
//! It listens for admission reviews and Alertmanager notifications on the configured
//! paths, answers at once (an admission review is always allowed, so the relay can never
//! block a cluster), and renders each event for every configured output in the
//! background. Rendered messages are logged and queued per output; a worker per output
//! delivers them (Telegram, Slack, Workplace, NATS, UDP collector) with retries, so a slow
//! chat never slows an answer. Counters are on `/metrics`, spans go to an OTLP collector.
//!
//! What it deliberately does not do here: template semantics and input decoding (both in
//! `relay-templates`).
//!
//! [`serve`] runs until a shutdown future resolves, so tests run it on `127.0.0.1:0`.
#![forbid(unsafe_code)]

pub mod alert;
pub mod client;
pub mod deliver;
pub mod grafana;
pub mod http;
pub mod log;
pub mod metrics;
pub mod outputs;
pub mod settings;
pub mod split;
pub mod trace;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use relay_templates::relay::Lookup;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::alert::AlertSlot;
use crate::client::HttpClient;
use crate::deliver::{Job, Queue, Shared};
use crate::log::{Level, Logger};
use crate::metrics::Metrics;
use crate::outputs::{ChannelOutput, Skip, redact};
use crate::settings::Channel;
pub use crate::settings::Settings;
use crate::trace::Tracer;

type Receivers = Vec<(Channel, tokio::sync::mpsc::Receiver<Job>)>;

/// Relay-wide counters (on `/healthz` and `/metrics`; per-output ones are in [`Metrics`]).
#[derive(Default, Debug)]
pub struct Stats {
    /// Events decoded from requests.
    pub received: AtomicU64,
    /// Messages rendered and handed to an output.
    pub rendered: AtomicU64,
    /// Messages that failed to render.
    pub failed: AtomicU64,
    /// Events dropped because [`MAX_IN_FLIGHT`] requests were already being rendered.
    pub dropped: AtomicU64,
}

/// Requests whose events are being rendered at the same time, at most; the events of a
/// request beyond it are dropped (and counted), so a burst cannot queue unbounded work
/// behind the HTTP answers. The bound is per request, not per event: one notification's
/// alerts are rendered one after another under a single permit, however many there are.
pub const MAX_IN_FLIGHT: usize = 256;

/// Everything a request handler needs.
pub struct App {
    /// Settings the relay started with.
    pub settings: Settings,
    /// Enabled channels.
    pub outputs: Vec<ChannelOutput>,
    /// stdout records.
    pub log: Arc<Logger>,
    /// Counters.
    pub stats: Stats,
    /// Per-output counters.
    pub metrics: Arc<Metrics>,
    /// Receive time of an event (a function so tests can pin it).
    pub clock: Box<dyn Fn() -> DateTime<Utc> + Send + Sync>,
    permits: Arc<Semaphore>,
    queues: Vec<Queue>,
    receivers: Mutex<Option<Receivers>>,
    shared: Arc<Shared>,
    tracer: Option<Arc<Tracer>>,
}

impl App {
    /// Builds the app: parses every template now, so a bad template stops the start.
    pub fn new(settings: Settings, log: Logger, env: Lookup) -> Result<App, String> {
        let outputs = settings
            .channels
            .iter()
            .map(|c| ChannelOutput::new(c, &settings.time_format, Arc::clone(&env)))
            .collect::<Result<Vec<_>, _>>()?;
        let names: Vec<&'static str> = settings.channels.iter().map(|c| c.kind.name()).collect();
        let metrics = Arc::new(Metrics::new(&names));
        let log = Arc::new(log);
        let client = HttpClient::new()?;
        let tracer = settings.traces.clone().map(|t| Arc::new(Tracer::new(t)));
        let shared = Arc::new(Shared {
            grafana: settings
                .grafana
                .clone()
                .map(|g| grafana::Grafana::new(g, client.clone())),
            grafana_period: settings.grafana.as_ref().map_or(60, |g| g.period_minutes),
            client,
            metrics: Arc::clone(&metrics),
            log: Arc::clone(&log),
            tracer: tracer.clone(),
            delivery: settings.delivery.clone(),
        });
        let mut queues = Vec::new();
        let mut receivers = Vec::new();
        for c in &settings.channels {
            let (q, rx) = deliver::queue(c, settings.delivery.queue_size);
            queues.push(q);
            receivers.push((c.clone(), rx));
        }
        Ok(App {
            settings,
            outputs,
            log,
            stats: Stats::default(),
            metrics,
            clock: Box::new(now),
            permits: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            queues,
            receivers: Mutex::new(Some(receivers)),
            shared,
            tracer,
        })
    }

    /// Starts the delivery workers and the trace exporter (once; later calls do nothing).
    /// Needs a Tokio runtime.
    pub fn start(self: &Arc<Self>) {
        let Some(receivers) = self.receivers.lock().ok().and_then(|mut r| r.take()) else {
            return;
        };
        for (channel, rx) in receivers {
            tokio::spawn(deliver::run_worker(channel, rx, Arc::clone(&self.shared)));
        }
        if let Some(tracer) = self.tracer.clone() {
            let client = self.shared.client.clone();
            let log = Arc::clone(&self.log);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(tracer.interval());
                loop {
                    tick.tick().await;
                    if let Err(e) = tracer.flush(&client).await {
                        log.log(Level::Warn, &format!("trace export failed: {e}"), &[]);
                    }
                }
            });
        }
    }

    /// Messages rendered but not yet sent, failed or dropped, over all outputs.
    pub fn pending(&self) -> u64 {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        self.metrics
            .outputs
            .iter()
            .map(|(_, c)| {
                load(&c.rendered).saturating_sub(load(&c.sent) + load(&c.failed) + load(&c.dropped))
            })
            .sum()
    }

    /// Waits until every queued message is delivered or given up on, or `limit` passed;
    /// returns what is still pending. Spans are exported once more at the end.
    pub async fn drain(&self, limit: std::time::Duration) -> u64 {
        let deadline = tokio::time::Instant::now() + limit;
        // Renders still running hold permits; wait for them first.
        while self.permits.available_permits() < MAX_IN_FLIGHT
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        while self.pending() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        if let Some(t) = &self.tracer {
            let _ = t.flush(&self.shared.client).await;
        }
        self.pending()
    }

    /// Renders events for every output in the background; never waits.
    pub fn dispatch(
        self: &Arc<Self>,
        events: Vec<relay_templates::event::Event>,
        trace_id: Option<String>,
    ) {
        if events.is_empty() {
            return;
        }
        self.stats
            .received
            .fetch_add(events.len() as u64, Ordering::Relaxed);
        let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
            self.stats
                .dropped
                .fetch_add(events.len() as u64, Ordering::Relaxed);
            self.log
                .log(Level::Warn, "render queue full, events dropped", &[]);
            return;
        };
        let app = Arc::clone(self);
        let arrived = now();
        tokio::task::spawn_blocking(move || {
            app.render(&events, trace_id.as_deref(), arrived);
            drop(permit);
        });
    }

    fn render(
        &self,
        events: &[relay_templates::event::Event],
        trace_id: Option<&str>,
        arrived: DateTime<Utc>,
    ) {
        for event in events {
            let data = event.to_value();
            let kind = event.kind.as_str();
            let span = self.tracer.as_ref().map(|t| t.root(trace_id));
            let alert = (event.kind == relay_templates::event::EventType::Alertmanager)
                .then(|| Arc::new(AlertSlot::new(event.json["data"].clone())));
            for (out, queue) in self.outputs.iter().zip(&self.queues) {
                let counters = self.metrics.output(queue.name);
                let name = out.name();
                let selector_failed = |e: &str| {
                    self.log.log(
                        Level::Debug,
                        &format!("{name} selector failed, using the default URL: {e}"),
                        &[],
                    );
                };
                match out.deliveries(&data, &selector_failed) {
                    Ok(ds) => {
                        for d in ds {
                            self.stats.rendered.fetch_add(1, Ordering::Relaxed);
                            if let Some(c) = counters {
                                c.rendered.fetch_add(1, Ordering::Relaxed);
                            }
                            let target = redact(&d.target);
                            self.log.log(
                                Level::Info,
                                &d.message,
                                &[
                                    ("output", d.output),
                                    ("target", &target),
                                    ("event_type", kind),
                                ],
                            );
                            let job = Job {
                                target: d.target,
                                message: d.message,
                                event_type: kind,
                                alert: if out.kind().is_chat() {
                                    alert.clone()
                                } else {
                                    None
                                },
                                span: span.clone(),
                                queued: now(),
                            };
                            if !queue.push(job) {
                                if let Some(c) = counters {
                                    c.dropped.fetch_add(1, Ordering::Relaxed);
                                }
                                self.log.log(
                                    Level::Warn,
                                    &format!("{name}: queue full, message dropped"),
                                    &[("target", &target), ("event_type", kind)],
                                );
                            }
                        }
                    }
                    Err(Skip::Blank) => {
                        self.log.log(
                            Level::Debug,
                            &format!("{name}: message is empty, not sent"),
                            &[("event_type", kind)],
                        );
                    }
                    Err(Skip::NoTargets) => {
                        self.stats.failed.fetch_add(1, Ordering::Relaxed);
                        if let Some(c) = counters {
                            c.failed.fetch_add(1, Ordering::Relaxed);
                        }
                        self.log.log(
                            Level::Error,
                            &format!("{name}: URLs are not found"),
                            &[("event_type", kind)],
                        );
                    }
                    Err(Skip::Render(e)) => {
                        self.stats.failed.fetch_add(1, Ordering::Relaxed);
                        if let Some(c) = counters {
                            c.failed.fetch_add(1, Ordering::Relaxed);
                        }
                        self.log.log(
                            Level::Error,
                            &format!("{name}: {e}"),
                            &[("event_type", kind)],
                        );
                    }
                }
            }
            if let (Some(t), Some(s)) = (&self.tracer, &span) {
                let channel = event.json["channel"].as_str().unwrap_or("");
                t.finish(
                    s,
                    "event",
                    arrived,
                    now(),
                    &[("event_type", kind), ("channel", channel)],
                );
            }
        }
    }
}

/// The current time from the system clock (`chrono`'s clock feature is not needed).
pub fn now() -> DateTime<Utc> {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    DateTime::from_timestamp(d.as_secs() as i64, d.subsec_nanos()).unwrap_or_default()
}

/// Serves HTTP on `listener` until `shutdown` resolves.
pub async fn serve(app: Arc<App>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
    app.start();
    http::serve_http(app, listener, shutdown).await;
}
