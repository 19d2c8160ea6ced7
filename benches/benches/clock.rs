//! One clock reading each way a decision or a timing could take it: `SystemClock`'s wall
//! and monotonic readings (the TSC between per-thread anchors, where the kernel keeps time
//! with it) against std's `SystemTime::now` and `Instant::now` (the vDSO).

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use criterion::{Criterion, criterion_group, criterion_main};
use ratelimit_backends::SystemClock;
use ratelimit_core::Clock;

fn clocks(c: &mut Criterion) {
    let mut g = c.benchmark_group("one clock reading");
    g.bench_function("SystemClock::now_micros", |b| {
        b.iter(|| black_box(SystemClock.now_micros()))
    });
    g.bench_function("SystemClock::monotonic_nanos", |b| {
        b.iter(|| black_box(SystemClock.monotonic_nanos()))
    });
    g.bench_function("std SystemTime::now", |b| {
        b.iter(|| black_box(SystemTime::now()))
    });
    g.bench_function("std Instant::now", |b| b.iter(|| black_box(Instant::now())));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    targets = clocks
}
criterion_main!(benches);
