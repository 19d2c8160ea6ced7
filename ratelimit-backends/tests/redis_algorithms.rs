//! Sliding windows, token buckets and joint groups on real Redis (single, Cluster,
//! Sentinel): the memory store is the reference, and Redis must answer exactly as it does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ratelimit_backends::MemoryStore;
use ratelimit_backends::RedisStore;
use ratelimit_backends::redis::{RedisKind, RedisSettings, StartupBackoff};
use ratelimit_core::algorithm::{Bucket, window_start};
use ratelimit_core::{CounterStore, Increment, Op, Unit};

use crate::conformance::redis_store;
use crate::servers::{self, redis_cli, resp};

pub(crate) fn settings(url: String, kind: RedisKind) -> RedisSettings {
    RedisSettings {
        url,
        kind,
        timeout: Duration::from_secs(5),
        ..RedisSettings::default()
    }
}

fn cluster_url(nodes: &[servers::Store]) -> String {
    nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect::<Vec<_>>()
        .join(",")
}

/// Microseconds since the epoch.
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// splitmix64: reproducible traffic without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One limit of a rule: how it counts, and its limit (a bucket's capacity).
#[derive(Clone, Copy)]
enum Kind {
    Window(u64),
    Slide(u64),
    Bucket { interval_us: u64, ttl: u64 },
}

use Kind::{Bucket as B, Slide as S, Window as W};

/// Rules as the limiter would compile them, each a list of (kind, limit). Several limits
/// make a joint group (the group script); a sliding window or a bucket alone goes through
/// its lone script, but for rule 11's bucket, too slow for doubles. Odd windows and
/// intervals give weights and TATs that are no round numbers; the last rules have TATs
/// past 2^53 and capacities that saturate `u64`.
const RULES: &[&[(Kind, u64)]] = &[
    &[(S(1), 5)],
    &[(
        B {
            interval_us: 100_000,
            ttl: 2,
        },
        4,
    )],
    &[
        (W(1), 3),
        (
            B {
                interval_us: 50_000,
                ttl: 2,
            },
            5,
        ),
    ],
    &[
        (S(3), 7),
        (
            B {
                interval_us: 333_334,
                ttl: 3,
            },
            3,
        ),
        (W(60), 40),
    ],
    &[(W(1), 4)],
    &[(S(2), 2), (S(7), 9)],
    &[
        (
            B {
                interval_us: 142_858,
                ttl: 3,
            },
            10,
        ),
        (S(1), 6),
    ],
    &[(S(1), 0)],
    &[(S(3), 4)],
    &[(
        B {
            interval_us: 333_334,
            ttl: 3,
        },
        3,
    )],
    &[(
        B {
            interval_us: 1_000_000,
            ttl: 2,
        },
        0,
    )],
    &[(
        B {
            interval_us: 100_000_000_000_000,
            ttl: 3600,
        },
        2_000,
    )],
    &[
        (
            B {
                interval_us: 1 << 40,
                ttl: 3600,
            },
            1 << 30,
        ),
        (S(31_536_000), 3),
    ],
];

/// The group of increments of `rule` for descriptor value `value`, keyed as the limiter
/// keys them (joint rules under one hash tag).
fn increments(rule: usize, value: u64, hits: u64, now_us: u64) -> Vec<Increment> {
    let limits = RULES[rule];
    let joint = limits.len() > 1;
    let stem = if joint {
        format!("{{r{rule}_v{value}_}}")
    } else {
        format!("r{rule}_v{value}_")
    };
    let now = now_us / 1_000_000;
    limits
        .iter()
        .enumerate()
        .map(|(i, (kind, limit))| {
            let (key, op, ttl) = match *kind {
                W(secs) => (
                    format!("{stem}fw{secs}.{i}_{}", window_start(now, secs)),
                    Op::Window { seconds: secs },
                    secs,
                ),
                S(secs) => (
                    format!("{stem}sw{secs}.{i}"),
                    Op::Slide {
                        window_us: secs * 1_000_000,
                        now_us,
                    },
                    2 * secs,
                ),
                B { interval_us, ttl } => (
                    format!("{stem}tb.{i}"),
                    Op::Bucket {
                        interval_us,
                        now_us,
                    },
                    ttl,
                ),
            };
            Increment {
                key,
                id: Default::default(),
                hits,
                unit: Unit::Second,
                ttl_seconds: ttl,
                limit: *limit,
                op,
                joint: joint && i > 0,
            }
        })
        .collect()
}

