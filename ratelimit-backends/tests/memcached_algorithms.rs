//! Sliding windows, token buckets and joint groups on real memcached (two nodes, so that a
//! sliding window's two counters and a group's keys may sit on different nodes): the same
//! answers as the memory store on sequential traffic, and never more admitted than the
//! limit under concurrency.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ratelimit_backends::MemoryStore;
use ratelimit_backends::memcached::algorithms::{exhausted_answer, slide_key};
use ratelimit_backends::memcached::{MemcachedSettings, MemcachedStore, node_for};
use ratelimit_core::algorithm::Bucket;
use ratelimit_core::{CounterStore, Increment, Op, Unit};

use crate::servers::{self, Store};

struct Nodes {
    _a: Store,
    _b: Store,
    ports: [u16; 2],
    store: Arc<MemcachedStore>,
}

fn nodes() -> Nodes {
    let a = servers::memcached();
    let b = servers::memcached();
    let ports = [a.port, b.port];
    let store = Arc::new(
        MemcachedStore::new(MemcachedSettings {
            nodes: ports.iter().map(|p| format!("127.0.0.1:{p}")).collect(),
            ..MemcachedSettings::default()
        })
        .unwrap(),
    );
    Nodes {
        _a: a,
        _b: b,
        ports,
        store,
    }
}

