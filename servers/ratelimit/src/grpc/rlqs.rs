//! `envoy.service.rate_limit_quota.v3.RateLimitQuotaService` on the gRPC port: each stream's
//! reports go into one shared [`QuotaEngine`] (the pure part, in `ratelimit-core`), and the
//! engine's actions go back out on the streams they are for. A ticker runs the engine once
//! a second, so assignments are refreshed, reassigned as demand moves, and idle buckets
//! abandoned even when no report arrives. It only translates; the engine decides.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ratelimit_core::RuleSet;
use ratelimit_core::quota::{
    Action, BucketId, NoPeers, QuotaEngine, QuotaSettings, Strategy, StreamId, Usage,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::app::App;
use crate::log::{self, Level};
use crate::pb::envoy::r#type::v3 as types;
use crate::pb::rlqs;
use rlqs::rate_limit_quota_response::{BucketAction, bucket_action};

type Reply = Result<rlqs::RateLimitQuotaResponse, Status>;

/// Messages waiting for a slow stream; beyond this, actions are dropped and the next
/// refresh sends them again.
const OUTBOX: usize = 64;

/// The RLQS service: one engine for every stream of the server.
#[derive(Clone)]
pub struct RlqsService(Arc<Hub>);

struct Hub {
    app: Arc<App>,
    started: Instant,
    next_stream: AtomicU64,
    state: Mutex<State>,
    counters: Arc<Counters>,
}

/// `ratelimit_server.RLQS.*` counters.
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
}

struct State {
    counters: Arc<Counters>,
    engine: QuotaEngine,
    /// The limiter's rules the engine was last given (compared by pointer).
    rules: Option<Arc<RuleSet>>,
    outboxes: HashMap<StreamId, mpsc::Sender<Reply>>,
}

impl RlqsService {
    /// A service deciding from `app`'s rules. Call [`RlqsService::spawn_ticker`] once.
    pub fn new(app: Arc<App>, settings: QuotaSettings) -> Self {
        let rules = app.limiter.rules();
        let engine = QuotaEngine::new(
            rules.clone().unwrap_or_else(|| Arc::new(RuleSet::empty())),
            settings,
        );
        let stats = app.limiter.stats();
        let counter = |name: &str| stats.counter(&format!("ratelimit_server.RLQS.{name}"));
        let counters = Arc::new(Counters {
            streams: counter("streams"),
            reports: counter("reports"),
            assignments: counter("assignments"),
            abandons: counter("abandons"),
            dropped: counter("dropped"),
        });
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
        }))
    }

    /// Runs the engine every second until the service is dropped.
    pub fn spawn_ticker(&self) {
        let hub = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(hub) = hub.upgrade() else { return };
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
        st.dispatch(now, false);
    }

    /// One message of a stream: its domain (first message) and usage reports.
    fn reports(
        &self,
        id: StreamId,
        client: Option<&str>,
        msg: rlqs::RateLimitQuotaUsageReports,
    ) -> Result<(), Status> {
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
        let usages: Vec<Usage> = msg
            .bucket_quota_usages
            .into_iter()
            .filter_map(|u| {
                let bucket: BucketId = u.bucket_id?.bucket.into_iter().collect();
                if bucket.is_empty() {
                    return None;
                }
                let elapsed_ms = u.time_elapsed.map_or(0, |d| {
                    u64::try_from(d.seconds).unwrap_or(0) * 1000
                        + u64::try_from(d.nanos).unwrap_or(0) / 1_000_000
                });
                Some(Usage {
                    bucket,
                    allowed: u.num_requests_allowed,
                    denied: u.num_requests_denied,
                    elapsed_ms,
                })
            })
            .collect();
        self.counters
            .reports
            .fetch_add(usages.len() as u64, Relaxed);
        st.engine.report(id, &usages, now);
        st.dispatch(now, true);
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
    fn dispatch(&mut self, now: u64, fresh: bool) {
        let decided = if fresh {
            self.engine.tick_fresh(now, &NoPeers)
        } else {
            self.engine.tick(now, &NoPeers)
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

/// An engine action as Envoy reads it.
pub fn action_to_pb(action: Action) -> BucketAction {
    match action {
        Action::Assign {
            bucket,
            strategy,
            ttl_secs,
        } => BucketAction {
            bucket_id: Some(bucket_to_pb(bucket)),
            bucket_action: Some(bucket_action::BucketAction::QuotaAssignmentAction(
                bucket_action::QuotaAssignmentAction {
                    assignment_time_to_live: Some(seconds(ttl_secs)),
                    rate_limit_strategy: Some(strategy_to_pb(strategy)),
                },
            )),
        },
        Action::Abandon { bucket } => BucketAction {
            bucket_id: Some(bucket_to_pb(bucket)),
            bucket_action: Some(bucket_action::BucketAction::AbandonAction(
                bucket_action::AbandonAction {},
            )),
        },
    }
}

fn bucket_to_pb(bucket: BucketId) -> rlqs::BucketId {
    rlqs::BucketId {
        bucket: bucket.into_iter().collect(),
    }
}

fn seconds(s: u64) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(s).unwrap_or(i64::MAX),
        nanos: 0,
    }
}

fn strategy_to_pb(strategy: Strategy) -> types::RateLimitStrategy {
    use types::rate_limit_strategy::{BlanketRule, Strategy as S};
    let s = match strategy {
        Strategy::AllowAll => S::BlanketRule(BlanketRule::AllowAll as i32),
        Strategy::DenyAll => S::BlanketRule(BlanketRule::DenyAll as i32),
        Strategy::TokenBucket(t) => S::TokenBucket(types::TokenBucket {
            max_tokens: t.max_tokens,
            tokens_per_fill: Some(t.tokens_per_fill),
            fill_interval: Some(seconds(t.fill_interval_secs)),
            name: String::new(),
        }),
    };
    types::RateLimitStrategy { strategy: Some(s) }
}

/// Ends the stream in the engine when its reader task ends, however it ends.
struct Ended(Arc<Hub>, StreamId);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.end(self.1);
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
        tokio::spawn(async move {
            let _ended = Ended(hub.clone(), id);
            loop {
                match inbound.message().await {
                    Ok(Some(msg)) => {
                        if let Err(status) = hub.reports(id, client.as_deref(), msg) {
                            let _ = tx.send(Err(status)).await;
                            return;
                        }
                    }
                    Ok(None) | Err(_) => return,
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
