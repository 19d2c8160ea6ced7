//! A sliding window or a token bucket alone in its group (one limit per descriptor, the
//! common case) gets a script of its own: a `GET`, plain arithmetic on Lua's doubles and a
//! `SET` when admitted. Through the group script's decimal-text arithmetic a decision cost
//! Redis 80k (bucket) and 68k (sliding window) instructions; through these, 38k and 47k
//! (`benches/callgrind-redis.sh`, docs/benchmarks.md).
//!
//! Each answers exactly as the memory store's `decide_state` does, and reads and writes
//! the group script's values (a bucket's TAT in µs as decimal text, a sliding window's
//! `start:current:previous`), so a key may meet either script, as when a rule's lone limit
//! becomes one of a `rate_limits` list.

use ratelimit_core::algorithm::slide;
use ratelimit_core::{Increment, Op};

use super::eval::{Args, Script};
use super::scripts::{ttl, weight};
use crate::redis_mux::Reply;

/// A lone token bucket. `KEYS[1]`: the bucket. `ARGV`: `now ttl fresh end`.
///
/// `Bucket::take` as one comparison: a request moves the TAT before (the stored one, never
/// before `now`) by `step`, and is admitted when that lands at most at `end`, `now +
/// capacity × interval` (then written with `EX ttl`). `fresh` is `now + step`, the TAT
/// written when the bucket is full, or empty when the request can never be admitted;
/// `step` is `fresh - now`. The caller passes a bucket only when `end < 2^53` (`lone`),
/// so every TAT compared or written is an integer exact in a double. Every argument costs
/// Redis about as much as a few Lua operations, hence no separate `step`.
///
/// Usually the stored TAT is not ahead of `now` (a bucket that is not being drained): a
/// decimal no longer than `now`'s and not above it as text. Then the TAT before is `now`
/// and `fresh` is the answer, without arithmetic. A value that is no decimal at all
/// (garbage) also counts as `now`, as in the group script, and so does a decimal past
/// `u64::MAX`; one past 2^53 is past `end`, so denied.
///
/// Answers the stored value as it was (empty for none), which the caller reads as the
/// group script does, taking the larger of it and `now`.
pub const LONE_BUCKET: &str = r#"-- ratelimit: a token bucket alone in its group
local v, now, fresh = redis.call('GET', KEYS[1]), ARGV[1], ARGV[3]
if not v or #v < #now or (#v == #now and v <= now) then
  if fresh ~= '' then
    redis.call('SET', KEYS[1], fresh, 'EX', ARGV[2])
  end
  return v or ''
end
if fresh == '' then return v end
local tat = now + 0
if string.find(v, '^%d+$') then
  local t = v + 0
  if t >= 9007199254740992 then
    local d = string.match(v, '^0*(%d+)$')
    if #d > 20 or (#d == 20 and d > '18446744073709551615') then t = 0 end
  end
  if t > tat then tat = t end
end
local after = tat + (fresh - now)
if after <= ARGV[4] + 0 then
  redis.call('SET', KEYS[1], string.format('%.0f', after), 'EX', ARGV[2])
end
return v
"#;

/// [`LONE_BUCKET`]'s SHA-1.
pub const LONE_BUCKET_SHA: &str = "b84f8a31fa0e85e2a382b66781022020513b3d61";

/// A lone sliding window. `KEYS[1]`: the window. `ARGV`: `start before weight hits limit
/// ttl`, as the group script's `s` (the same text for `start` and `before`, the same
/// weight, the same arithmetic); the previous window's count is written back as the
/// text it was. Answers the stored value as it was (empty for none), from which the
/// caller reads the two counts as the script did and answers with [`slide`].
///
/// Both scripts turn text into numbers by arithmetic (`c + 0`): the very conversion
/// `tonumber` makes, without a function call, which costs Redis about a thousand
/// instructions each (callgrind).
pub const LONE_SLIDE: &str = r#"-- ratelimit: a sliding window alone in its group
local v = redis.call('GET', KEYS[1]) or ''
local s, c, p = string.match(v, '^(%d+):(%d+):(%d+)$')
local cur, prev, keep = 0, 0, '0'
if s == ARGV[1] then
  cur, prev, keep = c + 0, p + 0, p
elseif s == ARGV[2] then
  prev, keep = c + 0, c
end
local hits = ARGV[4] + 0
if cur + prev * ARGV[3] + hits <= ARGV[5] + 0 then
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. string.format('%d', cur + hits) .. ':' ..
    keep, 'EX', ARGV[6])
end
return v
"#;

