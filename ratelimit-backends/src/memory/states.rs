//! Sliding windows, token buckets and joint groups in the memory store: every key of a
//! group is read, decided and written under the locks of all its shards, so that a group
//! is one atomic step as on Redis.

use parking_lot::MutexGuard;
use ratelimit_core::algorithm::{Bucket, slide};
use ratelimit_core::{Increment, KeyId, Op};

use super::{MemoryStore, Shard, sweep};

/// What a sliding window or a token bucket keeps between requests.
#[derive(Debug, Clone, Copy)]
pub(super) struct State {
    value: Value,
    /// Unix second from which the state is dead.
    pub(super) expires_at: u64,
}

#[derive(Debug, Clone, Copy)]
enum Value {
    /// The window starting at `start_us` holds `current`; the one before it held
    /// `previous`.
    Slide {
        start_us: u64,
        current: u64,
        previous: u64,
    },
    /// A token bucket's theoretical arrival time.
    Tat(u64),
}

/// One increment of a group as read under the locks.
struct Reading {
    /// Within its own limit.
    admitted: bool,
    /// What the store answers for it.
    answer: u64,
    /// The state to write if the group is admitted (`None` for fixed windows, which have
    /// already counted).
    write: Option<Value>,
}

impl MemoryStore {
    /// A batch with a sliding window, a token bucket or a joint group: each group in turn.
    #[cold]
    pub(super) fn decide_groups(&self, now: u64, batch: &[Increment], counts: &mut [u64]) {
        let mut i = 0;
        while i < batch.len() {
            let alone = batch.get(i + 1).is_none_or(|next| !next.joint);
            if !alone {
                i = self.decide_group(now, batch, counts, i);
                continue;
            }
            counts[i] = match batch[i].op {
                Op::Window { .. } => self.increment_one(now, &batch[i]),
                _ => self.decide_alone(now, &batch[i]),
            };
            i += 1;
        }
    }

    /// A sliding window or token bucket alone in its group: one key, one lock, one
    /// lookup.
    pub(super) fn decide_alone(&self, now: u64, inc: &Increment) -> u64 {
        let mut text = KeyId::default();
        let id = inc.counter_id(&mut text);
        let (hash, shard) = self.shard(id);
        let mut shard = shard.lock();
        if now >= shard.next_sweep {
            sweep(&mut shard, now);
        }
        let expires_at = now.saturating_add(inc.ttl_seconds);
        if let Some((_, state)) = shard.states.find_mut(hash, |(k, _)| k == id) {
            let live = state.expires_at > now;
            let r = decide_state(live.then_some(&state.value), inc);
            if let (true, Some(value)) = (r.admitted, r.write) {
                *state = State { value, expires_at };
            }
            return r.answer;
        }
        let r = decide_state(None, inc);
        if let (true, Some(value)) = (r.admitted, r.write) {
            shard
                .states
                .insert_unique(hash, (*id, State { value, expires_at }), |(k, _)| {
                    k.table_hash()
                });
        }
        r.answer
    }

