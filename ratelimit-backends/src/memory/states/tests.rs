use std::sync::Arc;

use ratelimit_core::algorithm::Bucket;
use ratelimit_core::{CounterStore, Increment, Op, Unit};

use crate::MemoryStore;

const T0: u64 = 1_700_000_000;

fn sliding(key: &str, hits: u64, limit: u64, now_us: u64) -> Increment {
    Increment {
        limit,
        op: Op::Slide {
            window_us: 1_000_000,
            now_us,
        },
        ..Increment::window(key, hits, Unit::Second, 2)
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

fn run(s: &MemoryStore, batch: &[Increment]) -> Vec<u64> {
    let mut counts = vec![0; batch.len()];
    let now = batch[0].op_now_secs();
    s.increment_now(now, batch, &mut counts).unwrap();
    counts
}

trait NowSecs {
    fn op_now_secs(&self) -> u64;
}

impl NowSecs for Increment {
    fn op_now_secs(&self) -> u64 {
        match self.op {
            Op::Slide { now_us, .. } | Op::Bucket { now_us, .. } => now_us / 1_000_000,
            Op::Window { .. } => T0,
        }
    }
}

#[test]
fn a_sliding_window_counts_only_what_it_admits_and_weighs_the_last_window() {
    let s = MemoryStore::new();
    let t = T0 * 1_000_000;
    let mut answers = Vec::new();
    for _ in 0..12 {
        answers.push(run(&s, &[sliding("k", 1, 10, t)])[0]);
    }
    assert_eq!(answers[..10], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert!(answers[10..].iter().all(|u| *u > 10), "{answers:?}");
    // Half into the next window, half of the 10 admitted still count: 5 more fit.
    let later = t + 1_500_000;
    let admitted = (0..8)
        .map(|_| run(&s, &[sliding("k", 1, 10, later)])[0])
        .filter(|u| *u <= 10)
        .count();
    assert_eq!(admitted, 5);
}

#[test]
fn a_token_bucket_takes_only_what_it_admits() {
    let s = MemoryStore::new();
    let b = Bucket::new(1, 1, 3);
    let t = T0 * 1_000_000;
    let taken = (0..5)
        .filter(|_| b.take(run(&s, &[bucket("b", 1, &b, t)])[0], t, 1).admitted)
        .count();
    assert_eq!(taken, 3);
    // One interval later, one more.
    let later = t + 1_000_000;
    let taken = (0..3)
        .filter(|_| {
            b.take(run(&s, &[bucket("b", 1, &b, later)])[0], later, 1)
                .admitted
        })
        .count();
    assert_eq!(taken, 1);
}

#[test]
fn a_group_denied_by_its_fixed_window_takes_no_tokens() {
    let s = MemoryStore::new();
    let b = Bucket::new(10, 1, 10);
    let t = T0 * 1_000_000;
    let group = |hits| {
        let fixed = Increment {
            limit: 2,
            ..Increment::window("{k}fw60_1699999980", hits, Unit::Minute, 60)
        };
        let mut tb = bucket("{k}tb1", hits, &b, t);
        tb.joint = true;
        vec![fixed, tb]
    };
    for _ in 0..4 {
        run(&s, &group(1));
    }
    // The fixed window admitted two; the bucket gave exactly those two tokens.
    let tat = run(&s, &group(0))[1];
    assert_eq!(b.tokens(tat, t), 8);
}

#[test]
fn a_shared_bucket_never_admits_more_than_its_capacity_under_contention() {
    let s = Arc::new(MemoryStore::new());
    let b = Bucket::new(1, 3600, 100);
    let t = T0 * 1_000_000;
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || {
                (0..100)
                    .filter(|_| {
                        b.take(run(&s, &[bucket("shared", 1, &b, t)])[0], t, 1)
                            .admitted
                    })
                    .count()
            })
        })
        .collect();
    let admitted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(admitted, 100);
}
