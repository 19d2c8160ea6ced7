//! Token buckets, sliding windows, `unit_multiplier` and `rate_limits` lists on the real
//! binary with `BACKEND_TYPE=memcache` (two nodes), decided over HTTP `/json`, with the keys
//! docs/algorithms-memcached.md names looked up in memcached.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::{HttpResponse, post_json, start};
use test_support::stores as servers;

const RULES: &str = "\
domain: alg
descriptors:
  - key: tb
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket, burst: 3}
  - key: sw
    rate_limit: {unit: minute, unit_multiplier: 60, requests_per_unit: 2, algorithm: sliding_window}
  - key: fw
    rate_limit: {unit: minute, unit_multiplier: 60, requests_per_unit: 2}
  - key: multi
    rate_limits:
      - {unit: hour, requests_per_unit: 1, algorithm: token_bucket, burst: 3, name: bucket}
      - {unit: minute, unit_multiplier: 60, requests_per_unit: 2, name: per_hour}
";

fn req(key: &str) -> String {
    format!(r#"{{"domain":"alg","descriptors":[{{"entries":[{{"key":"{key}","value":"a"}}]}}]}}"#)
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

fn hour_start() -> u64 {
    let s = now_us() / 1_000_000;
    s - s % 3600
}

#[test]
fn memcache_backend_runs_every_algorithm() {
    let a = servers::memcached();
    let b = servers::memcached();
    let hosts = format!("127.0.0.1:{},127.0.0.1:{}", a.port, b.port);
    let srv = start(
        &[("alg.yaml", RULES)],
        &[
            ("BACKEND_TYPE", "memcache"),
            ("MEMCACHE_HOST_PORT", hosts.as_str()),
        ],
    );
    // The value of `key` on whichever node holds it.
    let held = |key: &str| {
        [a.port, b.port]
            .iter()
            .find_map(|p| servers::mc_get(*p, key))
            .map(|v| v.parse::<u64>().unwrap())
    };
    let post = |key: &str| -> HttpResponse {
        let r = post_json(srv.http, &req(key));
        // Fixed windows count in the background (upstream's way): let each land.
        std::thread::sleep(Duration::from_millis(30));
        r
    };
    let codes = |key: &str, n: usize| (0..n).map(|_| post(key).status).collect::<Vec<_>>();
    let status = |r: &HttpResponse, field: &str| r.json()["statuses"][0][field].clone();
    let start_before = hour_start();

    // A token bucket of 3, one token an hour: the burst, then a wait of one interval.
    let first = post("tb");
    assert_eq!(first.status, 200);
    assert_eq!(status(&first, "limitRemaining"), 2);
    assert_eq!(codes("tb", 3), [200, 200, 429]);
    let denied = post("tb");
    let wait = status(&denied, "durationUntilReset");
    let wait: u64 = wait
        .as_str()
        .unwrap()
        .trim_end_matches('s')
        .parse()
        .unwrap();
    assert!((3590..=3600).contains(&wait), "{wait}");
    let tat = held("alg_tb_a_tb3600").expect("the bucket's TAT under its key");
    let ahead = tat - now_us();
    assert!(
        ahead > 3 * 3_590_000_000 && ahead <= 3 * 3_600_000_000,
        "{ahead}"
    );

    // A sliding window of an hour (60 minutes): two, then denied; denials are not counted.
    assert_eq!(codes("sw", 4), [200, 200, 429, 429]);

    // A fixed window of an hour by unit_multiplier, upstream's key with the window's start.
    assert_eq!(codes("fw", 3), [200, 200, 429]);

    // A list: the fixed window denies the third request and the bucket keeps its token.
    assert_eq!(codes("multi", 2), [200, 200]);
    let third = post("multi");
    assert_eq!(third.status, 429);
    assert_eq!(status(&third, "currentLimit")["name"], "per_hour");
    let tat = held("{alg_multi_a_}tb3600").unwrap();
    let ahead = tat - now_us();
    assert!(
        ahead > 2 * 3_590_000_000 && ahead <= 2 * 3_600_000_000,
        "{ahead}"
    );
    let last = post("multi");
    assert_eq!(last.status, 429, "the hour's window is still over");

    // The keys of the windows, named after their start (an hour could have turned).
    let start = [start_before, hour_start()];
    let find = |stem: &str| start.iter().find_map(|s| held(&format!("{stem}{s}")));
    assert_eq!(find("alg_sw_a_sw3600_"), Some(2), "denied hits went back");
    assert_eq!(find("alg_fw_a_"), Some(3), "fixed windows count every hit");
    assert_eq!(find("{alg_multi_a_}fw3600_"), Some(4));
}
