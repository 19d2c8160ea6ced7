//! Sliding windows, token buckets and joint groups on Redis: one script call per group
//! decides every key of it and writes only what the group admits, as the memory store's
//! `decide_group` does under its locks. The keys of a joint group share a Cluster hash tag
//! (the limiter wraps the descriptor part in braces), so one script may touch them all.
//!
//! Lua holds numbers in doubles, exact only below 2^53, while the memory store decides
//! in `u64` (and the sliding window in `f64`). So that both decide alike for any input,
//! what does not depend on the stored value is computed here and passed ready:
//! - a sliding window gets its window's start and the previous one's as text (compared as
//!   text) and its weight as the shortest decimal of the very `f64` that
//!   [`ratelimit_core::algorithm::slide`] computes (parsed back to the same double); the
//!   script then does `current + previous * weight` and `estimate + hits <= limit` as
//!   `slide` does, on counts that never pass the limit (exact);
//! - a token bucket gets the latest TAT it admits at (`threshold`, see [`threshold`]) and
//!   the step an admitted request moves the TAT by; the script compares and adds TATs as
//!   decimal text, so no TAT is ever rounded.
//!
//! The script answers what the store's caller needs to rebuild each answer in Rust: a
//! fixed window's count, a sliding window's two counts (fed to `slide` here, the very
//! function the memory store answers with), a bucket's `tat_before`.

use ratelimit_core::algorithm::slide;
use ratelimit_core::{Increment, Op};

use super::commands::script_args;
use super::eval::{Args, Script};
use crate::redis_mux::Reply;

/// The group script. `KEYS`: the group's keys, in order. `ARGV`, per key, its kind and
/// arguments:
/// - `w hits ttl limit`: a fixed window, `INCRBY` + `EXPIRE` as `INCR_EXPIRE`; within its
///   limit when the count after is at most `limit`;
/// - `s hits ttl limit start before weight`: a sliding window; the key holds
///   `start:current:previous`;
/// - `b hits ttl now threshold step`: a token bucket; the key holds the TAT (µs).
///   `threshold` is `*` (always admitted) or `-` (never).
///
/// Sliding windows and buckets are written (`SET ... EX ttl`) only when every key of the
/// group is within its limit. Answers one line: per fixed window its count, per sliding
/// window `current previous`, per bucket its `tat_before`, separated by spaces.
pub const GROUP: &str = r#"-- ratelimit: one group of limits decided together
local MAX = '18446744073709551615'
local function le(a, b)
  return #a < #b or (#a == #b and a <= b)
end
local function digits(v)
  local d = v and string.match(v, '^0*(%d+)$')
  if d and le(d, MAX) then return d end
  return '0'