/// [`LONE_SLIDE`]'s SHA-1.
pub const LONE_SLIDE_SHA: &str = "8a04e327b6bb6beb99b83f997d22f2cccd9044c2";

const BUCKET: Script = Script {
    body: LONE_BUCKET,
    sha: LONE_BUCKET_SHA,
};

const SLIDE: Script = Script {
    body: LONE_SLIDE,
    sha: LONE_SLIDE_SHA,
};

/// Integers below this are exact in a double.
const EXACT: u64 = 1 << 53;

/// A lone increment's script call, its arguments ready.
#[derive(Debug, Clone, Copy)]
pub(super) enum Lone {
    Slide {
        start: u64,
        before: Option<u64>,
        weight: f64,
    },
    Bucket {
        now: u64,
        /// The TAT an admitted request may move to at most.
        end: u64,
        /// How far an admitted request moves the TAT; `None`: never admitted.
        step: Option<u64>,
    },
}

/// The lone script for `group`, when it is one sliding window or one token bucket whose
/// TATs all stay exact in doubles (a bucket of `interval × capacity` up to
/// `Bucket::MAX_SPAN_US`, as the limiter makes every bucket, at today's clock). Anything
/// else goes through the group script.
pub(super) fn lone(group: &[&Increment]) -> Option<Lone> {
    let [inc] = group else { return None };
    match inc.op {
        Op::Window { .. } => None,
        Op::Slide { window_us, now_us } => {
            let start = now_us - now_us % window_us;
            Some(Lone::Slide {
                start,
                before: start.checked_sub(window_us),
                weight: weight(window_us, now_us - start),
            })
        }
        Op::Bucket {
            interval_us,
            now_us,
        } => {
            let span = inc.limit.checked_mul(interval_us)?;
            let end = now_us.checked_add(span).filter(|&e| e < EXACT)?;
            // `Bucket::take`: admitted when `hits <= capacity` and `tat + step - now <=
            // span`, i.e. `tat + step <= end`; `step <= span`, so no overflow.
            let step = (inc.hits <= inc.limit).then(|| inc.hits * interval_us);
            Some(Lone::Bucket {
                now: now_us,
                end,
                step,
            })
        }
    }
}

impl Lone {
    pub(super) fn script(&self) -> &'static Script {
        match self {
            Lone::Slide { .. } => &SLIDE,
            Lone::Bucket { .. } => &BUCKET,
        }
    }

    /// Writes the script's `ARGV` for `inc`.
    pub(super) fn args(&self, inc: &Increment, args: &mut dyn Args) {
        match *self {
            Lone::Slide {
                start,
                before,
                weight,
            } => {
                args.int(start);
                match before {
                    Some(b) => args.int(b),
                    None => args.text(b""),
                }
                args.float(weight);
                args.int(inc.hits);
                args.int(inc.limit);
                args.int(ttl(inc));
            }
            Lone::Bucket { now, end, step } => {
                args.int(now);
                args.int(ttl(inc));
                match step {
                    Some(step) => args.int(now + step),
                    None => args.text(b""),
                }
                args.int(end);
            }
        }
    }

    /// The store's answer for `inc` from the script's reply (the stored value as it was),
    /// as the memory store answers.
    pub(super) fn answer(&self, inc: &Increment, reply: Reply) -> Result<u64, String> {
        let Reply::Bulk(stored) = reply else {
            return Err(format!("the lone {self:?} script answered {reply:?}"));
        };
        match (*self, inc.op) {
            (Lone::Bucket { now, .. }, _) => Ok(stored_tat(&stored).max(now)),
            (Lone::Slide { start, before, .. }, Op::Slide { window_us, now_us }) => {
                let (current, previous) =
                    stored_counts(&stored, start, before).ok_or_else(|| {
                        format!(
                            "the lone sliding window script read {:?}",
                            String::from_utf8_lossy(&stored)
                        )
                    })?;
                let elapsed = now_us - start;
                Ok(slide(current, previous, elapsed, window_us, inc.hits, inc.limit).1)
            }
            _ => Err(format!("the lone {self:?} script is no {:?}", inc.op)),
        }
    }
}

/// Whether `s` is what Lua's `%d+` matches: one or more ASCII digits.
fn digits(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(u8::is_ascii_digit)
}

/// A stored TAT as the scripts read it: a decimal (leading zeros allowed) up to
/// `u64::MAX`; anything else is none (0).
fn stored_tat(v: &[u8]) -> u64 {
    if !digits(v) {
        return 0;
    }
    std::str::from_utf8(v)
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0)
}

