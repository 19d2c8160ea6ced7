//! How one descriptor is counted on Redis: the script, the command pair, and the
//! replies they give.

use super::Instance;
use crate::redis_mux::{self, Mux, Reply};
use fred::interfaces::LuaInterface;
use fred::prelude::*;
use ratelimit_core::store::groups;
use ratelimit_core::{Increment, MAX_HITS, StoreError, Unit};

/// How the store counts one descriptor: upstream's `INCRBY` + `EXPIRE` as one script, which
/// returns the count after the increment. Like the pipelined pair, `EXPIRE` runs even when
/// `INCRBY` is refused, and the refusal is the reply. Lua holds the count in a double, which
/// past 2^53 may round up to 2^63 and come back as a negative integer: the reply stops at
/// 2^53, exact and over any limit.
pub const INCR_EXPIRE: &str = "local n = redis.pcall('INCRBY', KEYS[1], ARGV[1]) \
                           redis.call('EXPIRE', KEYS[1], ARGV[2]) \
                           if type(n) == 'number' and n > 9007199254740992 then \
                           n = 9007199254740992 end return n";

/// The script's SHA-1, by which it is called once Redis knows it (a test has Redis check
/// it: `SCRIPT LOAD` answers the same digest).
pub const INCR_EXPIRE_SHA: &str = "704ebbc201c7cebb07609dab16768ed59a66a6be";

/// `ARGV` of the script: the hits and the TTL (Redis integers are signed). Hits stop at
/// [`MAX_HITS`], so that even a caller other than the limiter leaves a counter that can be
/// counted on (one addend of `i64::MAX` would leave it at the top).
pub(super) fn script_args(inc: &Increment) -> [i64; 2] {
    let ttl = i64::try_from(inc.ttl_seconds).unwrap_or(i64::MAX);
    [inc.hits.min(MAX_HITS) as i64, ttl]
}

/// Whether an error answer is Redis refusing an increment past `i64::MAX`.
pub(super) fn overflowed(message: &str) -> bool {
    message.contains("increment or decrement would overflow")
}

/// Whether an error answer says the script was not run because scripting is unavailable:
/// an unknown command (renamed away, or a proxy that lacks it) or an ACL refusal.
pub(super) fn refuses_scripts(message: &str) -> bool {
    message.starts_with("ERR unknown command") || message.starts_with("NOPERM")
}

/// A counting reply: the count, or why there is none.
pub(super) fn int_reply(reply: Reply) -> Result<i64, Error> {
    match reply {
        Reply::Int(n) => Ok(n),
        Reply::Error(e) => Err(Error::new(fred::error::ErrorKind::Unknown, e)),
        Reply::Bulk(_) | Reply::Other => Err(Error::new(
            fred::error::ErrorKind::Protocol,
            "a counting command answered something other than an integer",
        )),
    }
}

pub(super) fn io_error(e: String) -> Error {
    Error::new(fred::error::ErrorKind::IO, e)
}

/// Upstream's own `INCRBY` + `EXPIRE`, for a Redis that refuses scripts.
pub(super) async fn incr_then_expire(client: &Client, inc: &Increment) -> Result<i64, Error> {
    let [hits, ttl] = script_args(inc);
    let key = inc.key.as_str();
    let pipe = client.pipeline();
    let _: () = pipe.incr_by(key, hits).await?;
    let _: () = pipe.expire(key, ttl, None).await?;
    let (n, _): (i64, i64) = pipe.all().await?;
    Ok(n)
}

/// [`incr_then_expire`] over our own connection, as one call of two commands: they leave
/// in one write and their two replies wake the caller once. Redis runs two cheap commands
/// instead of a script (about 0.6x the Redis CPU per decision, docs/stores.md), and its
/// command stream is upstream's own.
pub(super) async fn incr_then_expire_mux(mux: &Mux, inc: &Increment) -> Result<i64, Error> {
    let [hits, ttl] = script_args(inc);
    let (mut hits_buf, mut ttl_buf) = (itoa::Buffer::new(), itoa::Buffer::new());
    let key = inc.key.as_bytes();
    let mut frame = Vec::with_capacity(96 + 2 * key.len());
    redis_mux::encode(
        &mut frame,
        &[b"INCRBY", key, hits_buf.format(hits).as_bytes()],
    );
    redis_mux::encode(
        &mut frame,
        &[b"EXPIRE", key, ttl_buf.format(ttl).as_bytes()],
    );
    int_reply(mux.call_many(frame, 2).await.map_err(io_error)?)
}

/// One increment: `EVALSHA`, or `EVAL` when this Redis does not know the script yet (a
/// fresh or restarted server, a failover, `SCRIPT FLUSH`), which also teaches it.
pub(super) async fn incr_expire(client: &Client, inc: &Increment) -> Result<i64, Error> {
    let args = script_args(inc);
    let key = inc.key.as_str();
    match client
        .evalsha::<i64, _, _, _>(
            fred::bytes_utils::Str::from_static(INCR_EXPIRE_SHA),
            key,
            args.to_vec(),
        )
        .await
    {
        // NOSCRIPT means nothing ran, so sending the script itself cannot count twice.
        Err(e) if e.details().starts_with("NOSCRIPT") => {
            client.eval(INCR_EXPIRE, key, args.to_vec()).await
        }
        r => r,
    }
}

/// `REDIS_PERSECOND`: SECOND limits counted on the per-second instance, the rest on the
/// main one, both at once. A joint group stays whole, for its one atomic step: on the
/// per-second instance only when all its limits are SECOND ones.
pub(super) async fn split_increment(
    main: &Instance,
    per_second: &Instance,
    batch: &[Increment],
    counts: &mut [u64],
) -> Result<(), StoreError> {
    let (mut sec, mut rest) = (Vec::new(), Vec::new());
    for g in groups(batch) {
        let to = if batch[g.clone()].iter().all(|i| i.unit == Unit::Second) {
            &mut sec
        } else {
            &mut rest
        };
        to.extend(g);
    }
    let rest_items: Vec<&Increment> = rest.iter().map(|&i| &batch[i]).collect();
    let sec_items: Vec<&Increment> = sec.iter().map(|&i| &batch[i]).collect();
    let mut rest_counts = vec![0; rest_items.len()];
    let mut sec_counts = vec![0; sec_items.len()];
    let (a, b) = tokio::join!(
        async {
            if rest_items.is_empty() {
                Ok(())
            } else {
                main.increment(&rest_items, &mut rest_counts).await
            }
        },
        async {
            if sec_items.is_empty() {
                Ok(())
            } else {
                per_second.increment(&sec_items, &mut sec_counts).await
            }
        }
    );
    a?;
    b?;
    for (&idx, v) in rest.iter().zip(rest_counts) {
        counts[idx] = v;
    }
    for (&idx, v) in sec.iter().zip(sec_counts) {
        counts[idx] = v;
    }
    Ok(())
}
