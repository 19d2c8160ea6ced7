//! Sliding windows, token buckets and joint groups on memcached, which runs no scripts and
//! has no step over several keys. Each algorithm is built from single-key atomic commands so
//! that concurrent requests never admit more than the limit (docs/algorithms-memcached.md):
//!
//! - A sliding window keeps one counter per window, `{key}_{window start in Unix seconds}`.
//!   The request first `incr`s the current window's counter by its hits (and reads the
//!   previous one in the same round trip), then decides from the value after its own
//!   increment: that value counts every concurrent request that got there first, so the
//!   estimate is never below what the memory store would see. A denied request `decr`s its
//!   hits back (a second round trip, for denied requests only). In-flight denied hits can
//!   make a concurrent request be denied a little early, never admitted late.
//! - A token bucket keeps its TAT (Unix microseconds) under its key, read with `gets` and
//!   written with `cas` (`add` for a new key) only when the request is admitted: two round
//!   trips per admitted request. A lost race re-reads and decides again, at most
//!   [`CAS_ATTEMPTS`] times; a request still losing after that is denied (see
//!   [`exhausted_answer`]).
//! - The limits of one descriptor (a joint group) are read together, decided together and
//!   then written: fixed windows always count; sliding windows and buckets of a group that
//!   ends up denied give their hits back (`decr`, or a `cas` moving the TAT back). Between
//!   the read and the give-back, other requests see those hits as taken: best effort, not
//!   one atomic step as on Redis or in memory.

use std::sync::Arc;

use ratelimit_core::algorithm::{Bucket, Take, slide};
use ratelimit_core::store::groups;
use ratelimit_core::{Increment, Op, StoreError};

use super::pool::{Inner, Node};
use super::proto::{Cmd, Reply};
use super::{check_key, err, expiry};

/// How many times a token bucket's request reads and tries to `cas` the TAT before it is
/// answered as denied.
pub const CAS_ATTEMPTS: u32 = 8;

/// Whether `batch` needs more than the fixed windows' read and background increment.
pub(super) fn needs_algorithms(batch: &[Increment]) -> bool {
    batch.iter().any(|i| i.joint || !i.always_counts())
}

/// The memcached key holding a sliding window's count for the window starting at
/// `start_secs` (Unix seconds): the limit's key, `_`, the start.
pub fn slide_key(key: &str, start_secs: u64) -> String {
    format!("{key}_{start_secs}")
}

/// The answer a token bucket's request gets when every compare-and-swap lost the race:
/// the smallest TAT at or after the last one read that denies `hits` (at most the
/// capacity), so that the limiter reads a denial that asks to come back soon.
pub fn exhausted_answer(b: &Bucket, last_tat: u64, now_us: u64, hits: u64) -> u64 {
    let denying = now_us
        .saturating_add(
            b.capacity
                .saturating_sub(hits)
                .saturating_mul(b.interval_us),
        )
        .saturating_add(1);
    last_tat.max(denying)
}

/// What one increment of the batch holds while it is decided.
enum State {
    /// A fixed window: its count before this request, incremented in the background.
    Window,
    /// A sliding window: the current window's key, and whether this request's hits are in
    /// its counter (to give back when the group is denied).
    Slide { cur: usize, counted: bool },
    /// A token bucket: the last TAT read with its CAS unique (`None`: no key), what the
    /// GCRA step made of it, whether the new TAT is stored, and the writes tried.
    Bucket {
        bucket: Bucket,
        now_us: u64,
        tat: u64,
        cas: Option<u64>,
        take: Take,
        taken: bool,
        tries: u32,
    },
}

/// One increment's own verdict and the answer the store gives for it.
#[derive(Clone, Copy, Default)]
struct Verdict {
    admitted: bool,
    answer: u64,
}

/// What a command of a round was sent for.
#[derive(Clone, Copy)]
enum Role {
    WindowRead(usize),
    /// `incr` of the current window (`true`) or a read of it (`false`).
    SlideCurrent(usize, bool),
    SlidePrevious(usize),
    BucketRead(usize),
    BucketWrite(usize),
    /// A give-back or an `add` creating a key: the reply changes nothing.
    Ignore,
}

