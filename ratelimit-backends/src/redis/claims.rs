//! RLQS replicas sharing a bucket's budget through Redis: each replica publishes what it
//! claims of a bucket (its streams and their demand) and reads back the sum of the
//! others' claims, in one script call per bucket. A bucket's claims live in one hash,
//! one field per replica; a replica that stops publishing (it died, or lost its streams
//! without saying so) drops out once its claim is older than the caller's staleness
//! bound, and the whole hash expires when nobody publishes any more.
//!
//! Times are Redis's own (`TIME`), so replicas need no synchronised clocks.

use fred::bytes_utils::Str;
use fred::interfaces::LuaInterface;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use ratelimit_core::StoreError;
use ratelimit_core::quota::{BucketId, Elsewhere};

use super::{RedisStore, err};

/// Publishes a claim (or withdraws it: 0 streams) and sums the others' fresh claims.
/// `KEYS[1]` the bucket's hash; ARGV: replica, streams, demand, held, staleness (ms), key
/// TTL (ms). A claim of no streams and nothing held is a withdrawal.
pub const CLAIM: &str = r"local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(ARGV[2]) > 0 or tonumber(ARGV[4]) > 0 then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4] .. ' ' .. now)
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
else
  redis.call('HDEL', KEYS[1], ARGV[1])
end
local all = redis.call('HGETALL', KEYS[1])
local streams, demand, held = 0, 0, 0
for i = 1, #all, 2 do
  if all[i] ~= ARGV[1] then
    local s, d, h, at = string.match(all[i + 1], '^(%d+) (%d+) (%d+) (%d+)$')
    if s == nil or now - tonumber(at) > tonumber(ARGV[5]) then
      redis.call('HDEL', KEYS[1], all[i])
    else
      streams = streams + tonumber(s)
      demand = demand + tonumber(d)
      held = held + tonumber(h)
    end
  end
end
return {streams, demand, held}
";

/// SHA-1 of [`CLAIM`] (checked against `SCRIPT LOAD` by a test).
pub const CLAIM_SHA: &str = "c22b053b097c00ba22528e9d08b1b77961a667d2";

/// Lua counts in doubles: claims stay well inside their 53 exact bits even when summed.
const MAX_CLAIM: u64 = 1 << 40;

/// Script calls in flight at once for one exchange.
const IN_FLIGHT: usize = 64;

/// One bucket's claim as published: where, and how much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimCall {
    /// The bucket's hash ([`claim_key`]).
    pub key: String,
    /// What this replica claims; no streams and nothing held withdraws the claim.
    pub here: Elsewhere,
}

/// The hash holding a bucket's claims: `rlqs_<domain>_<name>=<value>&…` with `%`, `_`,
/// `&`, `=` and `{`/`}` in names and values percent-encoded, so that distinct buckets
/// never share a key and a bucket value cannot pick a Cluster hash slot.
pub fn claim_key(domain: &str, bucket: &BucketId) -> String {
    let mut key = String::with_capacity(8 + domain.len() + 16 * bucket.len());
    key.push_str("rlqs_");
    escape_into(&mut key, domain);
    key.push('_');
    for (i, (name, value)) in bucket.iter().enumerate() {
        if i > 0 {
            key.push('&');
        }
        escape_into(&mut key, name);
        key.push('=');
        escape_into(&mut key, value);
    }
    key
}

fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '%' | '_' | '&' | '=' | '{' | '}' => {
                out.push_str(&format!("%{:02X}", c as u32));
            }
            c => out.push(c),
        }
    }
}

impl RedisStore {
    /// Publishes `replica`'s claims and returns, for each call in order, what the other
    /// replicas claim of the same bucket (claims older than `stale_ms` left out and
    /// removed). The hashes expire `3 × stale_ms` after their last write. Calls go to the
    /// main instance, concurrently; the first failure is returned.
    pub async fn exchange_claims(
        &self,
        replica: &str,
        calls: &[ClaimCall],
        stale_ms: u64,
    ) -> Result<Vec<Elsewhere>, StoreError> {
        let ttl_ms = stale_ms.saturating_mul(3).max(1000);
        let mut out = vec![Elsewhere::default(); calls.len()];
        let mut waiting = calls.iter().enumerate();
        let mut pending = FuturesUnordered::new();
        for (i, call) in waiting.by_ref().take(IN_FLIGHT) {
            pending.push(self.claim(i, replica, call, stale_ms, ttl_ms));
        }
        while let Some((i, reply)) = pending.next().await {
            out[i] = reply?;
            if let Some((i, call)) = waiting.next() {
                pending.push(self.claim(i, replica, call, stale_ms, ttl_ms));
            }
        }
        Ok(out)
    }

    /// The `i`th call, answered with its index.
    async fn claim(
        &self,
        i: usize,
        replica: &str,
        call: &ClaimCall,
        stale_ms: u64,
        ttl_ms: u64,
    ) -> (usize, Result<Elsewhere, StoreError>) {
        (i, self.claim_one(replica, call, stale_ms, ttl_ms).await)
    }

    async fn claim_one(
        &self,
        replica: &str,
        call: &ClaimCall,
        stale_ms: u64,
        ttl_ms: u64,
    ) -> Result<Elsewhere, StoreError> {
        let args: Vec<String> = vec![
            replica.to_owned(),
            call.here.streams.min(MAX_CLAIM).to_string(),
            call.here.demand.min(MAX_CLAIM).to_string(),
            call.here.held.min(MAX_CLAIM).to_string(),
            stale_ms.to_string(),
            ttl_ms.to_string(),
        ];
        let client = self.main.pool.next();
        let key = call.key.as_str();
        let reply: Result<Vec<u64>, fred::error::Error> = match client
            .evalsha(Str::from_static(CLAIM_SHA), key, args.clone())
            .await
        {
            // NOSCRIPT: nothing ran; the script itself teaches Redis.
            Err(e) if e.details().starts_with("NOSCRIPT") => client.eval(CLAIM, key, args).await,
            r => r,
        };
        match reply.map_err(err)?.as_slice() {
            [streams, demand, held] => Ok(Elsewhere {
                streams: *streams,
                demand: *demand,
                held: *held,
            }),
            other => Err(StoreError::new(
                super::ERR,
                format!("claim script answered {other:?}"),
            )),
        }
    }
}
