//! What happens to callers that exceed their request allowance: first 429 with a wait,
//! then, for callers that keep going during the wait, 418 with a ban that doubles on every
//! repeat (2 minutes up to 3 days, the escalation Binance and 3Commas document).
//!
//! Counting requests is not done here (the server embeds `ratelimit-core` for that); this
//! module only turns "over the limit or not" into the answer, on times passed in.

use crate::errors::{ApiError, ErrorCode};

/// Ban lengths and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BanPolicy {
    /// Length of the first ban, in seconds.
    pub first_ban_secs: u64,
    /// Longest ban, in seconds.
    pub max_ban_secs: u64,
    /// A caller without violations for this long starts again from the first ban.
    pub forget_after_secs: u64,
}

impl Default for BanPolicy {
    fn default() -> BanPolicy {
        BanPolicy {
            first_ban_secs: 120,
            max_ban_secs: 3 * 24 * 3600,
            forget_after_secs: 24 * 3600,
        }
    }
}

/// Per-caller memory of past violations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offender {
    /// Until when the caller was told to wait after its last 429.
    pub retry_at_ms: u64,
    /// Bans so far (since the last time it was forgotten).
    pub bans: u32,
    /// End of the current ban.
    pub banned_until_ms: u64,
    /// Time of the last violation.
    pub last_violation_ms: u64,
}

/// Who is limited: an API key (code 1507) or an address (code 1508).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// An authenticated key.
    Key,
    /// An address (anonymous calls and failed authentication).
    Address,
}

/// The answer for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead.
    Allow,
    /// 429: wait this many seconds.
    Wait {
        /// Seconds until the window resets.
        retry_after_secs: u64,
    },
    /// 418: banned for this many more seconds.
    Banned {
        /// Seconds left of the ban.
        secs: u64,
    },
}

fn secs_until(later_ms: u64, now_ms: u64) -> u64 {
    later_ms.saturating_sub(now_ms).div_ceil(1000).max(1)
}

impl BanPolicy {
    /// Whether the caller is serving a ban; checked before counting, so banned calls do
    /// not touch the counters.
    pub fn banned(&self, o: &Offender, now_ms: u64) -> Option<Verdict> {
        (now_ms < o.banned_until_ms).then(|| Verdict::Banned {
            secs: secs_until(o.banned_until_ms, now_ms),
        })
    }

    /// Records the limiter's decision for a request that is not banned.
    ///
    /// ```
    /// use trading_model::limits::{BanPolicy, Offender, Verdict};
    /// let p = BanPolicy::default();
    /// let mut o = Offender::default();
    /// assert_eq!(p.judge(&mut o, false, 0, 0), Verdict::Allow);
    /// assert_eq!(p.judge(&mut o, true, 30, 1_000), Verdict::Wait { retry_after_secs: 30 });
    /// // Coming back during the wait earns a ban; the next one is twice as long.
    /// assert_eq!(p.judge(&mut o, true, 29, 2_000), Verdict::Banned { secs: 120 });
    /// ```
    pub fn judge(
        &self,
        o: &mut Offender,
        over_limit: bool,
        reset_secs: u64,
        now_ms: u64,
    ) -> Verdict {
        if !over_limit {
            return Verdict::Allow;
        }
        // The quiet period counts from the end of the last ban, so long bans do not reset
        // the escalation by themselves.
        let quiet_since = o.last_violation_ms.max(o.banned_until_ms);
        if quiet_since > 0 && now_ms.saturating_sub(quiet_since) > self.forget_after_secs * 1000 {
            o.bans = 0;
        }
        o.last_violation_ms = now_ms;
        if now_ms < o.retry_at_ms {
            o.bans = o.bans.saturating_add(1);
            let shift = (o.bans - 1).min(32);
            let secs = self
                .first_ban_secs
                .saturating_mul(1u64 << shift)
                .min(self.max_ban_secs);
            o.banned_until_ms = now_ms.saturating_add(secs * 1000);
            // Once the ban ends the caller starts with a fresh wait window.
            o.retry_at_ms = 0;
            return Verdict::Banned { secs };
        }
        let wait = reset_secs.max(1);
        o.retry_at_ms = now_ms.saturating_add(wait * 1000);
        Verdict::Wait {
            retry_after_secs: wait,
        }
    }

    /// Whether the memory of `o` can be dropped (no ban, no wait, nothing recent).
    pub fn forgettable(&self, o: &Offender, now_ms: u64) -> bool {
        now_ms >= o.banned_until_ms
            && now_ms >= o.retry_at_ms
            && now_ms.saturating_sub(o.last_violation_ms.max(o.banned_until_ms))
                > self.forget_after_secs * 1000
    }
}

/// The error answer for a verdict other than [`Verdict::Allow`], with the original's
/// message shapes. `per_minute` is the allowance that was exceeded.
pub fn limit_error(v: Verdict, subject: Subject, per_minute: u32, now_ms: u64) -> Option<ApiError> {
    match v {
        Verdict::Allow => None,
        Verdict::Wait { retry_after_secs } => Some(match subject {
            Subject::Key => ApiError::new(ErrorCode::RateLimitedAccount).with_message(format!(
                "Ratelimit. Next access allowable at {}. Limit set to {per_minute} requests per minute.",
                now_ms.saturating_add(retry_after_secs * 1000)
            )),
            Subject::Address => ApiError::new(ErrorCode::RateLimitedFirewall).with_message(format!(
                "Ratelimited. Please allow {retry_after_secs} second(s) before your next request."
            )),
        }),
        Verdict::Banned { secs } => Some(ApiError::new(ErrorCode::ExtendedBan).with_message(format!(
            "Ratelimited. Extended ban applied. Please allow {secs} second(s) before your next request."
        ))),
    }
}

