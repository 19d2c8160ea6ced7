//! `envoy.service.rate_limit_quota.v3.RateLimitQuotaService` on the gRPC port: each stream's
//! reports go into one shared [`QuotaEngine`] (the pure part, in `ratelimit-core`), and the
//! engine's actions go back out on the streams they are for. A ticker runs the engine once
//! a second, so assignments are refreshed, reassigned as demand moves, and idle buckets
//! abandoned even when no report arrives. With a Redis store, replicas share each bucket's
//! budget through it (`rlqs/peers.rs`). It only translates; the engine decides.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ratelimit_core::RuleSet;
use ratelimit_core::quota::{Action, Claim, NoPeers, Peers, QuotaEngine, StreamId};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status, Streaming};

use crate::app::App;
use crate::log::{self, Level};
use crate::pb::rlqs;

mod peers;
mod wire;

use peers::RedisPeers;
pub use wire::{action_to_pb, usages};

type Reply = Result<rlqs::RateLimitQuotaResponse, Status>;

/// Messages waiting for a slow stream; beyond this, actions are dropped and the next
/// refresh sends them again.
const OUTBOX: usize = 64;

/// Envoy sends a stream's first report (with its domain) as it opens it; a stream still
/// silent after this long is ended, so that idle streams cannot pile up.
const FIRST_REPORT_WITHIN: Duration = Duration::from_secs(10);

/// The RLQS service: one engine for every stream of the server.
#[derive(Clone)]
pub struct RlqsService(Arc<Hub>);

struct Hub {
    app: Arc<App>,
    started: Instant,
    next_stream: AtomicU64,
    state: Mutex<State>,
    counters: Arc<Counters>,
    peers: Option<RedisPeers>,
    /// Flips when the server stops: every stream then ends with `UNAVAILABLE`, so that
    /// the connections drain at once and Envoy reconnects to another replica.
    shutdown: watch::Receiver<bool>,
}

/// `ratelimit_server.RLQS.*` counters and gauges.
struct Counters {
    /// Streams opened.
    streams: Arc<AtomicU64>,
    /// Bucket usage reports received.
    reports: Arc<AtomicU64>,
    /// Assignments sent.
    assignments: Arc<AtomicU64>,
    /// Abandons sent.
    abandons: Arc<AtomicU64>,
    /// Messages dropped on a full or closed outbox (the next refresh repeats them).
    dropped: Arc<AtomicU64>,
    /// Failed exchanges of claims with the other replicas.
    peer_errors: Arc<AtomicU64>,
    /// Gauge: streams connected, as of the last tick.
    active_streams: AtomicU64,
    /// Gauge: buckets tracked, as of the last tick.
    buckets: AtomicU64,
}

struct State {
    counters: Arc<Counters>,
    engine: QuotaEngine,
    /// The limiter's rules the engine was last given (compared by pointer).
    rules: Option<Arc<RuleSet>>,
    outboxes: HashMap<StreamId, mpsc::Sender<Reply>>,
}

impl RlqsService {
    /// A service deciding from `app`'s rules with `app.settings.rlqs`, sharing budgets
    /// through `app.quota_redis` when set, and ending its streams when `shutdown` flips.
    /// Call [`RlqsService::spawn_ticker`] once.
    pub fn new(app: Arc<App>, shutdown: watch::Receiver<bool>) -> Self {
        let rules = app.limiter.rules();
        let engine = QuotaEngine::new(
            rules.clone().unwrap_or_else(|| Arc::new(RuleSet::empty())),
            app.settings.rlqs.clone(),
        );
        let stats = app.limiter.stats();
        let counter = |name: &str| stats.counter(&format!("ratelimit_server.RLQS.{name}"));
        let counters = Arc::new(Counters {
            streams: counter("streams"),
            reports: counter("reports"),
            assignments: counter("assignments"),
            abandons: counter("abandons"),
            dropped: counter("dropped"),
            peer_errors: counter("peer_errors"),
            active_streams: AtomicU64::new(0),
            buckets: AtomicU64::new(0),
        });
        let gauges = counters.clone();
        app.metrics.add_gauges(move |out| {
            for (name, v) in [
                ("active_streams", &gauges.active_streams),
                ("buckets", &gauges.buckets),
            ] {
                out.push((format!("ratelimit_server.RLQS.{name}"), v.load(Relaxed)));
            }
        });
        let peers = app
            .quota_redis
            .clone()
            .map(|redis| RedisPeers::new(redis, counters.peer_errors.clone()));
        RlqsService(Arc::new(Hub {
            app,
            started: Instant::now(),
            next_stream: AtomicU64::new(1),
            counters: counters.clone(),
            state: Mutex::new(State {
                counters,
                engine,
                rules,
                outboxes: HashMap::new(),
            }),
            peers,
            shutdown,
        }))
    }

