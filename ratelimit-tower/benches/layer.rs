//! What the layer costs an axum app, next to `tower_governor` in the same binary and run
//! (on a shared 2-core machine only same-run ratios are stable; docs/benchmarks.md).
//!
//! Three routers answer `GET /` with a static body: bare, behind our layer (memory store,
//! a token bucket per client address), and behind `tower_governor` (governor's GCRA per
//! peer address). Both limits are generous enough never to deny, and requests come from
//! 1024 addresses in turn, so the steady state is "look up a key, take a token". Each
//! layer's overhead is its router's time per request minus the bare router's; after
//! criterion, finely interleaved rounds (bare, ours, theirs) print the ratio of the two
//! overheads, with headers off and with each side's rate limit headers on.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use criterion::{Criterion, criterion_group};
use http::Request;
use ratelimit_tower::{Action, HeaderStyle, RateLimit, RateLimitLayer, Rules};
use tower::ServiceExt;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

const KEYS: u32 = 1024;
/// Requests per timed run in the interleaved part after criterion.
const CHUNK: u32 = 1_000;
/// Rounds (bare, ours, theirs) per block, and blocks.
const ROUNDS_PER_BLOCK: usize = 60;
const BLOCKS: usize = 7;

fn bare() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

/// A token bucket of a million per client address, refilled a million a second.
fn ours(headers: HeaderStyle) -> Router {
    let rules = Rules::new("bench").limit(
        ["remote_address"],
        RateLimit::per_second(1_000_000).burst(1_000_000),
    );
    let limiter = Arc::new(ratelimit_tower::in_memory(rules).expect("rules"));
    let layer = RateLimitLayer::builder(limiter, "bench")
        .descriptor([Action::remote_address()])
        .headers(headers)
        .build()
        .expect("layer");
    bare().layer(layer)
}

/// The same bucket in governor: one token a microsecond, a million at most.
fn theirs(headers: bool) -> Router {
    let mut b = GovernorConfigBuilder::default();
    b.per_nanosecond(1_000).burst_size(1_000_000);
    if headers {
        let config = b.use_headers().finish().expect("config");
        bare().layer(GovernorLayer::new(config))
    } else {
        let config = b.finish().expect("config");
        bare().layer(GovernorLayer::new(config))
    }
}

/// `GET /` from the `i`-th of [`KEYS`] addresses, as axum's `ConnectInfo` carries it.
fn request(i: u32) -> Request<Body> {
    let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i % KEYS));
    let mut req = Request::get("/").body(Body::empty()).expect("request");
    req.extensions_mut()
        .insert(ConnectInfo(SocketAddr::new(ip, 40_000)));
    req
}

/// `n` requests through `app`, round robin over the addresses; the statuses summed. Not
/// inlined: `benches/callgrind-layer.sh` counts instructions inside this function only.
#[inline(never)]
fn run(app: &Router, n: u32, offset: u32) -> u32 {
    let mut sum = 0;
    for i in 0..n {
        let resp = futures_executor::block_on(app.clone().oneshot(request(offset + i)))
            .expect("infallible");
        sum += u32::from(resp.status().as_u16());
        black_box(resp);
    }
    sum
}

fn routers(c: &mut Criterion) {
    let mut g = c.benchmark_group("axum router, GET / per request");
    let variants: [(&str, Router); 5] = [
        ("bare", bare()),
        ("ratelimit-tower", ours(HeaderStyle::None)),
        ("tower_governor", theirs(false)),
        ("ratelimit-tower ietf headers", ours(HeaderStyle::Ietf)),
        ("tower_governor use_headers", theirs(true)),
    ];
    for (name, app) in variants {
        let mut i = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                run(&app, 1, i)
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    targets = routers
}

/// The overheads' ratio from finely interleaved timing: each round times [`CHUNK`]
/// requests through the bare router, ours and theirs in turn, so that what the other
/// processes on the machine take falls on all three alike. Rounds are grouped into
/// [`BLOCKS`] blocks; each block gives a ratio (their spread shows the noise), and the
/// medians of the per-request times give the overall one.
fn overhead_ratio(ours: &Router, theirs: &Router) -> (Vec<f64>, [f64; 3]) {
    let base = bare();
    let time = |app: &Router, offset: u32| {
        let t = Instant::now();
        black_box(run(app, CHUNK, offset));
        t.elapsed().as_secs_f64() * 1e9 / f64::from(CHUNK)
    };
    // Warm: every address's key exists on both sides.
    for app in [&base, ours, theirs] {
        run(app, KEYS * 2, 0);
    }
    let mut rounds: Vec<[f64; 3]> = Vec::new();
    for r in 0..BLOCKS * ROUNDS_PER_BLOCK {
        let offset = r as u32 * CHUNK;
        rounds.push([
            time(&base, offset),
            time(ours, offset),
            time(theirs, offset),
        ]);
    }
    let ratio = |rs: &[[f64; 3]]| {
        let sum = |i: usize| rs.iter().map(|t| t[i]).sum::<f64>();
        (sum(1) - sum(0)) / (sum(2) - sum(0))
    };
    let blocks = rounds.chunks(ROUNDS_PER_BLOCK).map(ratio).collect();
    let median = |i: usize| {
        let mut v: Vec<f64> = rounds.iter().map(|t| t[i]).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (blocks, [median(0), median(1), median(2)])
}

fn main() {
    // `LAYER_BENCH_ONLY=<variant>:<n>`: n requests through one router, nothing else, for
    // instruction counts under callgrind (`benches/callgrind-layer.sh` in docs/benchmarks.md).
    if let Ok(only) = std::env::var("LAYER_BENCH_ONLY") {
        let (variant, n) = only.split_once(':').expect("variant:n");
        let app = match variant {
            "bare" => bare(),
            "ours" => ours(HeaderStyle::None),
            "theirs" => theirs(false),
            "ours-ietf" => ours(HeaderStyle::Ietf),
            "theirs-headers" => theirs(true),
            other => panic!("unknown variant {other}"),
        };
        run(&app, KEYS * 2, 0);
        black_box(run(&app, n.parse().expect("a count"), 0));
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
    // Under `cargo test` the bench binary runs once in test mode: skip the timed part.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let pairs: [(&str, Router, Router); 2] = [
        ("headers off", ours(HeaderStyle::None), theirs(false)),
        (
            "headers on (ietf / use_headers)",
            ours(HeaderStyle::Ietf),
            theirs(true),
        ),
    ];
    for (name, us, them) in pairs {
        let (mut blocks, [bare_ns, ours_ns, theirs_ns]) = overhead_ratio(&us, &them);
        let shown: Vec<String> = blocks.iter().map(|r| format!("{r:.2}")).collect();
        blocks.sort_by(f64::total_cmp);
        let (ours_plus, theirs_plus) = (ours_ns - bare_ns, theirs_ns - bare_ns);
        println!(
            "RATIO overhead ratelimit-tower/tower_governor ({name}, {KEYS} addresses, \
             {BLOCKS} blocks of {ROUNDS_PER_BLOCK} interleaved rounds of {CHUNK} requests): \
             median block {:.3} [{}] (target <= 1.5); ns/request (medians): bare \
             {bare_ns:.0}, ours {ours_ns:.0} (+{ours_plus:.0}), tower_governor \
             {theirs_ns:.0} (+{theirs_plus:.0})",
            blocks[blocks.len() / 2],
            shown.join(" "),
        );
    }
}