/// Random requests of one to three distinct descriptors through the memory store and
/// `redis`, answer for answer. Time moves on by random steps, never slower than the
/// clock (Redis expires keys by the clock, the memory store by the time it is given).
/// `flush` clears Redis's script cache now and then, so `EVALSHA` meets `NOSCRIPT`.
async fn agree(redis: Arc<RedisStore>, seed: u64, requests: usize, flush: &dyn Fn()) {
    let memory = MemoryStore::new();
    let mut rng = Rng(seed);
    let mut now = now_us();
    let mut last = Instant::now();
    let values = 3;
    let (mut admitted_slides, mut admitted_buckets, mut past_f64) = (0, 0, 0);
    // Decisions of lone sliding windows and buckets, [denied, admitted], by kind.
    let (mut lone_slides, mut lone_buckets) = ([0; 2], [0; 2]);
    for n in 0..requests {
        let step = match rng.below(100) {
            0..=29 => 0,
            30..=89 => rng.below(60_000),
            90..=97 => rng.below(1_500_000),
            _ => rng.below(6_000_000),
        };
        now += step.max(last.elapsed().as_micros() as u64);
        last = Instant::now();
        let mut picked = Vec::new();
        for _ in 0..=rng.below(3) {
            let d = (rng.below(RULES.len() as u64) as usize, rng.below(values));
            if !picked.contains(&d) {
                picked.push(d);
            }
        }
        let mut batch = Vec::new();
        let mut alone = Vec::new();
        for (rule, value) in picked {
            let hits = [0, 1, 1, 1, 2, 3][rng.below(6) as usize];
            batch.extend(increments(rule, value, hits, now));
            alone.resize(batch.len(), RULES[rule].len() == 1);
        }
        let mut want = vec![0; batch.len()];
        let mut got = vec![0; batch.len()];
        let secs = now / 1_000_000;
        memory.increment(secs, &batch, &mut want).await.unwrap();
        redis.increment(secs, &batch, &mut got).await.unwrap();
        let keys: Vec<&str> = batch.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(got, want, "request {n} (seed {seed}), keys {keys:?}");
        for ((inc, c), alone) in batch.iter().zip(&want).zip(&alone) {
            match inc.op {
                Op::Slide { .. } if inc.hits > 0 => {
                    let admitted = *c <= inc.limit;
                    admitted_slides += usize::from(admitted);
                    if *alone {
                        lone_slides[usize::from(admitted)] += 1;
                    }
                }
                Op::Bucket {
                    interval_us,
                    now_us,
                } if inc.hits > 0 => {
                    let b = Bucket {
                        interval_us,
                        capacity: inc.limit,
                        refill_seconds: 1,
                    };
                    let admitted = b.take(*c, now_us, inc.hits).admitted;
                    admitted_buckets += usize::from(admitted);
                    past_f64 += usize::from(*c > 1 << 53);
                    if *alone {
                        lone_buckets[usize::from(admitted)] += 1;
                    }
                }
                _ => {}
            }
        }
        if n % 97 == 96 {
            flush();
        }
    }
    // The traffic exercised both sides of each decision.
    assert!(admitted_slides > requests / 10, "{admitted_slides}");
    assert!(admitted_buckets > requests / 10, "{admitted_buckets}");
    // Lone ones (their own scripts) too, both ways.
    for n in lone_slides.into_iter().chain(lone_buckets) {
        assert!(n > requests / 50, "lone {lone_slides:?} {lone_buckets:?}");
    }
    // TATs no double holds exactly were compared too.
    assert!(past_f64 > 0, "no TAT past 2^53");
}

/// Whether Redis at `port` has run each script since the last `SCRIPT FLUSH`.
pub(crate) fn scripts_run(port: u16) -> String {
    use ratelimit_backends::redis::{GROUP_SHA, LONE_BUCKET_SHA, LONE_SLIDE_SHA};
    let sha = [GROUP_SHA, LONE_BUCKET_SHA, LONE_SLIDE_SHA];
    redis_cli(port, &[&["SCRIPT", "EXISTS"][..], &sha].concat()).replace('\n', " ")
}

#[tokio::test]
async fn redis_answers_as_the_memory_store_on_random_traffic() {
    let r = servers::redis();
    let store = redis_store(settings(format!("127.0.0.1:{}", r.port), RedisKind::Single)).await;
    let flush = || assert_eq!(redis_cli(r.port, &["SCRIPT", "FLUSH"]), "OK");
    agree(store, 27, 1500, &flush).await;
    assert_eq!(
        scripts_run(r.port),
        "1 1 1",
        "group, lone bucket, lone slide"
    );
}