/// Endpoints that cost more than one request of the minute allowance, and how many.
/// They read or compute much more than a page of records (order-book history, indicator
/// series, spread candles, export files); everything else weighs 1. Applies to keys and
/// to addresses alike.
pub const WEIGHTS: &[(&str, u32)] = &[
    ("backtesting/orderbook-data", 5),
    ("backtesting/technical-indicators", 5),
    ("export/request", 5),
    ("public/fetch-spread-data", 2),
];

/// How many requests of the minute allowance a call to `path` uses.
///
/// ```
/// use trading_model::limits::weight;
/// assert_eq!(weight("export/request"), 5);
/// assert_eq!(weight("system/timestamp"), 1);
/// ```
pub fn weight(path: &str) -> u32 {
    WEIGHTS
        .iter()
        .find(|(p, _)| *p == path)
        .map_or(1, |(_, w)| *w)
}

/// Whether a signed call at `now_ms` keeps the account's minimum spacing after its last
/// admitted call at `last_ms`: `None` if it does, else the time the next call is allowed.
pub fn spacing(last_ms: Option<u64>, spacing_ms: u64, now_ms: u64) -> Option<u64> {
    let next = last_ms?.saturating_add(spacing_ms);
    (spacing_ms > 0 && now_ms < next).then_some(next)
}

/// The 429 answer for a call that came before `next_ms` under a spacing of `spacing_ms`,
/// in the original's words.
pub fn spacing_error(next_ms: u64, spacing_ms: u64) -> ApiError {
    ApiError::new(ErrorCode::RateLimitedAccount).with_message(format!(
        "Ratelimit. Next access allowable at {next_ms}. Limit set to 1 request per {spacing_ms}ms"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spacing_and_weights() {
        assert_eq!(spacing(None, 1000, 5), None, "the first call is free");
        assert_eq!(spacing(Some(1_000), 1000, 1_999), Some(2_000));
        assert_eq!(spacing(Some(1_000), 1000, 2_000), None);
        assert_eq!(spacing(Some(1_000), 0, 1_000), None, "0 means no spacing");
        let e = spacing_error(2_000, 1000);
        assert_eq!((e.code.code(), e.status), (1507, 429));
        assert_eq!(
            e.message,
            "Ratelimit. Next access allowable at 2000. Limit set to 1 request per 1000ms"
        );
        assert_eq!(weight("backtesting/orderbook-data"), 5);
        assert_eq!(weight("public/fetch-spread-data"), 2);
        assert!(WEIGHTS.iter().all(|(_, w)| *w > 1));
    }

    #[test]
    fn bans_double_up_to_the_cap_and_are_forgotten() {
        let p = BanPolicy::default();
        let mut o = Offender::default();
        let mut now = 1_000_000u64;
        let mut bans = Vec::new();
        for _ in 0..14 {
            assert!(matches!(
                p.judge(&mut o, true, 10, now),
                Verdict::Wait { .. }
            ));
            match p.judge(&mut o, true, 9, now + 500) {
                Verdict::Banned { secs } => bans.push(secs),
                other => panic!("{other:?}"),
            }
            assert!(p.banned(&o, now + 600).is_some());
            now = o.banned_until_ms;
            assert_eq!(p.banned(&o, now), None, "ban over exactly at its end");
        }
        assert_eq!(&bans[..4], [120, 240, 480, 960]);
        assert_eq!(*bans.last().unwrap(), 3 * 24 * 3600);
        // A day without violations resets the escalation.
        now += 24 * 3600 * 1000 + 1;
        assert!(p.forgettable(&o, now));
        p.judge(&mut o, true, 10, now);
        assert_eq!(
            p.judge(&mut o, true, 10, now + 1),
            Verdict::Banned { secs: 120 }
        );
    }

    #[test]
    fn waiting_out_the_429_avoids_a_ban() {
        let p = BanPolicy::default();
        let mut o = Offender::default();
        assert_eq!(
            p.judge(&mut o, true, 5, 0),
            Verdict::Wait {
                retry_after_secs: 5
            }
        );
        assert_eq!(p.judge(&mut o, false, 0, 1_000), Verdict::Allow);
        assert_eq!(
            p.judge(&mut o, true, 5, 5_000),
            Verdict::Wait {
                retry_after_secs: 5
            }
        );
        assert_eq!(o.bans, 0);
    }

    #[test]
    fn messages_and_codes() {
        let e = limit_error(
            Verdict::Wait {
                retry_after_secs: 3,
            },
            Subject::Key,
            60,
            1_000,
        )
        .unwrap();
        assert_eq!((e.code.code(), e.status), (1507, 429));
        assert_eq!(
            e.message,
            "Ratelimit. Next access allowable at 4000. Limit set to 60 requests per minute."
        );
        let e = limit_error(
            Verdict::Wait {
                retry_after_secs: 3,
            },
            Subject::Address,
            60,
            0,
        )
        .unwrap();
        assert_eq!((e.code.code(), e.status), (1508, 429));
        let e = limit_error(Verdict::Banned { secs: 59 }, Subject::Key, 60, 0).unwrap();
        assert_eq!((e.code.code(), e.status), (1509, 418));
        assert_eq!(
            e.message,
            "Ratelimited. Extended ban applied. Please allow 59 second(s) before your next request."
        );
        assert!(limit_error(Verdict::Allow, Subject::Key, 60, 0).is_none());
    }
}