impl Nodes {
    /// What memcached holds under `key`, read from the node the key maps to.
    fn value(&self, key: &str) -> Option<u64> {
        servers::mc_get(self.ports[node_for(key, 2)], key).map(|v| v.parse().unwrap())
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// A key no other test (or earlier run against the same nodes) uses.
fn fresh(tag: &str) -> String {
    format!("alg_{tag}_{}", now_us())
}

/// A small deterministic generator, so that a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn sliding(key: &str, hits: u64, limit: u64, window_s: u64, now_us: u64) -> Increment {
    Increment {
        limit,
        op: Op::Slide {
            window_us: window_s * 1_000_000,
            now_us,
        },
        ..Increment::window(key, hits, Unit::Second, 2 * window_s)
    }
}

fn bucket(key: &str, hits: u64, b: &Bucket, now_us: u64) -> Increment {
    Increment {
        limit: b.capacity,
        op: Op::Bucket {
            interval_us: b.interval_us,
            now_us,
        },
        ..Increment::window(key, hits, Unit::Second, b.refill_seconds + 1)
    }
}

/// A fixed window of `seconds` as the limiter keys it (the window's start at the end).
fn fixed(stem: &str, hits: u64, limit: u64, seconds: u64, now_us: u64) -> Increment {
    let now = now_us / 1_000_000;
    Increment {
        limit,
        op: Op::Window { seconds },
        ..Increment::window(
            format!("{stem}fw{seconds}_{}", now - now % seconds),
            hits,
            Unit::Second,
            seconds,
        )
    }
}

fn secs(batch: &[Increment]) -> u64 {
    match batch[0].op {
        Op::Slide { now_us, .. } | Op::Bucket { now_us, .. } => now_us / 1_000_000,
        Op::Window { .. } => 0,
    }
}

async fn both(mem: &MemoryStore, mc: &MemcachedStore, batch: &[Increment]) -> (Vec<u64>, Vec<u64>) {
    let now = secs(batch);
    let mut a = vec![0; batch.len()];
    let mut b = vec![0; batch.len()];
    mem.increment_now(now, batch, &mut a).unwrap();
    mc.increment(now, batch, &mut b).await.unwrap();
    // Fixed windows count in the background: let them land before the next request.
    mc.settled().await;
    (a, b)
}

#[tokio::test]
async fn memcached_sliding_window_answers_as_the_memory_store() {
    let n = nodes();
    let mem = MemoryStore::new();
    let key = fresh("sw");
    let mut rng = Rng(0x5eed_0001);
    let mut t = now_us();
    let (mut admitted, mut denied) = (0, 0);
    for step in 0..400 {
        let hits = match rng.below(10) {
            0 => 0,
            9 => 9,
            h => h.min(3),
        };
        let inc = sliding(&key, hits, 7, 2, t);
        let (a, b) = both(&mem, &n.store, std::slice::from_ref(&inc)).await;
        assert_eq!(a, b, "step {step}: {hits} hits at {t}");
        admitted += usize::from(b[0] <= 7 && hits > 0);
        denied += usize::from(b[0] > 7);
        t += rng.below(400_000);
    }
    assert!(
        admitted > 50 && denied > 50,
        "{admitted} admitted, {denied} denied"
    );
}

#[tokio::test]
async fn memcached_token_bucket_answers_as_the_memory_store() {
    let n = nodes();
    let mem = MemoryStore::new();
    let key = fresh("tb");
    let b = Bucket::new(5, 2, 8);
    let mut rng = Rng(0x5eed_0002);
    let mut t = now_us();
    let mut decided = [0; 2];
    for step in 0..400 {
        let hits = match rng.below(10) {
            0 => 0,
            9 => 10,
            h => h.min(3),
        };
        let inc = bucket(&key, hits, &b, t);
        let (x, y) = both(&mem, &n.store, std::slice::from_ref(&inc)).await;
        assert_eq!(x, y, "step {step}: {hits} hits at {t}");
        if hits > 0 {
            decided[usize::from(b.take(y[0], t, hits).admitted)] += 1;
        }
        t += rng.below(300_000);
    }
    assert!(
        decided.iter().all(|d| *d > 50),
        "denied, admitted: {decided:?}"
    );
    // The key holds the TAT, in microseconds.
    let tat = n.value(&key).unwrap();
    assert!(tat > now_us() - 10_000_000 && tat <= t + 8 * b.interval_us);
}

#[tokio::test]
async fn memcached_joint_groups_answer_as_the_memory_store() {
    let n = nodes();
    let mem = MemoryStore::new();
    let stem = format!("{{{}}}", fresh("group"));
    let b = Bucket::new(4, 1, 6);
    let mut rng = Rng(0x5eed_0003);
    let mut t = now_us();
    for step in 0..300 {
        let hits = rng.below(3);
        let mut group = vec![
            fixed(&stem, hits, 9, 2, t),
            sliding(&format!("{stem}sw1"), hits, 5, 1, t),
            bucket(&format!("{stem}tb2"), hits, &b, t),
        ];
        group[1].joint = true;
        group[2].joint = true;
        // Some requests carry a lone sliding window of their own too.
        if rng.below(2) == 0 {
            group.push(sliding(&format!("{stem}solo"), 1, 3, 1, t));
        }
        let (x, y) = both(&mem, &n.store, &group).await;
        assert_eq!(x, y, "step {step}: {hits} hits at {t}");
        t += rng.below(250_000);
    }
}

#[tokio::test]
async fn memcached_a_group_denied_by_its_fixed_window_leaves_the_buckets_tokens() {
    let n = nodes();
    let stem = format!("{{{}}}", fresh("deny"));
    let b = Bucket::new(10, 1, 10);
    let t = now_us();
    let group = |hits| {
        let mut tb = bucket(&format!("{stem}tb1"), hits, &b, t);
        tb.joint = true;
        vec![fixed(&stem, hits, 2, 60, t), tb]
    };
    let mut counts = [0; 2];
    for _ in 0..4 {
        n.store
            .increment(t / 1_000_000, &group(1), &mut counts)
            .await
            .unwrap();
        n.store.settled().await;
    }
    // The fixed window counted all four; the bucket gave exactly the two admitted.
    n.store
        .increment(t / 1_000_000, &group(0), &mut counts)
        .await
        .unwrap();
    assert_eq!(counts[0], 4);
    assert_eq!(b.tokens(counts[1], t), 8);
}

#[tokio::test]
async fn memcached_a_denied_group_gives_its_sliding_hits_back() {
    let n = nodes();
    let stem = format!("{{{}}}", fresh("back"));
    let b = Bucket::new(1, 3600, 1);
    let t = now_us();
    let sw_key = format!("{stem}sw3600");
    let group = || {
        let mut sw = sliding(&sw_key, 1, 10, 3600, t);
        sw.joint = true;
        vec![bucket(&format!("{stem}tb3600"), 1, &b, t), sw]
    };
    let mut counts = [0; 2];
    let mut admitted = 0;
    for _ in 0..3 {
        n.store
            .increment(t / 1_000_000, &group(), &mut counts)
            .await
            .unwrap();
        admitted += usize::from(b.take(counts[0], t, 1).admitted);
    }
    assert_eq!(admitted, 1);
    // One counter per window, named after the window's start; the denied hits went back.
    let start = t / 1_000_000 - t / 1_000_000 % 3600;
    assert_eq!(n.value(&slide_key(&sw_key, start)), Some(1));
    assert_eq!(n.value(&slide_key(&sw_key, start - 3600)), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memcached_a_shared_bucket_never_admits_more_than_its_capacity() {
    let n = nodes();
    let key = fresh("shared_tb");
    // No refill within the test: exactly the capacity can pass.
    let b = Bucket::new(1, 3600, 60);
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let store = n.store.clone();
            let key = key.clone();
            tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..25 {
                    let t = now_us();
                    let mut c = [0];
                    store
                        .increment(t / 1_000_000, &[bucket(&key, 1, &b, t)], &mut c)
                        .await
                        .unwrap();
                    admitted += usize::from(b.take(c[0], t, 1).admitted);
                }
                admitted
            })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.unwrap();
    }
    assert_eq!(admitted, 60);
    let tat = n.value(&key).unwrap();
    assert_eq!(b.tokens(tat, now_us()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memcached_a_shared_sliding_window_never_admits_more_than_its_limit() {
    let n = nodes();
    let key = fresh("shared_sw");
    let window = 3600;
    let start = now_us();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let store = n.store.clone();
            let key = key.clone();
            tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..12 {
                    let t = now_us();
                    let mut c = [0];
                    store
                        .increment(t / 1_000_000, &[sliding(&key, 1, 50, window, t)], &mut c)
                        .await
                        .unwrap();
                    admitted += usize::from(c[0] <= 50);
                }
                admitted
            })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.unwrap();
    }
    assert!(admitted <= 50, "{admitted}");
    // Concurrent denials may turn a request away early, not many.
    assert!(admitted >= 45, "{admitted}");
    // Every denied request took its hit back: the counters hold exactly the admitted.
    let window_of = |us: u64| {
        let s = us / 1_000_000;
        s - s % window
    };
    let mut held = n.value(&slide_key(&key, window_of(start))).unwrap_or(0);
    if window_of(now_us()) != window_of(start) {
        held += n.value(&slide_key(&key, window_of(now_us()))).unwrap_or(0);
    }
    assert_eq!(held, admitted as u64);
}