/// A stored sliding window's counts as the scripts read them (`start:current:previous`,
/// each `%d+`): this window's, the previous one's. `None` for counts past `u64::MAX`,
/// which the scripts hold as doubles and no `u64` can.
fn stored_counts(v: &[u8], start: u64, before: Option<u64>) -> Option<(u64, u64)> {
    let mut parts = v.split(|&b| b == b':');
    let (Some(s), Some(c), Some(p), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Some((0, 0));
    };
    if !(digits(s) && digits(c) && digits(p)) {
        return Some((0, 0));
    }
    let number = |d: &[u8]| std::str::from_utf8(d).ok()?.parse::<u64>().ok();
    let is = |at: u64| s == itoa::Buffer::new().format(at).as_bytes();
    if is(start) {
        Some((number(c)?, number(p)?))
    } else if before.is_some_and(is) {
        Some((0, number(c)?))
    } else {
        Some((0, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimit_core::Unit;
    use ratelimit_core::algorithm::Bucket;

    fn bucket(hits: u64, capacity: u64, interval_us: u64, now_us: u64) -> Increment {
        Increment {
            limit: capacity,
            op: Op::Bucket {
                interval_us,
                now_us,
            },
            ..Increment::window("k", hits, Unit::Second, 10)
        }
    }

    /// The bucket's `end` and `step` decide as `take` does, for every TAT up to 2^53.
    #[test]
    fn the_lone_bucket_decides_as_take() {
        let now = 1_780_000_000_000_000;
        for (capacity, interval) in [(0, 1), (1, 1), (4, 100_000), (10, 333_334), (3, 1 << 50)] {
            for hits in 0..=capacity + 1 {
                let inc = bucket(hits, capacity, interval, now);
                let Some(Lone::Bucket { end, step, .. }) = lone(&[&inc]) else {
                    panic!("{capacity} x {interval} is lone");
                };
                let b = Bucket {
                    interval_us: interval,
                    capacity,
                    refill_seconds: 1,
                };
                let span = capacity * interval;
                // The script's common case, a TAT not ahead of `now`: admitted exactly
                // when there is a step.
                assert_eq!(step.is_some(), b.take(now, now, hits).admitted);
                for stored in [0, now - 1, now, now + 1, now + span / 2, now + span, EXACT] {
                    let take = b.take(stored, now, hits);
                    let after = step.map(|s| stored.max(now) + s);
                    assert_eq!(after.is_some_and(|a| a <= end), take.admitted);
                    if take.admitted {
                        assert_eq!(after, Some(take.tat_after));
                        assert!(take.tat_after < EXACT);
                    }
                }
            }
        }
    }

    /// A bucket whose TATs could pass 2^53 goes to the group script.
    #[test]
    fn slow_buckets_are_not_lone() {
        let now = 1_780_000_000_000_000;
        assert!(lone(&[&bucket(1, 1 << 30, 1 << 40, now)]).is_none());
        assert!(lone(&[&bucket(1, 2, u64::MAX / 2, now)]).is_none());
        assert!(lone(&[&bucket(1, 1, 1, EXACT)]).is_none());
        assert!(lone(&[&bucket(1, 1 << 12, 1 << 40, now)]).is_some());
        let w = Increment::window("k", 1, Unit::Second, 1);
        assert!(lone(&[&w]).is_none());
    }

    /// Stored values read as the scripts read them (`%d+`, no sign, no space).
    #[test]
    fn stored_values_read_as_lua_reads_them() {
        assert_eq!(stored_tat(b"0001795706320000000"), 1_795_706_320_000_000);
        assert_eq!(stored_tat(b"18446744073709551615"), u64::MAX);
        for none in [
            &b""[..],
            b"18446744073709551616",
            b"-5",
            b" 5",
            b"1e15",
            b"0x10",
        ] {
            assert_eq!(stored_tat(none), 0, "{none:?}");
        }
        let (start, before) = (6_000_000, Some(3_000_000));
        let counts = |v: &[u8]| stored_counts(v, start, before);
        assert_eq!(counts(b"6000000:4:2"), Some((4, 2)));
        assert_eq!(counts(b"3000000:4:2"), Some((0, 4)));
        assert_eq!(counts(b"0006000000:4:2"), Some((0, 0)));
        for none in [
            &b""[..],
            b"6000000:4",
            b"6000000:4:2:1",
            b"6000000:-4:2",
            b"x:1:2",
        ] {
            assert_eq!(counts(none), Some((0, 0)), "{none:?}");
        }
        assert_eq!(counts(b"6000000:18446744073709551616:2"), None);
        assert_eq!(stored_counts(b"0:1:2", 0, None), Some((1, 2)));
    }
}
