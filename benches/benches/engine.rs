//! The decision engine against its peers in one binary and one run, because on a shared
//! 2-core machine only same-run ratios are stable (docs/benchmarks.md).
//!
//! Each group runs our engine next to two baselines doing the "same" job with far less
//! work per call: governor's keyed GCRA limiter (a DashMap lookup plus one atomic) and a
//! naive fixed window behind one `Mutex<HashMap>`. After criterion, an interleaved A/B
//! loop prints the median ratio ours/governor, the number the target is about.

use std::collections::HashMap;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use ratelimit_benches::{
    MemLimiter, NOW, decide_async_n, decide_now, plan_and_decide, realistic_config,
    realistic_requests, realistic_rules, simple_limiter, simple_requests, token_bucket_limiter,
    triple_requests,
};
use ratelimit_core::{Limiter, ManualClock, Request, Stats};

/// Distinct keys per group: the cardinality the peer anchors used.
const KEYS: usize = 1024;

fn governor_keyed() -> DefaultKeyedRateLimiter<u64> {
    RateLimiter::keyed(Quota::per_second(NonZeroU32::MAX))
}

/// The simplest correct fixed window: what a hand-rolled limiter looks like.
struct NaiveWindow {
    map: Mutex<HashMap<u64, (u64, u64)>>,
}

