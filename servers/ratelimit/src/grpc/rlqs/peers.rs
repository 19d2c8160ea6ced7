//! Replicas of the server sharing RLQS budgets through Redis. Each replica publishes,
//! per limited bucket, its streams and their demand, and keeps the others' sums in a
//! local view that the engine reads as its [`Peers`]: every second for all its buckets,
//! and before it answers the first reports of new ones.
//!
//! When Redis cannot be reached the view keeps what it last saw (the budget stays split
//! as it was), and the failure is counted and logged at most once a minute.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ratelimit_backends::RedisStore;
use ratelimit_backends::redis::{ClaimCall, claim_key};
use ratelimit_core::quota::{BucketId, Claim, Elsewhere, Peers};

use crate::log::{self, Level};

/// A replica's claim counts while it is younger than this: a few missed seconds, then
/// a replica that went away stops holding part of the budget.
const STALE: Duration = Duration::from_secs(5);

/// An exchange that takes longer is abandoned; the view keeps what it had.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(1);

/// What the other replicas claim, per bucket this replica claims too.
#[derive(Default)]
pub struct View(HashMap<(String, BucketId), Elsewhere>);

impl Peers for View {
    fn elsewhere(&self, domain: &str, bucket: &BucketId) -> Elsewhere {
        // One lookup per limited bucket and tick; the tuple key needs owned parts.
        self.0
            .get(&(domain.to_owned(), bucket.clone()))
            .copied()
            .unwrap_or_default()
    }
}

/// This replica's link to the others.
pub struct RedisPeers {
    redis: Arc<RedisStore>,
    replica: String,
    view: Mutex<View>,
    /// Keys this replica published a claim under at the last full exchange.
    published: Mutex<HashSet<String>>,
    errors: Arc<AtomicU64>,
    last_logged: Mutex<Option<Instant>>,
}

impl RedisPeers {
    /// Shares through `redis`; `errors` counts failed exchanges.
    pub fn new(redis: Arc<RedisStore>, errors: Arc<AtomicU64>) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        RedisPeers {
            redis,
            replica: format!("{}-{nanos:x}", std::process::id()),
            view: Mutex::new(View::default()),
            published: Mutex::new(HashSet::new()),
            errors,
            last_logged: Mutex::new(None),
        }
    }

    /// The view, for the engine's ticks.
    pub fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes every claim (withdrawing those of buckets no longer claimed) and
    /// replaces the view with what the others claim.
    pub async fn exchange_all(&self, claims: Vec<Claim>) {
        let now: HashSet<String> = claims
            .iter()
            .map(|c| claim_key(&c.domain, &c.bucket))
            .collect();
        let gone: Vec<String> = {
            let mut published = self.published.lock().unwrap_or_else(|e| e.into_inner());
            let gone = published.difference(&now).cloned().collect();
            *published = now;
            gone
        };
        let withdrawals = gone.into_iter().map(|key| ClaimCall {
            key,
            here: Elsewhere::default(),
        });
        if let Some(view) = self.exchange(claims, withdrawals).await {
            *self.view() = View(view);
        }
    }

    /// Publishes the claims of new buckets and adds what the others claim to the view.
    pub async fn exchange_fresh(&self, claims: Vec<Claim>) {
        if claims.is_empty() {
            return;
        }
        {
            let mut published = self.published.lock().unwrap_or_else(|e| e.into_inner());
            published.extend(claims.iter().map(|c| claim_key(&c.domain, &c.bucket)));
        }
        if let Some(seen) = self.exchange(claims, std::iter::empty()).await {
            self.view().0.extend(seen);
        }
    }

    async fn exchange(
        &self,
        claims: Vec<Claim>,
        withdrawals: impl Iterator<Item = ClaimCall>,
    ) -> Option<HashMap<(String, BucketId), Elsewhere>> {
        let calls: Vec<ClaimCall> = claims
            .iter()
            .map(|c| ClaimCall {
                key: claim_key(&c.domain, &c.bucket),
                here: c.here,
            })
            .chain(withdrawals)
            .collect();
        let stale_ms = STALE.as_millis() as u64;
        let answer = tokio::time::timeout(
            EXCHANGE_TIMEOUT,
            self.redis.exchange_claims(&self.replica, &calls, stale_ms),
        )
        .await;
        let seen = match answer {
            Ok(Ok(seen)) => seen,
            Ok(Err(e)) => return self.failed(&e.to_string()),
            Err(_) => return self.failed("no answer within a second"),
        };
        Some(
            claims
                .into_iter()
                .zip(seen)
                .map(|(c, e)| ((c.domain, c.bucket), e))
                .collect(),
        )
    }

    fn failed<T>(&self, why: &str) -> Option<T> {
        self.errors.fetch_add(1, Relaxed);
        let mut last = self.last_logged.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
            *last = Some(Instant::now());
            log::log(
                Level::Warn,
                &format!(
                    "RLQS: cannot share quota claims through Redis ({why}); keeping the last view"
                ),
            );
        }
        None
    }
}
