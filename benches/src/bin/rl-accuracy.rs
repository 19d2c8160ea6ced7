//! How close the sliding window comes to an exact sliding log, on a recorded bursty
//! traffic pattern (`benches/data/bursty-traffic.txt`: one request per line, microseconds
//! from the start). The same requests go through the embedded limiter with a
//! `sliding_window` rule, a `fixed_window` rule of the same limit for comparison, and an
//! exact sliding log (admit when fewer than `limit` requests were admitted in the last
//! window). Prints the decisions each admits, how often each agrees with the log, and
//! the most any one of them lets through in a window-long span.
//!
//! `rl-accuracy [generate]`: `generate` rewrites the pattern file (fixed seed).

use std::collections::VecDeque;
use std::sync::Arc;

use ratelimit_backends::MemoryStore;
use ratelimit_core::{Code, Descriptor, Limiter, ManualClock, Request};

const PATTERN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/bursty-traffic.txt");
const T0_US: u64 = 1_700_000_000 * 1_000_000;
const LIMIT: usize = 20;
const WINDOW_US: u64 = 10_000_000;

fn main() {
    if std::env::args().nth(1).as_deref() == Some("generate") {
        std::fs::write(PATTERN, generate()).expect("write the pattern");
    }
    let times: Vec<u64> = std::fs::read_to_string(PATTERN)
        .expect("read the pattern")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let exact = sliding_log(&times);
    println!(
        "{} requests over {:.0} s; limit {LIMIT} per {} s",
        times.len(),
        *times.last().unwrap_or(&0) as f64 / 1e6,
        WINDOW_US / 1_000_000
    );
    println!("exact sliding log: admits {}", count(&exact));
    for algorithm in ["sliding_window", "fixed_window"] {
        let got = through_limiter(&times, algorithm);
        let agree = got.iter().zip(&exact).filter(|(a, b)| a == b).count();
        println!(
            "{algorithm}: admits {} ({:+.2}% against the log), agrees on {:.2}% of requests, \
             most in any {} s span {} ({:.2}x the limit)",
            count(&got),
            (count(&got) as f64 / count(&exact) as f64 - 1.0) * 100.0,
            agree as f64 * 100.0 / times.len() as f64,
            WINDOW_US / 1_000_000,
            most_in_a_window(&times, &got),
            most_in_a_window(&times, &got) as f64 / LIMIT as f64,
        );
    }
}

fn count(v: &[bool]) -> usize {
    v.iter().filter(|x| **x).count()
}

/// Admits a request when fewer than `LIMIT` were admitted in the window before it.
fn sliding_log(times: &[u64]) -> Vec<bool> {
    let mut admitted: VecDeque<u64> = VecDeque::new();
    times
        .iter()
        .map(|&t| {
            while admitted.front().is_some_and(|&a| a + WINDOW_US <= t) {
                admitted.pop_front();
            }
            let ok = admitted.len() < LIMIT;
            if ok {
                admitted.push_back(t);
            }
            ok
        })
        .collect()
}

fn through_limiter(times: &[u64], algorithm: &str) -> Vec<bool> {
    let clock = Arc::new(ManualClock::new(0));
    let rules = format!(
        "domain: acc\ndescriptors:\n  - key: k\n    rate_limit: {{unit: second, unit_multiplier: {}, requests_per_unit: {LIMIT}, algorithm: {algorithm}}}\n",
        WINDOW_US / 1_000_000
    );
    let limiter = Limiter::builder(Arc::new(MemoryStore::new()), clock.clone())
        .yaml("acc.yaml", rules)
        .build()
        .expect("valid rules");
    let req = Request::new("acc", vec![Descriptor::new([("k", "v")])]);
    times
        .iter()
        .map(|&t| {
            clock.set_micros(T0_US + t);
            let r = limiter.should_rate_limit_now(&req).expect("in process");
            r.expect("decided").overall_code == Code::Ok
        })
        .collect()
}

/// The most admitted requests in any span of one window length.
fn most_in_a_window(times: &[u64], admitted: &[bool]) -> usize {
    let ok: Vec<u64> = times
        .iter()
        .zip(admitted)
        .filter(|(_, a)| **a)
        .map(|(t, _)| *t)
        .collect();
    let mut most = 0;
    let mut start = 0;
    for end in 0..ok.len() {
        while ok[end] - ok[start] >= WINDOW_US {
            start += 1;
        }
        most = most.max(end - start + 1);
    }
    most
}

/// Ten minutes of traffic: a background of about 1 request a second, and bursts of 20 to
/// 60 requests a second lasting 2 to 8 seconds, every 20 to 80 seconds.
fn generate() -> String {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let end = 600_000_000u64;
    let mut out = String::new();
    let mut t = 0u64;
    let mut burst_at = 20_000_000u64;
    while t < end {
        let (rate, until) = if t >= burst_at {
            let len = 2_000_000 + (next() * 6_000_000.0) as u64;
            let rate = 20.0 + next() * 40.0;
            let until = burst_at + len;
            burst_at = until + 20_000_000 + (next() * 60_000_000.0) as u64;
            (rate, until)
        } else {
            (1.0, burst_at)
        };
        while t < until.min(end) {
            // Exponential gaps: a Poisson process at `rate` per second.
            t += (-(1.0 - next()).ln() / rate * 1e6) as u64 + 1;
            if t < until.min(end) {
                out.push_str(&format!("{t}\n"));
            }
        }
        t = until;
    }
    out
}