#[tokio::test]
async fn sentinel_answers_as_the_memory_store_on_random_traffic() {
    let (master, sentinel) = servers::redis_sentinel();
    let url = format!("mymaster,127.0.0.1:{}", sentinel.port);
    let store = redis_store(settings(url, RedisKind::Sentinel)).await;
    let flush = || assert_eq!(redis_cli(master.port, &["SCRIPT", "FLUSH"]), "OK");
    agree(store, 272_727, 1500, &flush).await;
    assert_eq!(
        scripts_run(master.port),
        "1 1 1",
        "group, lone bucket, lone slide"
    );
}

/// One bucket: its increment at `now_us`.
pub(crate) fn take(key: &str, b: &Bucket, now_us: u64) -> Increment {
    Increment {
        limit: b.capacity,
        op: Op::Bucket {
            interval_us: b.interval_us,
            now_us,
        },
        ..Increment::window(key, 1, Unit::Second, b.refill_seconds + 1)
    }
}

/// Whether the store admitted one hit, read from its answer as the limiter reads it.
async fn admitted(store: &RedisStore, b: &Bucket, inc: &Increment) -> bool {
    let mut tat = [0];
    let Op::Bucket { now_us, .. } = inc.op else {
        unreachable!()
    };
    store
        .increment(now_us / 1_000_000, std::slice::from_ref(inc), &mut tat)
        .await
        .unwrap();
    b.take(tat[0], now_us, 1).admitted
}

/// Many tasks on one bucket: at one instant exactly its capacity goes through; over real
/// time, never more than the capacity plus what refilled meanwhile.
async fn contention(store: Arc<RedisStore>) {
    let b = Bucket::new(20, 1, 50);
    let t = now_us();
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (store, inc) = (store.clone(), take("{contended}tb", &b, t));
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            for _ in 0..20 {
                n += usize::from(admitted(&store, &b, &inc).await);
            }
            n
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    assert_eq!(total, 50, "16 x 20 requests at one instant");

    let start = now_us();
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let (mut n, mut last) = (0u64, 0);
            let until = Instant::now() + Duration::from_millis(1500);
            while Instant::now() < until {
                last = now_us();
                n += u64::from(admitted(&store, &b, &take("{refilled}tb", &b, last)).await);
            }
            (n, last)
        }));
    }
    let (mut total, mut end) = (0, start);
    for task in tasks {
        let (n, last) = task.await.unwrap();
        total += n;
        end = end.max(last);
    }
    let refill = (end - start) / b.interval_us;
    assert!(
        total <= b.capacity + refill + 1,
        "{total} through, capacity {} + {refill} refilled",
        b.capacity
    );
    assert!(total >= b.capacity + refill / 2, "{total}: starved");
}

#[tokio::test]
async fn a_contended_bucket_admits_its_capacity_and_refill_only() {
    let r = servers::redis();
    let store = redis_store(settings(format!("127.0.0.1:{}", r.port), RedisKind::Single)).await;
    contention(store).await;
}

/// A fixed window and a bucket decided together: requests the window denies take no
/// token, though each still counts in the window (as upstream counts).
async fn denied_by_the_window(store: Arc<RedisStore>, port: u16) {
    let b = Bucket::new(10, 1, 10);
    let t = now_us();
    let group = |hits| {
        let fixed = Increment {
            limit: 2,
            ..Increment::window("{k}fw60_1", hits, Unit::Minute, 60)
        };
        let mut tb = take("{k}tb1", &b, t);
        tb.hits = hits;
        tb.joint = true;
        [fixed, tb]
    };
    let mut counts = [0; 2];
    for _ in 0..4 {
        store
            .increment(t / 1_000_000, &group(1), &mut counts)
            .await
            .unwrap();
    }
    assert_eq!(counts[0], 4);
    store
        .increment(t / 1_000_000, &group(0), &mut counts)
        .await
        .unwrap();
    assert_eq!(b.tokens(counts[1], t), 8, "two tokens for the two admitted");
    assert_eq!(redis_cli(port, &["GET", "{k}fw60_1"]), "4");
    let tat: u64 = redis_cli(port, &["GET", "{k}tb1"]).parse().unwrap();
    assert_eq!(tat, t + 2 * b.interval_us);
    let ttl: u64 = redis_cli(port, &["TTL", "{k}tb1"]).parse().unwrap();
    assert!((1..=b.refill_seconds + 1).contains(&ttl), "{ttl}");
}

#[tokio::test]
async fn a_group_denied_by_its_fixed_window_takes_no_tokens() {
    let r = servers::redis();
    let store = redis_store(settings(format!("127.0.0.1:{}", r.port), RedisKind::Single)).await;
    denied_by_the_window(store, r.port).await;
}