#[tokio::test]
async fn memcached_reads_skip_the_keys_the_limiter_leaves_empty() {
    let n = nodes();
    let key = fresh("read");
    let t = now_us();
    let mut c = [0];
    n.store
        .increment(0, &[Increment::window(&key, 3, Unit::Hour, 3600)], &mut c)
        .await
        .unwrap();
    n.store.settled().await;
    let mut out = [9, 9, 9];
    n.store
        .get(t / 1_000_000, &crate::reads(&["", &key, ""]), &mut out)
        .await
        .unwrap();
    assert_eq!(out, [0, 3, 0]);
}

#[test]
fn an_exhausted_bucket_is_denied_by_the_smallest_tat_that_denies() {
    let b = Bucket::new(10, 1, 10);
    let t = 1_700_000_000_000_000;
    for (last, hits) in [(0, 1), (t, 1), (t + 300_000, 4), (t + 900_000, 1), (0, 10)] {
        let answer = exhausted_answer(&b, last, t, hits);
        assert!(answer >= last);
        assert!(!b.take(answer, t, hits).admitted, "{last} {hits}");
        if answer > last.max(t) {
            assert!(b.take(answer - 1, t, hits).admitted, "{last} {hits}");
        }
    }
}

#[tokio::test]
async fn memcached_restart_costs_no_failed_decision() {
    let port = servers::free_port();
    let node = servers::memcached_on(port);
    let store = MemcachedStore::new(MemcachedSettings {
        nodes: vec![format!("127.0.0.1:{port}")],
        ..MemcachedSettings::default()
    })
    .unwrap();
    let b = Bucket::new(100, 1, 100);
    let key = fresh("restart");
    let decide = async |store: &MemcachedStore| {
        let t = now_us();
        let batch = [sliding(&key, 1, 100, 60, t), bucket(&key, 1, &b, t)];
        store.increment(t / 1_000_000, &batch, &mut [0; 2]).await
    };
    // Pool a few connections, then restart the node under them: the pipelines that meet
    // a closed connection go again on a new one.
    for _ in 0..3 {
        decide(&store).await.unwrap();
    }
    drop(node);
    let _node = servers::memcached_on(port);
    for _ in 0..3 {
        decide(&store).await.unwrap();
    }
}
