//! Redis stops under load and comes back: every request ends within the timeout (plus a
//! small margin), nothing panics, and the store recovers on its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use ratelimit_backends::redis::{RedisKind, RedisSettings};
use ratelimit_core::{CounterStore, Increment, Unit};

use crate::conformance::redis_store;
use crate::servers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_outage_under_load_is_bounded_and_recovers() {
    let port = servers::free_port();
    let redis = servers::redis_on(port, &[]);
    let timeout = Duration::from_millis(500);
    let store = redis_store(RedisSettings {
        url: format!("127.0.0.1:{port}"),
        kind: RedisKind::Single,
        timeout,
        pool_size: 4,
        ..RedisSettings::default()
    })
    .await;

    let stop = Arc::new(AtomicBool::new(false));
    let max_latency_us = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let last_ok_us = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut workers = Vec::new();
    for w in 0..4 {
        let (store, stop, max_latency_us, ok, failed, last_ok_us) = (
            store.clone(),
            stop.clone(),
            max_latency_us.clone(),
            ok.clone(),
            failed.clone(),
            last_ok_us.clone(),
        );
        workers.push(tokio::spawn(async move {
            let inc = Increment::window(format!("fault_{w}"), 1, Unit::Hour, 3600);
            while !stop.load(Relaxed) {
                let t = Instant::now();
                let mut c = [0u64];
                let r = store.increment(0, std::slice::from_ref(&inc), &mut c).await;
                max_latency_us.fetch_max(t.elapsed().as_micros() as u64, Relaxed);
                match r {
                    Ok(()) => {
                        ok.fetch_add(1, Relaxed);
                        last_ok_us.store(start.elapsed().as_micros() as u64, Relaxed);
                    }
                    Err(e) => {
                        assert_eq!(e.err_type, "redis_error");
                        failed.fetch_add(1, Relaxed);
                        // A failing client backs off a little, as Envoy's would not; keep
                        // the loop from spinning on immediate errors.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let before_outage = ok.load(Relaxed);
    assert!(before_outage > 0);
    drop(redis); // SIGKILL
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let failed_during = failed.load(Relaxed);
    let _redis = servers::redis_on(port, &[]);
    let restarted_at = start.elapsed();
    // Recovery: successes resume within a few seconds, by the client's own reconnects.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if Duration::from_micros(last_ok_us.load(Relaxed))
            > restarted_at + Duration::from_millis(200)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no success after Redis came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Relaxed);
    for w in workers {
        w.await.expect("no worker panicked");
    }
    assert!(failed_during > 0, "the outage was noticed");
    let worst = Duration::from_micros(max_latency_us.load(Relaxed));
    assert!(
        worst <= timeout + Duration::from_millis(400),
        "a request took {worst:?} with a {timeout:?} timeout"
    );
}