    /// Decides the joint group starting at `first` and returns the index after it.
    #[cold]
    fn decide_group(
        &self,
        now: u64,
        batch: &[Increment],
        counts: &mut [u64],
        first: usize,
    ) -> usize {
        let end = batch[first + 1..]
            .iter()
            .position(|i| !i.joint)
            .map_or(batch.len(), |p| first + 1 + p);
        let group = &batch[first..end];
        let ids: Vec<KeyId> = group
            .iter()
            .map(|inc| *inc.counter_id(&mut KeyId::default()))
            .collect();
        let hashes: Vec<(u64, usize)> = ids
            .iter()
            .map(|id| {
                let (hash, _) = self.shard(id);
                (hash, self.shard_index(hash))
            })
            .collect();
        // Locks in shard order, each once: two groups sharing shards cannot deadlock.
        let mut order: Vec<usize> = hashes.iter().map(|(_, s)| *s).collect();
        order.sort_unstable();
        order.dedup();
        let mut guards: Vec<(usize, MutexGuard<'_, Shard>)> = order
            .into_iter()
            .map(|s| (s, self.shards[s].lock()))
            .collect();
        let at: Vec<usize> = hashes
            .iter()
            .map(|(_, s)| guards.iter().position(|(i, _)| i == s).unwrap_or(0))
            .collect();
        for (_, g) in &mut guards {
            if now >= g.next_sweep {
                sweep(g, now);
            }
        }
        let readings: Vec<Reading> = group
            .iter()
            .zip(&hashes)
            .zip(&at)
            .zip(&ids)
            .map(|(((inc, (hash, _)), g), id)| self.step(&mut guards[*g].1, (*hash, id), now, inc))
            .collect();
        let all_admitted = readings.iter().all(|r| r.admitted);
        for (i, r) in readings.into_iter().enumerate() {
            counts[first + i] = r.answer;
            if let (true, Some(value)) = (all_admitted, r.write) {
                write(
                    &mut guards[at[i]].1,
                    (hashes[i].0, ids[i]),
                    &group[i],
                    value,
                    now,
                );
            }
        }
        end
    }

    /// Reads one increment's key in its locked shard and decides it; a fixed window
    /// counts on the spot (it counts whatever the group decides).
    fn step(&self, shard: &mut Shard, at: (u64, &KeyId), now: u64, inc: &Increment) -> Reading {
        match inc.op {
            Op::Window { .. } => {
                let after = self.count_in(shard, at, now, inc);
                Reading {
                    admitted: after <= inc.limit,
                    answer: after,
                    write: None,
                }
            }
            _ => decide_state(read(shard, at.0, at.1, now).as_ref(), inc),
        }
    }
}

/// A sliding window's or token bucket's step on its stored state (`None`: new or dead).
#[inline(always)] // one step per request, and its reading stays in registers
fn decide_state(stored: Option<&Value>, inc: &Increment) -> Reading {
    match inc.op {
        Op::Slide { window_us, now_us } => {
            let start_us = now_us - now_us % window_us;
            let (current, previous) = match stored {
                Some(&Value::Slide {
                    start_us: s,
                    current,
                    previous,
                }) if s == start_us => (current, previous),
                Some(&Value::Slide {
                    start_us: s,
                    current,
                    ..
                }) if s.saturating_add(window_us) == start_us => (0, current),
                _ => (0, 0),
            };
            let (admitted, used) = slide(
                current,
                previous,
                now_us - start_us,
                window_us,
                inc.hits,
                inc.limit,
            );
            Reading {
                admitted,
                answer: used,
                write: Some(Value::Slide {
                    start_us,
                    current: current.saturating_add(inc.hits),
                    previous,
                }),
            }
        }
        Op::Bucket {
            interval_us,
            now_us,
        } => {
            let tat = match stored {
                Some(&Value::Tat(t)) => t,
                _ => 0,
            };
            let bucket = Bucket {
                interval_us,
                capacity: inc.limit,
                refill_seconds: 0,
            };
            let t = bucket.take(tat, now_us, inc.hits);
            Reading {
                admitted: t.admitted,
                answer: t.tat_before,
                write: Some(Value::Tat(t.tat_after)),
            }
        }
        // Counted by the caller, which holds the fixed windows' map.
        Op::Window { .. } => Reading {
            admitted: true,
            answer: 0,
            write: None,
        },
    }
}

fn read(shard: &Shard, hash: u64, id: &KeyId, now: u64) -> Option<Value> {
    shard
        .states
        .find(hash, |(k, _)| k == id)
        .filter(|(_, s)| s.expires_at > now)
        .map(|(_, s)| s.value)
}

fn write(shard: &mut Shard, (hash, id): (u64, KeyId), inc: &Increment, value: Value, now: u64) {
    let state = State {
        value,
        expires_at: now.saturating_add(inc.ttl_seconds),
    };
    match shard.states.find_mut(hash, |(k, _)| *k == id) {
        Some((_, s)) => *s = state,
        None => {
            shard
                .states
                .insert_unique(hash, (id, state), |(k, _)| k.table_hash());
        }
    }
}

#[cfg(test)]
mod tests;
