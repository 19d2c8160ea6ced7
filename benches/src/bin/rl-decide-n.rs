//! Runs exactly N decisions of one kind, for instruction counting under callgrind:
//! `(Ir(2N) - Ir(N)) / N` cancels start-up, rule compilation and map growth.
//!
//! `rl-decide-n <limiter1|limiter1now|limiter1tb|limiter1owned|limiter1block|limiter3|pure200|limiter200|governor> <N>`
//! (`limiter1`, `limiter3`, `limiter200`: the async API awaited inside one task;
//! `limiter1now`: the synchronous `should_rate_limit_now_into`, no executor, one response
//! reused; `limiter1tb`: the same on a token-bucket rule; `limiter1owned`: `should_rate_limit_now`, a new response each; `limiter1block`:
//! the async API with an executor entered for each decision; `governor`: governor's keyed
//! `check_key` on as many keys, the peer of `limiter1tb`)

use std::hint::black_box;
use std::num::NonZeroU32;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use ratelimit_benches::{
    decide_async_n, decide_blocking, decide_now, decide_now_owned, plan_and_decide,
    realistic_requests, realistic_rules, simple_limiter, simple_requests, token_bucket_limiter,
    triple_requests,
};
use ratelimit_core::{Response, Stats};

/// Distinct keys: as in the criterion benches, every key is warm after the first pass.
const KEYS: usize = 1024;

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args.next().unwrap_or_default();
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    if n == 0 {
        eprintln!(
            "usage: rl-decide-n <limiter1|limiter1now|limiter1tb|limiter1owned|limiter1block|limiter3|pure200|limiter200|governor> <N>"
        );
        std::process::exit(2);
    }
    let mut sink = 0usize;
    match kind.as_str() {
        "limiter1" | "limiter3" => {
            let reqs = if kind == "limiter1" {
                simple_requests(KEYS)
            } else {
                triple_requests(KEYS)
            };
            let l = simple_limiter();
            // Warm every key so that N and 2N differ only by steady-state decisions.
            for r in &reqs {
                decide_blocking(&l, r);
            }
            sink += decide_async_n(&l, &reqs, n);
        }
        "limiter1now" | "limiter1tb" => {
            let reqs = simple_requests(KEYS);
            let l = if kind == "limiter1now" {
                simple_limiter()
            } else {
                token_bucket_limiter()
            };
            let mut resp = Response::default();
            for r in &reqs {
                decide_now(&l, r, &mut resp);
            }
            for i in 0..n {
                sink += decide_now(&l, black_box(&reqs[i % KEYS]), &mut resp) as usize;
            }
        }
        "limiter1owned" => {
            let reqs = simple_requests(KEYS);
            let l = simple_limiter();
            for r in &reqs {
                decide_now_owned(&l, r);
            }
            for i in 0..n {
                sink += decide_now_owned(&l, black_box(&reqs[i % KEYS])) as usize;
            }
        }
        "pure200" => {
            let stats = Stats::default();
            let rules = realistic_rules(&stats);
            let reqs = realistic_requests(KEYS);
            let (mut scratch, mut key) = (String::new(), String::new());
            for i in 0..n {
                sink += plan_and_decide(&rules, black_box(&reqs[i % KEYS]), &mut scratch, &mut key);
            }
        }
        "limiter200" => {
            let l = {
                let mut b = ratelimit_core::Limiter::builder(
                    std::sync::Arc::new(ratelimit_backends::MemoryStore::new()),
                    std::sync::Arc::new(ratelimit_core::ManualClock::new(ratelimit_benches::NOW)),
                );
                for (name, text) in ratelimit_benches::realistic_config() {
                    b = b.yaml(name, text);
                }
                b.build().expect("valid rules")
            };
            let reqs = realistic_requests(KEYS);
            for r in &reqs {
                decide_blocking(&l, r);
            }
            sink += decide_async_n(&l, &reqs, n);
        }
        "limiter1block" => {
            let reqs = simple_requests(KEYS);
            let l = simple_limiter();
            for r in &reqs {
                decide_blocking(&l, r);
            }
            for i in 0..n {
                sink += decide_blocking(&l, black_box(&reqs[i % KEYS])) as usize;
            }
        }
        "governor" => {
            // The peer of `limiter1tb` (governor-ratio.sh), for profiling it the same way.
            let g: DefaultKeyedRateLimiter<u64> =
                RateLimiter::keyed(Quota::per_second(NonZeroU32::MAX));
            for k in 0..KEYS as u64 {
                let _ = g.check_key(&k);
            }
            for i in 0..n {
                sink += usize::from(g.check_key(black_box(&((i % KEYS) as u64))).is_ok());
            }
        }
        other => {
            eprintln!("unknown kind {other}");
            std::process::exit(2);
        }
    }
    println!("{kind} {n} {}", black_box(sink));
}