impl NaiveWindow {
    fn new() -> Self {
        NaiveWindow {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn check(&self, key: u64, now: u64, limit: u64) -> bool {
        let window = now - now % 60;
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let e = m.entry(key).or_insert((window, 0));
        if e.0 != window {
            *e = (window, 0);
        }
        e.1 += 1;
        e.1 <= limit
    }
}

fn realistic_limiter() -> MemLimiter {
    let mut b = Limiter::builder(
        std::sync::Arc::new(ratelimit_backends::MemoryStore::new()),
        std::sync::Arc::new(ManualClock::new(NOW)),
    );
    for (name, text) in realistic_config() {
        b = b.yaml(name, text);
    }
    b.build().expect("valid rules")
}

/// The async API from inside one task, as a service awaits it (see `decide_async_n`).
fn run_limiter(l: &MemLimiter, reqs: &[Request]) -> usize {
    decide_async_n(l, reqs, reqs.len())
}

/// Decides a slice of requests and counts the OK ones.
type Runner = fn(&MemLimiter, &[Request]) -> usize;

/// The sync API into one reused response (see `decide_now`).
fn run_limiter_now(l: &MemLimiter, reqs: &[Request]) -> usize {
    let mut resp = ratelimit_core::Response::default();
    reqs.iter()
        .filter(|r| decide_now(l, r, &mut resp) == ratelimit_core::Code::Ok)
        .count()
}

fn run_governor(g: &DefaultKeyedRateLimiter<u64>, keys: u64, per_key: u64) -> usize {
    let mut ok = 0;
    for k in 0..keys {
        for j in 0..per_key {
            ok += usize::from(g.check_key(&(k * per_key + j)).is_ok());
        }
    }
    ok
}

fn run_naive(n: &NaiveWindow, keys: u64, per_key: u64) -> usize {
    let mut ok = 0;
    for k in 0..keys {
        for j in 0..per_key {
            ok += usize::from(n.check(k * per_key + j, NOW, u64::MAX));
        }
    }
    ok
}

fn realistic(c: &mut Criterion) {
    let stats = Stats::default();
    let rules = realistic_rules(&stats);
    assert_eq!(
        rules.rules().len(),
        200,
        "the realistic config has 200 rules"
    );
    let reqs = realistic_requests(KEYS);
    let limiter = realistic_limiter();
    let gov = governor_keyed();
    let naive = NaiveWindow::new();
    let mut g = c.benchmark_group("realistic_200_rules");
    g.throughput(Throughput::Elements(KEYS as u64));
    g.bench_function("match_plan_decide_pure", |b| {
        let (mut scratch, mut key) = (String::new(), String::new());
        b.iter(|| {
            let mut over = 0;
            for r in &reqs {
                over += plan_and_decide(&rules, black_box(r), &mut scratch, &mut key);
            }
            over
        })
    });
    g.bench_function("limiter_memory_store", |b| {
        b.iter(|| run_limiter(&limiter, black_box(&reqs)))
    });
    g.bench_function("governor_keyed_check_key", |b| {
        b.iter(|| run_governor(&gov, black_box(KEYS as u64), 1))
    });
    g.bench_function("naive_mutex_hashmap", |b| {
        b.iter(|| run_naive(&naive, black_box(KEYS as u64), 1))
    });
    g.finish();
}

fn embedded(c: &mut Criterion) {
    for (name, reqs, per_key) in [
        ("embedded_1_descriptor", simple_requests(KEYS), 1u64),
        ("embedded_3_descriptors", triple_requests(KEYS), 3u64),
    ] {
        let limiter = simple_limiter();
        let gov = governor_keyed();
        let naive = NaiveWindow::new();
        let mut g = c.benchmark_group(name);
        // One element is one descriptor decided, so that 1 and 3 descriptors compare.
        g.throughput(Throughput::Elements(KEYS as u64 * per_key));
        g.bench_function("limiter_memory_store", |b| {
            b.iter(|| run_limiter(&limiter, black_box(&reqs)))
        });
        g.bench_function("limiter_memory_store_sync_api", |b| {
            b.iter(|| run_limiter_now(&limiter, black_box(&reqs)))
        });
        g.bench_function("governor_keyed_check_key", |b| {
            b.iter(|| run_governor(&gov, black_box(KEYS as u64), per_key))
        });
        g.bench_function("naive_mutex_hashmap", |b| {
            b.iter(|| run_naive(&naive, black_box(KEYS as u64), per_key))
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    targets = realistic, embedded
}

/// Median over interleaved pairs of (our descriptors/s) / (governor's check_key/s).
/// Also returns the median nanoseconds per descriptor decision of each side, so that a
/// ratio that moves between runs shows which side moved.
fn interleaved_ratio(
    limiter: MemLimiter,
    per_key: u64,
    reqs: &[Request],
    pairs: usize,
    run: Runner,
) -> (f64, Vec<f64>, f64, f64) {
    let gov = governor_keyed();
    let rounds = 200;
    let time = |f: &mut dyn FnMut() -> usize| {
        let t = Instant::now();
        let mut sink = 0;
        for _ in 0..rounds {
            sink += f();
        }
        black_box(sink);
        t.elapsed().as_secs_f64()
    };
    // Warm both: fill the maps so the pairs measure the steady state.
    run(&limiter, reqs);
    run_governor(&gov, KEYS as u64, per_key);
    let (mut ours_t, mut theirs_t) = (Vec::new(), Vec::new());
    let mut ratios: Vec<f64> = (0..pairs)
        .map(|_| {
            let ours = time(&mut || run(&limiter, reqs));
            let theirs = time(&mut || run_governor(&gov, KEYS as u64, per_key));
            ours_t.push(ours);
            theirs_t.push(theirs);
            // Same number of descriptor decisions on both sides: the ratio of rates is
            // the inverse ratio of times.
            theirs / ours
        })
        .collect();
    let shown = ratios.clone();
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let decisions = (rounds * reqs.len() as u64 * per_key) as f64;
    let ns = |t: f64| t * 1e9 / decisions;
    let (ours_ns, theirs_ns) = (ns(median(&mut ours_t)), ns(median(&mut theirs_t)));
    (median(&mut ratios), shown, ours_ns, theirs_ns)
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // Under `cargo test` the bench binary runs once in test mode: skip the timed part.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let runners: [(&str, Runner); 2] = [("async API", run_limiter), ("sync API", run_limiter_now)];
    for (api, run) in runners {
        for (name, reqs, per_key) in [
            ("1 descriptor", simple_requests(KEYS), 1u64),
            ("3 descriptors", triple_requests(KEYS), 3u64),
        ] {
            report(api, name, simple_limiter(), per_key, &reqs, run, 0.5);
        }
    }
    // The same algorithm on both sides: our token bucket against governor's GCRA.
    let reqs = simple_requests(KEYS);
    report(
        "sync API",
        "1 descriptor, token bucket",
        token_bucket_limiter(),
        1,
        &reqs,
        run_limiter_now,
        0.6,
    );
}

fn report(
    api: &str,
    name: &str,
    limiter: MemLimiter,
    per_key: u64,
    reqs: &[Request],
    run: Runner,
    target: f64,
) {
    let (median, all, ours_ns, theirs_ns) = interleaved_ratio(limiter, per_key, reqs, 7, run);
    let all: Vec<String> = all.iter().map(|r| format!("{r:.3}")).collect();
    println!(
        "RATIO limiter/governor_keyed ({api}, {name}, {KEYS} keys, 7 interleaved pairs): \
         median {median:.3} [{}] (target >= {target}); ns/descriptor: ours {ours_ns:.1}, \
         governor {theirs_ns:.1}",
        all.join(" ")
    );
}
