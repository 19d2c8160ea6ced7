//! Request limits: `ratelimit-core` (our own limiter, embedded in-process) counts requests
//! per key and per address in one-minute windows; `trading_model::limits` turns "over the
//! limit" into 429 and, for callers that keep going, 418 with a doubling ban.
//!
//! Calls weigh what `trading_model::limits::weight` says (heavy endpoints use several
//! requests of the allowance, passed to the limiter as `hits_addend`). Signed calls of an
//! account that set a minimum spacing (`ratelimit_ms` in `user/settings`) are also refused
//! when they come closer than that after the key's previous admitted call. Everything here
//! is in memory: a restart forgets windows, spacing and bans.

use std::collections::HashMap;
use std::sync::Mutex;

use http::{HeaderName, HeaderValue};
use ratelimit_backends::MemoryStore;
use ratelimit_core::{Code, Descriptor, Limiter, Unit};
use trading_model::ApiError;
use trading_model::limits::{
    BanPolicy, Offender, Subject, Verdict, limit_error, spacing, spacing_error,
};

use crate::settings::Clock;

const DOMAIN: &str = "trading-api";

/// Every descriptor carries its own per-minute allowance (from the plan or the settings),
/// so the rules only need to name the two keys.
const RULES: &str = "domain: trading-api
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 60}
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 60}
";

/// Forget clean offenders once this many are remembered.
const PRUNE_AT: usize = 10_000;

struct SecondsClock(Clock);

impl ratelimit_core::Clock for SecondsClock {
    fn now(&self) -> u64 {
        (self.0)() / 1000
    }
}

pub(crate) struct Limits {
    limiter: Limiter<MemoryStore, SecondsClock>,
    policy: BanPolicy,
    offenders: Mutex<HashMap<String, Offender>>,
    /// Time of each key's last admitted signed call, for the spacing rule.
    last_call: Mutex<HashMap<String, u64>>,
}

/// What the limiter decided: an error answer (429/418) or nothing, plus headers for the
/// response either way.
pub(crate) struct Outcome {
    pub error: Option<ApiError>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

fn header(name: &'static str, value: String) -> Option<(HeaderName, HeaderValue)> {
    Some((
        HeaderName::from_static(name),
        HeaderValue::from_str(&value).ok()?,
    ))
}

impl Limits {
    pub(crate) fn new(clock: Clock) -> Result<Limits, String> {
        let limiter = Limiter::builder(MemoryStore::new(), SecondsClock(clock))
            .yaml("trading-api.yaml", RULES)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Limits {
            limiter,
            policy: BanPolicy::default(),
            offenders: Mutex::new(HashMap::new()),
            last_call: Mutex::new(HashMap::new()),
        })
    }

    /// Checks a signed call of `key`: its ban, then the spacing (`spacing_ms`, 0 for none),
    /// then the minute window, where the call counts `weight` requests.
    pub(crate) async fn check_key(
        &self,
        key: &str,
        per_minute: u32,
        spacing_ms: u64,
        weight: u32,
        now_ms: u64,
    ) -> Outcome {
        if spacing_ms > 0 {
            let id = format!("k:{key}");
            let banned = {
                let map = self.offenders.lock().unwrap_or_else(|p| p.into_inner());
                map.get(&id).and_then(|o| self.policy.banned(o, now_ms))
            };
            let early = {
                let last = self.last_call.lock().unwrap_or_else(|p| p.into_inner());
                spacing(last.get(key).copied(), spacing_ms, now_ms)
            };
            if let (None, Some(next)) = (banned, early) {
                let wait = next.saturating_sub(now_ms).div_ceil(1000).max(1);
                let verdict = {
                    let mut map = self.offenders.lock().unwrap_or_else(|p| p.into_inner());
                    let o = map.entry(id).or_default();
                    self.policy.judge(o, true, wait, now_ms)
                };
                let mut out = Outcome {
                    error: None,
                    headers: Vec::new(),
                };
                let secs = match verdict {
                    Verdict::Wait { retry_after_secs } => {
                        out.error = Some(spacing_error(next, spacing_ms));
                        retry_after_secs
                    }
                    Verdict::Banned { secs } => {
                        out.error = limit_error(verdict, Subject::Key, per_minute, now_ms);
                        secs
                    }
                    Verdict::Allow => 0,
                };
                out.headers.extend(header("retry-after", secs.to_string()));
                return out;
            }
        }
        let out = self
            .check(key, Subject::Key, per_minute, weight, now_ms)
            .await;
        if out.error.is_none() && spacing_ms > 0 {
            let mut last = self.last_call.lock().unwrap_or_else(|p| p.into_inner());
            if last.len() >= PRUNE_AT {
                last.retain(|_, t| now_ms.saturating_sub(*t) < 60_000);
            }
            last.insert(key.to_owned(), now_ms);
        }
        out
    }

    /// Counts one request of `identity`, weighing `weight`. `per_minute == 0` means
    /// unlimited.
    pub(crate) async fn check(
        &self,
        identity: &str,
        subject: Subject,
        per_minute: u32,
        weight: u32,
        now_ms: u64,
    ) -> Outcome {
        let mut out = Outcome {
            error: None,
            headers: Vec::new(),
        };
        if per_minute == 0 {
            return out;
        }
        let (key_name, tag) = match subject {
            Subject::Key => ("api_key", "k"),
            Subject::Address => ("remote_address", "a"),
        };
        let id = format!("{tag}:{identity}");
        let banned = {
            let map = self.offenders.lock().unwrap_or_else(|p| p.into_inner());
            map.get(&id).and_then(|o| self.policy.banned(o, now_ms))
        };
        let verdict = match banned {
            Some(v) => v,
            None => {
                let descriptor = Descriptor::new([(key_name, identity)])
                    .with_limit(per_minute, Unit::Minute)
                    .with_hits(u64::from(weight.max(1)));
                let req = ratelimit_core::Request::new(DOMAIN, vec![descriptor]);
                // The in-memory store cannot fail; if it ever did, serving beats refusing.
                let Ok(resp) = self.limiter.should_rate_limit(&req).await else {
                    return out;
                };
                let status = resp.statuses.first();
                let reset = status.and_then(|s| s.duration_until_reset).unwrap_or(60);
                let remaining = status.map_or(0, |s| s.limit_remaining);
                out.headers.extend(header(
                    "ratelimit-policy",
                    format!("\"minute\";q={per_minute};w=60"),
                ));
                out.headers.extend(header(
                    "ratelimit",
                    format!("\"minute\";r={remaining};t={reset}"),
                ));
                let over = resp.overall_code == Code::OverLimit;
                let mut map = self.offenders.lock().unwrap_or_else(|p| p.into_inner());
                if !over && !map.contains_key(&id) {
                    return out;
                }
                if map.len() >= PRUNE_AT {
                    map.retain(|_, o| !self.policy.forgettable(o, now_ms));
                }
                let o = map.entry(id).or_default();
                self.policy.judge(o, over, reset, now_ms)
            }
        };
        let retry = match verdict {
            Verdict::Allow => None,
            Verdict::Wait { retry_after_secs } => Some(retry_after_secs),
            Verdict::Banned { secs } => Some(secs),
        };
        if let Some(secs) = retry {
            out.headers.extend(header("retry-after", secs.to_string()));
        }
        out.error = limit_error(verdict, subject, per_minute, now_ms);
        out
    }
}