end
local function add(a, b)
  a = string.rep('0', 20 - #a) .. a
  b = string.rep('0', 20 - #b) .. b
  local lo = tonumber(string.sub(a, 11)) + tonumber(string.sub(b, 11))
  local carry = math.floor(lo / 1e10)
  local hi = tonumber(string.sub(a, 1, 10)) + tonumber(string.sub(b, 1, 10)) + carry
  if hi >= 1e10 then return MAX end
  local s = string.format('%010d%010d', hi, lo - carry * 1e10)
  if not le(s, MAX) then return MAX end
  return string.match(s, '^0*(%d+)$')
end
local out, writes, admitted, a = {}, {}, true, 1
for _, key in ipairs(KEYS) do
  local kind, hits, ttl = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2]
  if kind == 'w' then
    local n = redis.pcall('INCRBY', key, ARGV[a + 1])
    redis.call('EXPIRE', key, ttl)
    if type(n) == 'table' then
      if not string.find(n.err or '', 'overflow', 1, true) then return n end
      out[#out + 1] = '9223372036854775807'
      admitted = false
    else
      if n > 9007199254740992 then n = 9007199254740992 elseif n < 0 then n = 0 end
      out[#out + 1] = string.format('%d', n)
      admitted = admitted and n <= tonumber(ARGV[a + 3])
    end
    a = a + 4
  elseif kind == 's' then
    local start, before = ARGV[a + 4], ARGV[a + 5]
    local s, c, p = string.match(redis.call('GET', key) or '', '^(%d+):(%d+):(%d+)$')
    local cur, prev = 0, 0
    if s == start then
      cur, prev = tonumber(c), tonumber(p)
    elseif s == before then
      prev = tonumber(c)
    end
    local estimate = cur + prev * tonumber(ARGV[a + 6])
    admitted = admitted and estimate + hits <= tonumber(ARGV[a + 3])
    out[#out + 1] = string.format('%d %d', cur, prev)
    writes[#writes + 1] = {key, ttl, start, cur + hits, prev}
    a = a + 7
  elseif kind == 'b' then
    local now, threshold = ARGV[a + 3], ARGV[a + 4]
    local tat = digits(redis.call('GET', key))
    if le(tat, now) then tat = now end
    admitted = admitted and (threshold == '*' or (threshold ~= '-' and le(tat, threshold)))
    out[#out + 1] = tat
    writes[#writes + 1] = {key, ttl, tat, ARGV[a + 5]}
    a = a + 6
  else
    return redis.error_reply('ratelimit group script: unknown kind ' .. tostring(kind))
  end
end
if admitted then
  for _, w in ipairs(writes) do
    local v
    if w[5] then
      v = w[3] .. ':' .. string.format('%d', w[4]) .. ':' .. string.format('%d', w[5])
    else
      v = add(w[3], w[4])
    end
    redis.call('SET', w[1], v, 'EX', w[2])
  end
end
return table.concat(out, ' ')
"#;

/// The group script's SHA-1, checked against Redis's `SCRIPT LOAD` by a test.
pub const GROUP_SHA: &str = "d6d9328582a64d1c229a640f154e4ef98fcc6bc4";

pub(super) const GROUP_SCRIPT: Script = Script {
    body: GROUP,
    sha: GROUP_SHA,
};

/// Longest expiry set on a sliding window or a bucket: a century. Redis refuses an expiry
/// whose milliseconds overflow; no window or refill of a real rule comes near it.
const MAX_TTL: u64 = 100 * 365 * 86_400;

/// Whether `group` can go as upstream's fixed-window count (its own path, unchanged)
/// rather than through the group script.
#[inline]
pub(super) fn is_plain(group: &[&Increment]) -> bool {
    matches!(group, [inc] if matches!(inc.op, Op::Window { .. }))
}

/// Writes the `ARGV` of the group script for `group` (its `KEYS` are the keys in order).
pub(super) fn group_args(group: &[&Increment], args: &mut dyn Args) {
    for inc in group {
        let ttl = ttl(inc);
        match inc.op {
            Op::Window { .. } => {
                let [hits, _] = script_args(inc);
                args.text(b"w");
                args.int(hits as u64);
                args.int(ttl);
                args.int(inc.limit);
            }
            Op::Slide { window_us, now_us } => {
                let start = now_us - now_us % window_us;
                args.text(b"s");
                args.int(inc.hits);
                args.int(ttl);
                args.int(inc.limit);
                args.int(start);
                match start.checked_sub(window_us) {
                    Some(before) => args.int(before),
                    None => args.text(b""),
                }
                args.float(weight(window_us, now_us - start));
            }
            Op::Bucket {
                interval_us,
                now_us,
            } => {
                args.text(b"b");
                args.int(inc.hits);
                args.int(ttl);
                args.int(now_us);
                match threshold(inc.hits, inc.limit, interval_us, now_us) {
                    Threshold::Always => args.text(b"*"),
                    Threshold::Never => args.text(b"-"),
                    Threshold::Upto(t) => args.int(t),
                }
                args.int(inc.hits.saturating_mul(interval_us));
            }
        }
    }
}

/// The expiry set on a sliding window or a bucket.
pub(super) fn ttl(inc: &Increment) -> u64 {
    inc.ttl_seconds.clamp(1, MAX_TTL)
}

/// The previous window's weight, exactly as [`slide`] computes it.
pub(super) fn weight(window_us: u64, elapsed_us: u64) -> f64 {
    (window_us.saturating_sub(elapsed_us)) as f64 / window_us as f64
}

/// When a bucket admits a request, by its TAT before the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Threshold {
    Always,
    Never,
    /// Admitted when the TAT before (never before now) is at most this.
    Upto(u64),
}

/// [`ratelimit_core::algorithm::Bucket::take`]'s test as one comparison on the TAT.
/// `take` admits when `hits <= capacity` and `sat(tat + hits × interval) − now ≤
/// sat(capacity × interval)` (`sat`: saturating at `u64::MAX`). With `step = sat(hits ×
/// interval)` and `end = now + sat(capacity × interval)` counted without overflow: when
/// `end ≥ u64::MAX` every TAT passes; otherwise no sum saturates below `end`, and the test
/// is `tat ≤ end − step`.
fn threshold(hits: u64, capacity: u64, interval_us: u64, now_us: u64) -> Threshold {
    if hits > capacity {
        return Threshold::Never;
    }
    let step = u128::from(hits.saturating_mul(interval_us));
    let end = u128::from(now_us) + u128::from(capacity.saturating_mul(interval_us));
    if end >= u128::from(u64::MAX) {
        Threshold::Always
    } else if end < step {
        Threshold::Never
    } else {
        Threshold::Upto((end - step) as u64)
    }
}

/// Reads the script's answer line into one answer per increment of `group` (`out[i]` for
/// `group[i]`), each as the memory store answers it.
pub(super) fn answers(group: &[&Increment], reply: Reply, out: &mut [u64]) -> Result<(), String> {
    let Reply::Bulk(line) = reply else {
        return Err(format!("the group script answered {reply:?}"));
    };
    let bad = || {
        format!(
            "the group script answered {:?}",
            String::from_utf8_lossy(&line)
        )
    };
    let text = std::str::from_utf8(&line).map_err(|_| bad())?;
    let mut numbers = text.split(' ').map(str::parse::<u64>);
    let mut next = || numbers.next().and_then(Result::ok).ok_or_else(bad);
    for (inc, out) in group.iter().zip(out) {
        *out = match inc.op {
            Op::Window { .. } | Op::Bucket { .. } => next()?,
            Op::Slide { window_us, now_us } => {
                let (current, previous) = (next()?, next()?);
                let elapsed = now_us % window_us;
                slide(current, previous, elapsed, window_us, inc.hits, inc.limit).1
            }
        };
    }
    if numbers.next().is_some() {
        return Err(bad());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimit_core::algorithm::Bucket;

    /// The threshold decides as `take` does, at the edges of `u64` too.
    #[test]
    fn the_bucket_threshold_agrees_with_take() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let pick = |r: u64, small: u64| match r % 4 {
            0 => r % small,
            1 => u64::MAX - r % small,
            2 => r >> (r % 64),
            _ => r,
        };
        for _ in 0..200_000 {
            let interval = pick(rnd(), 1_000_000).max(1);
            let capacity = pick(rnd(), 100);
            let hits = if rnd() % 2 == 0 {
                rnd() % capacity.saturating_add(2)
            } else {
                pick(rnd(), 100)
            };
            let now = pick(rnd(), 1 << 53);
            let stored = match rnd() % 3 {
                0 => 0,
                1 => now
                    .saturating_add(rnd() % (interval.saturating_mul(capacity.saturating_add(1)))),
                _ => pick(rnd(), 1 << 60),
            };
            let b = Bucket {
                interval_us: interval,
                capacity,
                refill_seconds: 1,
            };
            // `take` itself overflows (`hits * interval`) only when the step saturates;
            // the threshold's test does not depend on it.
            let admitted = hits <= capacity
                && stored
                    .max(now)
                    .saturating_add(hits.saturating_mul(interval))
                    - now
                    <= capacity.saturating_mul(interval);
            if hits.checked_mul(interval).is_some() {
                assert_eq!(b.take(stored, now, hits).admitted, admitted);
            }
            let tat = stored.max(now);
            let by_threshold = match threshold(hits, capacity, interval, now) {
                Threshold::Always => true,
                Threshold::Never => false,
                Threshold::Upto(t) => tat <= t,
            };
            assert_eq!(
                by_threshold, admitted,
                "stored {stored} now {now} hits {hits} cap {capacity} interval {interval}"
            );
        }
    }

    #[test]
    fn the_weight_parses_back_to_the_same_double() {
        for (w, e) in [
            (1_000_000, 1),
            (3_000_000, 1_000_001),
            (7, 3),
            (86_400_000_000, 1),
        ] {
            let x = weight(w, e);
            assert_eq!(x.to_string().parse::<f64>().unwrap().to_bits(), x.to_bits());
        }
    }
}