fn unexpected(reply: &Reply, key: &str) -> StoreError {
    err(format!("memcached: unexpected reply {reply:?} for {key}"))
}

/// Decides every increment of `batch`: fixed windows get their count before the request in
/// `before` (for the caller's background increment) and `before + hits` in `counts`; sliding
/// windows and token buckets are counted here, as the module says.
pub(super) async fn run(
    inner: &Inner,
    nodes: &[Arc<Node>],
    now: u64,
    batch: &[Increment],
    counts: &mut [u64],
    before: &mut [u64],
) -> Result<(), StoreError> {
    // The keys of the two windows each sliding window reads.
    let mut slide_keys: Vec<String> = Vec::new();
    let mut states: Vec<State> = Vec::with_capacity(batch.len());
    let mut window_info: Vec<(u64, u64)> = vec![(0, 0); batch.len()];
    for (i, inc) in batch.iter().enumerate() {
        states.push(match inc.op {
            Op::Window { .. } => State::Window,
            Op::Slide { window_us, now_us } => {
                let window_us = window_us.max(1);
                let start_us = now_us - now_us % window_us;
                window_info[i] = (now_us - start_us, window_us);
                for start in [start_us, start_us.saturating_sub(window_us)] {
                    let k = slide_key(&inc.key, start / 1_000_000);
                    check_key(&k)?;
                    slide_keys.push(k);
                }
                State::Slide {
                    cur: slide_keys.len() - 2,
                    counted: false,
                }
            }
            Op::Bucket {
                interval_us,
                now_us,
            } => {
                let bucket = Bucket {
                    interval_us,
                    capacity: inc.limit,
                    refill_seconds: 0,
                };
                State::Bucket {
                    bucket,
                    now_us,
                    tat: 0,
                    cas: None,
                    take: bucket.take(0, now_us, inc.hits),
                    taken: false,
                    tries: 0,
                }
            }
        });
    }

    // Round 1: every read, and every sliding window's increment.
    let mut cmds: Vec<Cmd<'_>> = Vec::with_capacity(batch.len() + 2);
    let mut roles: Vec<Role> = Vec::with_capacity(batch.len() + 2);
    let mut current = vec![0u64; batch.len()];
    let mut previous = vec![0u64; batch.len()];
    for (i, (inc, st)) in batch.iter().zip(&states).enumerate() {
        match st {
            State::Window => {
                cmds.push(Cmd::Gets(&inc.key));
                roles.push(Role::WindowRead(i));
            }
            State::Slide { cur, .. } => {
                // A request over the limit by itself is denied whatever the counts: it only
                // reads, and never puts a huge value in the counter.
                let counting = inc.hits > 0 && inc.hits <= inc.limit;
                cmds.push(if counting {
                    Cmd::Incr(&slide_keys[*cur], inc.hits)
                } else {
                    Cmd::Gets(&slide_keys[*cur])
                });
                roles.push(Role::SlideCurrent(i, counting));
                cmds.push(Cmd::Gets(&slide_keys[cur + 1]));
                roles.push(Role::SlidePrevious(i));
            }
            State::Bucket { .. } => {
                cmds.push(Cmd::Gets(&inc.key));
                roles.push(Role::BucketRead(i));
            }
        }
    }
    let replies = inner.exchange(nodes, &cmds).await?;
    let mut create: Vec<usize> = Vec::new();
    for ((role, reply), cmd) in roles.iter().zip(&replies).zip(&cmds) {
        let value = match reply {
            Reply::Item { value, .. } | Reply::Value(value) => Some(*value),
            Reply::NotFound => None,
            other => return Err(unexpected(other, cmd.key())),
        };
        match *role {
            Role::WindowRead(i) => before[i] = value.unwrap_or(0),
            Role::SlideCurrent(i, counting) => match value {
                Some(v) => {
                    current[i] = v;
                    if let State::Slide { counted, .. } = &mut states[i] {
                        *counted = counting;
                    }
                }
                None if counting => create.push(i),
                None => {}
            },
            Role::SlidePrevious(i) => previous[i] = value.unwrap_or(0),
            Role::BucketRead(i) => read_bucket(&mut states[i], reply, batch[i].hits),
            _ => {}
        }
    }

    // The first request of a window creates its counter: `add` 0 with the expiry, then the
    // `incr`, in one trip (the `add` of a racing request fails harmlessly).
    if !create.is_empty() {
        let mut cmds = Vec::with_capacity(create.len() * 2);
        for i in &create {
            let State::Slide { cur, .. } = &states[*i] else {
                continue;
            };
            let k = slide_keys[*cur].as_str();
            cmds.push(Cmd::Add(k, 0, expiry(batch[*i].ttl_seconds, now)));
            cmds.push(Cmd::Incr(k, batch[*i].hits));
        }
        let replies = inner.exchange(nodes, &cmds).await?;
        for (i, (pair, keys)) in create.iter().zip(replies.chunks(2).zip(cmds.chunks(2))) {
            let Reply::Value(v) = pair[1] else {
                return Err(unexpected(&pair[1], keys[1].key()));
            };
            current[*i] = v;
            if let State::Slide { counted, .. } = &mut states[*i] {
                *counted = true;
            }
        }
    }

    let mut verdicts = vec![Verdict::default(); batch.len()];
    for (i, (inc, st)) in batch.iter().zip(&states).enumerate() {
        verdicts[i] = match st {
            State::Window => {
                let after = before[i].saturating_add(inc.hits);
                Verdict {
                    admitted: after <= inc.limit,
                    answer: after,
                }
            }
            State::Slide { counted, .. } => {
                let mine = if *counted { inc.hits } else { 0 };
                let (elapsed_us, window_us) = window_info[i];
                let (admitted, used) = slide(
                    current[i].saturating_sub(mine),
                    previous[i],
                    elapsed_us,
                    window_us,
                    inc.hits,
                    inc.limit,
                );
                Verdict {
                    admitted,
                    answer: used,
                }
            }
            State::Bucket { take, .. } => Verdict {
                admitted: take.admitted,
                answer: take.tat_before,
            },
        };
    }

    // Groups with a sliding window or a bucket are settled in rounds: writes of the
    // admitted ones, give-backs of the denied ones, and re-reads of the buckets whose
    // write lost a race, until every group is admitted and written, or denied.
    let mut open: Vec<std::ops::Range<usize>> = groups(batch)
        .filter(|g| g.clone().any(|i| !matches!(states[i], State::Window)))
        .collect();
    let mut give_back: Vec<usize> = Vec::new();
    while !open.is_empty() {
        let mut cmds: Vec<Cmd<'_>> = Vec::new();
        let mut roles: Vec<Role> = Vec::new();
        let mut still_open = Vec::new();
        for g in open {
            let admitted = g.clone().all(|i| verdicts[i].admitted);
            let mut writes = false;
            for i in g.clone() {
                let inc = &batch[i];
                match &mut states[i] {
                    State::Slide { cur, counted } if !admitted && *counted => {
                        *counted = false;
                        cmds.push(Cmd::Decr(&slide_keys[*cur], inc.hits));
                        roles.push(Role::Ignore);
                    }
                    State::Bucket {
                        take, cas, taken, ..
                    } if admitted && !*taken && inc.hits > 0 => {
                        let exp = expiry(inc.ttl_seconds, now);
                        cmds.push(match cas {
                            Some(unique) => Cmd::Cas(&inc.key, take.tat_after, exp, *unique),
                            None => Cmd::Add(&inc.key, take.tat_after, exp),
                        });
                        roles.push(Role::BucketWrite(i));
                        writes = true;
                    }
                    State::Bucket { taken: true, .. } if !admitted => give_back.push(i),
                    _ => {}
                }
            }
            if writes {
                still_open.push(g);
            }
        }
        if cmds.is_empty() {
            break;
        }
        let replies = inner.exchange(nodes, &cmds).await?;
        let mut reread: Vec<usize> = Vec::new();
        for ((role, reply), cmd) in roles.iter().zip(&replies).zip(&cmds) {
            let Role::BucketWrite(i) = *role else {
                continue;
            };
            let State::Bucket {
                bucket,
                now_us,
                tat,
                take,
                taken,
                tries,
                ..
            } = &mut states[i]
            else {
                continue;
            };
            match reply {
                Reply::Stored => *taken = true,
                Reply::Exists | Reply::NotFound | Reply::NotStored => {
                    *tries += 1;
                    if *tries < CAS_ATTEMPTS {
                        reread.push(i);
                    } else {
                        verdicts[i] = Verdict {
                            admitted: false,
                            answer: exhausted_answer(bucket, *tat, *now_us, batch[i].hits),
                        };
                        *take = bucket.take(verdicts[i].answer, *now_us, batch[i].hits);
                    }
                }
                other => return Err(unexpected(other, cmd.key())),
            }
        }
        if !reread.is_empty() {
            let cmds: Vec<Cmd<'_>> = reread.iter().map(|i| Cmd::Gets(&batch[*i].key)).collect();
            let replies = inner.exchange(nodes, &cmds).await?;
            for (i, reply) in reread.iter().zip(&replies) {
                if !matches!(reply, Reply::Item { .. } | Reply::NotFound) {
                    return Err(unexpected(reply, &batch[*i].key));
                }
                read_bucket(&mut states[*i], reply, batch[*i].hits);
                if let State::Bucket { take, .. } = &states[*i] {
                    verdicts[*i] = Verdict {
                        admitted: take.admitted,
                        answer: take.tat_before,
                    };
                }
            }
        }
        open = still_open;
    }
    if !give_back.is_empty() {
        return_tokens(inner, nodes, now, batch, &states, &give_back).await;
    }
    for (c, v) in counts.iter_mut().zip(&verdicts) {
        *c = v.answer;
    }
    Ok(())
}