    /// Runs the engine every second until the service is dropped, after exchanging
    /// claims with the other replicas when they share through Redis.
    pub fn spawn_ticker(&self) {
        let hub = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(hub) = hub.upgrade() else { return };
                if let Some(peers) = &hub.peers {
                    let claims = hub.lock().engine.claims(hub.now_ms());
                    peers.exchange_all(claims).await;
                }
                hub.tick();
            }
        });
    }
}

impl Hub {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` with the view of the other replicas (none when alone).
    fn with_peers<T>(&self, f: impl FnOnce(&dyn Peers) -> T) -> T {
        match &self.peers {
            Some(p) => f(&*p.view()),
            None => f(&NoPeers),
        }
    }

    fn tick(&self) {
        let now = self.now_ms();
        let mut st = self.lock();
        let rules = self.app.limiter.rules();
        let changed = match (&rules, &st.rules) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
            (a, b) => a.is_some() != b.is_some(),
        };
        if changed {
            st.engine
                .set_rules(rules.clone().unwrap_or_else(|| Arc::new(RuleSet::empty())));
            st.rules = rules;
        }
        self.with_peers(|peers| st.dispatch(now, false, peers));
        let c = &self.counters;
        c.active_streams
            .store(st.engine.stream_count() as u64, Relaxed);
        c.buckets.store(st.engine.bucket_count() as u64, Relaxed);
    }

    /// Records one message of a stream: its domain (first message) and usage reports.
    /// Returns the claims of buckets it subscribed to, when replicas share budgets.
    fn record(
        &self,
        id: StreamId,
        client: Option<&str>,
        msg: rlqs::RateLimitQuotaUsageReports,
    ) -> Result<Vec<Claim>, Status> {
        let now = self.now_ms();
        let mut st = self.lock();
        if st.engine.domain(id).is_none() {
            if msg.domain.is_empty() {
                return Err(Status::invalid_argument(
                    "the first report of a stream must name its domain",
                ));
            }
            st.engine.connect(id, &msg.domain, client);
        }
        let usages = wire::usages(msg);
        self.counters
            .reports
            .fetch_add(usages.len() as u64, Relaxed);
        st.engine.report(id, &usages, now);
        Ok(match self.peers {
            Some(_) => st.engine.fresh_claims(now),
            None => Vec::new(),
        })
    }

    /// One message of a stream, answered: new buckets are assigned (after the other
    /// replicas' claims on them are known) and refused ones abandoned.
    async fn reports(
        &self,
        id: StreamId,
        client: Option<&str>,
        msg: rlqs::RateLimitQuotaUsageReports,
    ) -> Result<(), Status> {
        let fresh = self.record(id, client, msg)?;
        if let Some(peers) = &self.peers {
            peers.exchange_fresh(fresh).await;
        }
        let now = self.now_ms();
        let mut st = self.lock();
        self.with_peers(|peers| st.dispatch(now, true, peers));
        Ok(())
    }

    fn end(&self, id: StreamId) {
        let mut st = self.lock();
        st.engine.disconnect(id);
        st.outboxes.remove(&id);
    }
}

impl State {
    /// Runs the engine (for the buckets that gained a subscriber only, when `fresh`) and
    /// hands each stream its actions, in one message per stream.
    fn dispatch(&mut self, now: u64, fresh: bool, peers: &dyn Peers) {
        let decided = if fresh {
            self.engine.tick_fresh(now, peers)
        } else {
            self.engine.tick(now, peers)
        };
        for (id, actions) in decided {
            let Some(out) = self.outboxes.get(&id) else {
                continue;
            };
            let abandons = actions
                .iter()
                .filter(|a| matches!(a, Action::Abandon { .. }))
                .count() as u64;
            let assignments = actions.len() as u64 - abandons;
            let msg = rlqs::RateLimitQuotaResponse {
                bucket_action: actions.into_iter().map(action_to_pb).collect(),
            };
            if out.try_send(Ok(msg)).is_ok() {
                self.counters.assignments.fetch_add(assignments, Relaxed);
                self.counters.abandons.fetch_add(abandons, Relaxed);
            } else {
                self.counters.dropped.fetch_add(1, Relaxed);
                log::log(
                    Level::Debug,
                    &format!("RLQS stream {id}: outbox full or closed, actions dropped"),
                );
            }
        }
    }
}

/// Ends the stream in the engine when its reader task ends, however it ends.
struct Ended(Arc<Hub>, StreamId);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.end(self.1);
    }
}

/// What the peer is told when its stream cannot go on.
fn stream_error(status: Status) -> Status {
    match status.code() {
        // tonic reports undecodable messages as INTERNAL; the fault is the sender's.
        Code::Internal => {
            Status::invalid_argument(format!("malformed usage report: {}", status.message()))
        }
        _ => status,
    }
}

#[tonic::async_trait]
impl rlqs::rate_limit_quota_service_server::RateLimitQuotaService for RlqsService {
    type StreamRateLimitQuotasStream =
        Pin<Box<dyn tokio_stream::Stream<Item = Reply> + Send + 'static>>;

    async fn stream_rate_limit_quotas(
        &self,
        request: Request<Streaming<rlqs::RateLimitQuotaUsageReports>>,
    ) -> Result<Response<Self::StreamRateLimitQuotasStream>, Status> {
        // The peer's address names the Envoy, so that a reconnecting one gets back the
        // shares its previous stream held.
        let client = request
            .extensions()
            .get::<super::service::PeerIp>()
            .map(|p| p.0.to_string());
        let mut inbound = request.into_inner();
        let hub = self.0.clone();
        let id = hub.next_stream.fetch_add(1, Relaxed);
        hub.counters.streams.fetch_add(1, Relaxed);
        let (tx, rx) = mpsc::channel(OUTBOX);
        hub.lock().outboxes.insert(id, tx.clone());
        let mut shutdown = hub.shutdown.clone();
        tokio::spawn(async move {
            let _ended = Ended(hub.clone(), id);
            let stopping = || {
                Err(Status::unavailable(
                    "the server is shutting down; reconnect to another replica",
                ))
            };
            let first = tokio::select! {
                first = tokio::time::timeout(FIRST_REPORT_WITHIN, inbound.message()) => {
                    first.unwrap_or_else(|_| {
                        Err(Status::invalid_argument(format!(
                            "no usage report naming a domain within {}s",
                            FIRST_REPORT_WITHIN.as_secs()
                        )))
                    })
                }
                _ = shutdown.wait_for(|stop| *stop) => stopping(),
            };
            let mut next = Some(first);
            loop {
                let message = match next.take() {
                    Some(m) => m,
                    None => tokio::select! {
                        m = inbound.message() => m,
                        _ = shutdown.wait_for(|stop| *stop) => stopping(),
                    },
                };
                let outcome = match message {
                    Ok(Some(msg)) => hub.reports(id, client.as_deref(), msg).await,
                    Ok(None) => return,
                    Err(status) => Err(stream_error(status)),
                };
                if let Err(status) = outcome {
                    let _ = tx.send(Err(status)).await;
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