/// Script calls (`EVALSHA` and `EVAL`) a node has run.
fn script_calls(port: u16) -> u64 {
    let stats = resp(port, &["INFO", "commandstats"]).unwrap();
    stats
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// In a Cluster, each group is one script call on the master of its hash tag, all of its
/// keys there; a lone fixed window still goes as upstream's count.
async fn one_script_per_group(nodes: &[servers::Store], store: &RedisStore) {
    let t = now_us();
    let mut batch = Vec::new();
    for (rule, value) in [(3, 100), (6, 101), (2, 102), (4, 100), (0, 101)] {
        batch.extend(increments(rule, value, 1, t));
    }
    let groups = 4;
    let mut counts = vec![0; batch.len()];
    // The first call teaches every master the script; count the second.
    store
        .increment(t / 1_000_000, &batch, &mut counts)
        .await
        .unwrap();
    let before: u64 = nodes.iter().map(|n| script_calls(n.port)).sum();
    store
        .increment(t / 1_000_000, &batch, &mut counts)
        .await
        .unwrap();
    let after: u64 = nodes.iter().map(|n| script_calls(n.port)).sum();
    // The lone fixed window goes through fred's counting script: one more.
    assert_eq!(after - before, groups + 1);
    for rule in [3, 6, 2] {
        let keys: Vec<&str> = batch
            .iter()
            .map(|i| i.key.as_str())
            .filter(|k| k.starts_with(&format!("{{r{rule}_")))
            .collect();
        assert!(keys.len() >= 2);
        let holders: Vec<u16> = nodes
            .iter()
            .filter(|n| {
                keys.iter()
                    .all(|k| resp(n.port, &["EXISTS", k]).is_some_and(|r| r.trim() == ":1"))
            })
            .map(|n| n.port)
            .collect();
        assert_eq!(holders.len(), 1, "rule {rule}: keys {keys:?}");
    }
    // The same answers as the memory store gives for the same two requests.
    let memory = MemoryStore::new();
    let mut want = vec![0; batch.len()];
    for _ in 0..2 {
        memory
            .increment(t / 1_000_000, &batch, &mut want)
            .await
            .unwrap();
    }
    assert_eq!(counts, want);
}

/// Everything above on one Cluster of three masters (one, as starting a Cluster is the
/// slow part): groups as single scripts on their hash tag's master, the memory store's
/// answers on random traffic, a contended bucket, a group denied by its fixed window.
#[tokio::test]
async fn a_cluster_decides_each_group_in_one_script_on_its_hash_tags_master() {
    let nodes = servers::redis_cluster();
    let store = redis_store(settings(cluster_url(&nodes), RedisKind::Cluster)).await;
    one_script_per_group(&nodes, &store).await;
    let flush = || {
        for n in &nodes {
            assert!(
                resp(n.port, &["SCRIPT", "FLUSH"])
                    .unwrap()
                    .starts_with("+OK")
            );
        }
    };
    agree(store.clone(), 2727, 1500, &flush).await;
    let with_keys = nodes
        .iter()
        .filter(|n| resp(n.port, &["DBSIZE"]).is_some_and(|r| r.trim() != ":0"))
        .count();
    assert_eq!(with_keys, 3, "the groups spread over the masters");
    contention(store.clone()).await;
    // redis-cli -c follows the key to its master.
    denied_by_the_window(store, nodes[0].port).await;
}

/// With a per-second instance, a lone SECOND bucket goes there; a joint group with any
/// longer limit stays whole on the main instance.
#[tokio::test]
async fn the_per_second_instance_gets_whole_groups_of_second_limits_only() {
    let main = servers::redis();
    let per_second = servers::redis();
    let s = |port: u16| settings(format!("127.0.0.1:{port}"), RedisKind::Single);
    let store = RedisStore::connect(
        s(main.port),
        Some(s(per_second.port)),
        StartupBackoff::default(),
        &|_| {},
    )
    .await
    .unwrap();
    let t = now_us();
    let b = Bucket::new(5, 1, 5);
    let lone = take("lone_tb", &b, t);
    let mut joint_tb = take("{j}tb", &b, t);
    joint_tb.joint = true;
    let batch = [
        Increment {
            limit: 10,
            ..Increment::window("{j}fw60_1", 1, Unit::Minute, 60)
        },
        joint_tb,
        lone,
    ];
    let mut counts = [0; 3];
    store
        .increment(t / 1_000_000, &batch, &mut counts)
        .await
        .unwrap();
    assert_eq!(counts, [1, t, t]);
    let keys = |port| {
        let mut k: Vec<String> = redis_cli(port, &["KEYS", "*"])
            .lines()
            .map(str::to_owned)
            .collect();
        k.sort();
        k
    };
    assert_eq!(keys(per_second.port), ["lone_tb"]);
    assert_eq!(keys(main.port), ["{j}fw60_1", "{j}tb"]);
}