/// Takes a bucket's `gets` reply into its state and runs the GCRA step on it.
fn read_bucket(st: &mut State, reply: &Reply, hits: u64) {
    if let State::Bucket {
        bucket,
        now_us,
        tat,
        cas,
        take,
        ..
    } = st
    {
        (*tat, *cas) = match reply {
            Reply::Item { value, cas } => (*value, Some(*cas)),
            _ => (0, None),
        };
        *take = bucket.take(*tat, *now_us, hits);
    }
}

/// Moves back the TAT of the buckets at `idx`, which took tokens for a group that was then
/// denied: a `gets` and a `cas` of the TAT less what was taken, retried as the takes are.
/// Best effort: a bucket still contended after that keeps the tokens taken.
async fn return_tokens(
    inner: &Inner,
    nodes: &[Arc<Node>],
    now: u64,
    batch: &[Increment],
    states: &[State],
    idx: &[usize],
) {
    let mut left: Vec<usize> = idx.to_vec();
    for _ in 0..CAS_ATTEMPTS {
        if left.is_empty() {
            return;
        }
        let reads: Vec<Cmd<'_>> = left.iter().map(|i| Cmd::Gets(&batch[*i].key)).collect();
        let Ok(replies) = inner.exchange(nodes, &reads).await else {
            return;
        };
        let mut cmds = Vec::new();
        let mut which = Vec::new();
        for (i, reply) in left.iter().zip(&replies) {
            let (Reply::Item { value, cas }, State::Bucket { bucket, .. }) = (reply, &states[*i])
            else {
                continue;
            };
            let inc = &batch[*i];
            let back = value.saturating_sub(inc.hits.saturating_mul(bucket.interval_us));
            cmds.push(Cmd::Cas(&inc.key, back, expiry(inc.ttl_seconds, now), *cas));
            which.push(*i);
        }
        let Ok(replies) = inner.exchange(nodes, &cmds).await else {
            return;
        };
        left = which
            .into_iter()
            .zip(&replies)
            .filter(|(_, r)| **r == Reply::Exists)
            .map(|(i, _)| i)
            .collect();
    }
}
