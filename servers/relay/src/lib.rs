//! The `event-relay` server: a thin shell around `relay-templates`.
//!
//! It listens for admission reviews and Alertmanager notifications on the configured
//! paths, answers at once (an admission review is always allowed, so the relay can never
//! block a cluster), and renders each event for every configured channel in the
//! background. Rendered messages go to stdout as records.
//!
//! What it deliberately does not do here: template semantics and input decoding (both in
//! `relay-templates`). Not built yet: the chat senders (Telegram, Slack, Workplace),
//! Grafana images, NATS and collector outputs, metrics and traces.
//!
//! [`serve`] runs until a shutdown future resolves, so tests run it on `127.0.0.1:0`.
#![forbid(unsafe_code)]

pub mod http;
pub mod log;
pub mod outputs;
pub mod settings;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use relay_templates::relay::Lookup;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::log::{Level, Logger};
use crate::outputs::{ChannelOutput, Skip, redact};
pub use crate::settings::Settings;

/// Counters (exposed on `/healthz` for now; Prometheus comes with the metrics item).
#[derive(Default, Debug)]
pub struct Stats {
    /// Events decoded from requests.
    pub received: AtomicU64,
    /// Messages rendered and handed to an output.
    pub rendered: AtomicU64,
    /// Messages that failed to render.
    pub failed: AtomicU64,
    /// Events dropped because too many were already being rendered.
    pub dropped: AtomicU64,
}

/// Events rendered at the same time, at most; more are dropped (and counted) so a burst
/// cannot queue unbounded work behind the HTTP answers.
pub const MAX_IN_FLIGHT: usize = 256;

/// Everything a request handler needs.
pub struct App {
    /// Settings the relay started with.
    pub settings: Settings,
    /// Enabled channels.
    pub outputs: Vec<ChannelOutput>,
    /// stdout records.
    pub log: Logger,
    /// Counters.
    pub stats: Stats,
    /// Receive time of an event (a function so tests can pin it).
    pub clock: Box<dyn Fn() -> DateTime<Utc> + Send + Sync>,
    permits: Arc<Semaphore>,
}

impl App {
    /// Builds the app: parses every template now, so a bad template stops the start.
    pub fn new(settings: Settings, log: Logger, env: Lookup) -> Result<App, String> {
        let outputs = settings
            .channels
            .iter()
            .map(|c| ChannelOutput::new(c, &settings.time_format, Arc::clone(&env)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(App {
            settings,
            outputs,
            log,
            stats: Stats::default(),
            clock: Box::new(now),
            permits: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
        })
    }

    /// Renders events for every output in the background; never waits.
    pub fn dispatch(self: &Arc<Self>, events: Vec<relay_templates::event::Event>) {
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
        tokio::task::spawn_blocking(move || {
            app.render(&events);
            drop(permit);
        });
    }

    fn render(&self, events: &[relay_templates::event::Event]) {
        for event in events {
            let data = event.to_value();
            let kind = event.kind.as_str();
            for out in &self.outputs {
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
                        self.log.log(
                            Level::Error,
                            &format!("{name}: URLs are not found"),
                            &[("event_type", kind)],
                        );
                    }
                    Err(Skip::Render(e)) => {
                        self.stats.failed.fetch_add(1, Ordering::Relaxed);
                        self.log.log(
                            Level::Error,
                            &format!("{name}: {e}"),
                            &[("event_type", kind)],
                        );
                    }
                }
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
    http::serve_http(app, listener, shutdown).await;
}
