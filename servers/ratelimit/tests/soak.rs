//! A bounded soak: good traffic keeps its latency and its counts while, at once, one client
//! opens idle connections to the process's file limit, another sends the largest requests
//! allowed and some over the limits, and the rules reload every second. A test binary of
//! its own, so no other test shares the two cores with it.

#[allow(dead_code)]
mod common;

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use ratelimit_core::{Code, Descriptor, Request};
use ratelimit_server::convert;
use ratelimit_server::pb::rls::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;

use common::{channel, rss_kb};

const SOAK: Duration = Duration::from_secs(15);
/// Calls per good key, over a limit of `LIMIT`: exactly `LIMIT` must be allowed.
const CALLS_PER_KEY: usize = 30;
const LIMIT: usize = 20;

fn rules(filler: usize) -> String {
    let mut r = format!(
        "domain: soak\ndescriptors:\n  - key: good\n    rate_limit: {{unit: hour, requests_per_unit: {LIMIT}}}\n  - key: bulk\n    rate_limit: {{unit: hour, requests_per_unit: 1000000000}}\n"
    );
    for i in 0..filler {
        r.push_str(&format!(
            "  - key: filler{i}\n    rate_limit: {{unit: minute, requests_per_unit: 5}}\n"
        ));
    }
    r
}

fn hour_now() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.unwrap().as_secs() / 3600
}

fn request(key: &str, value: &str, n: usize) -> Request {
    Request::new("soak", vec![Descriptor::new([(key, value)]); n])
}

/// One good client: keys in turn, `CALLS_PER_KEY` calls each; returns the latencies and
/// the number of keys whose count was wrong.
async fn good_client(ch: Channel, id: String, stop: Arc<AtomicBool>) -> (Vec<Duration>, usize) {
    let mut client = RateLimitServiceClient::new(ch);
    let (mut latencies, mut miscounted) = (Vec::new(), 0);
    let mut key = 0;
    while !stop.load(Relaxed) {
        let r = convert::request_to_pb(&request("good", &format!("{id}-k{key}"), 1));
        let window = hour_now();
        let mut allowed = 0;
        for _ in 0..CALLS_PER_KEY {
            let started = Instant::now();
            let answer = client
                .should_rate_limit(r.clone())
                .await
                .expect("good call");
            latencies.push(started.elapsed());
            let code = convert::response_from_pb(answer.get_ref()).overall_code;
            allowed += usize::from(code == Code::Ok);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // A key whose calls straddle the top of the hour starts a new window: not a miscount.
        miscounted += usize::from(allowed != LIMIT && hour_now() == window);
        key += 1;
    }
    (latencies, miscounted)
}

/// Holds up to `most` connections that never speak, reopening those the server closes.
fn idle_flood(addr: SocketAddr, most: usize, stop: Arc<AtomicBool>) -> usize {
    let mut held: Vec<TcpStream> = Vec::new();
    let mut opened = 0;
    while !stop.load(Relaxed) {
        // Drop the ones the server closed (a read sees the end at once).
        held.retain(|s| {
            s.set_nonblocking(true).unwrap();
            let mut b = [0u8; 1];
            matches!(s.peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        });
        while held.len() < most && !stop.load(Relaxed) {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => {
                    held.push(s);
                    opened += 1;
                }
                Err(_) => break,
            }
            if opened % 200 == 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    opened
}

/// Sends the largest request allowed and one over the limit, in turn.
async fn oversized(ch: Channel, stop: Arc<AtomicBool>) -> (usize, usize) {
    let mut client = RateLimitServiceClient::new(ch);
    let largest = convert::request_to_pb(&request("bulk", "b", 1000));
    let over = convert::request_to_pb(&request("bulk", "b", 5000));
    let (mut decided, mut refused) = (0, 0);
    while !stop.load(Relaxed) {
        if client.should_rate_limit(largest.clone()).await.is_ok() {
            decided += 1;
        }
        match client.should_rate_limit(over.clone()).await {
            Err(s) if s.code() == tonic::Code::ResourceExhausted => refused += 1,
            Ok(_) => panic!("an oversized request was decided"),
            Err(s) => panic!("an oversized request failed otherwise: {s:?}"),
        }
    }
    (decided, refused)
}

/// Good traffic alone on `good` for `length`: the server in service before any abuse.
/// Returns how many keys were miscounted.
async fn good_only(good: &[Channel], length: Duration) -> usize {
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = good
        .iter()
        .enumerate()
        .map(|(i, ch)| tokio::spawn(good_client(ch.clone(), format!("calm{i}"), stop.clone())))
        .collect();
    tokio::time::sleep(length).await;
    stop.store(true, Relaxed);
    let mut miscounted = 0;
    for c in clients {
        miscounted += c.await.unwrap().1;
    }
    miscounted
}

/// What one round of load saw.
struct Round {
    latencies: Vec<Duration>,
    miscounted: usize,
    unhealthy: usize,
    opened: usize,
    decided: usize,
    refused: usize,
    reloads: usize,
}

/// Good traffic on `good`, with every kind of abuse at once, for `length`.
async fn round(srv: &common::Server, good: &[Channel], name: &str, length: Duration) -> Round {
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = good
        .iter()
        .enumerate()
        .map(|(i, ch)| tokio::spawn(good_client(ch.clone(), format!("{name}{i}"), stop.clone())))
        .collect();
    let grpc: SocketAddr = srv.grpc.parse().unwrap();
    let flood = {
        let stop = stop.clone();
        std::thread::spawn(move || idle_flood(grpc, 1100, stop))
    };
    let big = tokio::spawn(oversized(channel(&srv.grpc).await, stop.clone()));
    let (http, dir) = (srv.http, srv.dir.clone());
    let reloads_and_health = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut reloads, mut unhealthy) = (0, 0);
            let mut next_reload = Instant::now() + Duration::from_secs(1);
            while !stop.load(Relaxed) {
                if Instant::now() >= next_reload {
                    reloads += 1;
                    let filler = if reloads % 2 == 1 { 2000 } else { 0 };
                    std::fs::write(dir.join("config/soak.yaml"), rules(filler)).unwrap();
                    next_reload += Duration::from_secs(1);
                }
                if common::request(http, "GET", "/healthcheck", b"").status != 200 {
                    unhealthy += 1;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            // End on the rules the soak started with.
            std::fs::write(dir.join("config/soak.yaml"), rules(0)).unwrap();
            (reloads, unhealthy)
        })
    };
    tokio::time::sleep(length).await;
    stop.store(true, Relaxed);

    let (mut latencies, mut miscounted) = (Vec::new(), 0);
    for c in clients {
        let (l, m) = c.await.unwrap();
        latencies.extend(l);
        miscounted += m;
    }
    latencies.sort();
    let (decided, refused) = big.await.unwrap();
    let opened = tokio::task::spawn_blocking(move || flood.join().unwrap())
        .await
        .unwrap();
    let (reloads, unhealthy) = reloads_and_health.join().unwrap();
    Round {
        latencies,
        miscounted,
        unhealthy,
        opened,
        decided,
        refused,
        reloads,
    }
}

/// The server's RSS once it has settled: the lowest of a few readings over two seconds.
async fn settled_rss_kb(pid: u32) -> u64 {
    let mut lowest = u64::MAX;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        lowest = lowest.min(rss_kb(pid));
    }
    lowest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn good_traffic_holds_through_floods_oversized_requests_and_reloads() {
    // The flood below holds about 1,200 sockets in this process.
    rlimit::increase_nofile_limit(8192).unwrap();
    let srv = common::start_with_file_limit(
        1024,
        &[("soak.yaml", &rules(0))],
        &[("CONNECTION_FIRST_BYTE_TIMEOUT", "2s")],
    );
    let pid = srv.proc.child.id();
    // Long-lived connections, as Envoy keeps them.
    let good: Vec<Channel> =
        futures_util::future::join_all((0..4).map(|_| channel(&srv.grpc))).await;
    let cold = settled_rss_kb(pid).await;
    // The soak starts from the server in service: good traffic alone first, which also
    // pages in the code that serves it.
    assert_eq!(
        good_only(&good, Duration::from_secs(5)).await,
        0,
        "good keys were miscounted before the soak"
    );
    let start = settled_rss_kb(pid).await;

    let soak = round(&srv, &good, "soak", SOAK).await;
    // Memory comes back in steps: the flood's sockets and idle threads' free pages at once,
    // a runtime's idle blocking thread (and its allocator heap) about 10 s later, the
    // statistics of rules a reload removed at the next flush (10 s). Give it 15 s.
    let bound = start * 6 / 5;
    let mut after = settled_rss_kb(pid).await;
    for _ in 0..13 {
        if after <= bound {
            break;
        }
        after = after.min(settled_rss_kb(pid).await);
    }
    let p99 = soak.latencies[soak.latencies.len() * 99 / 100];
    eprintln!(
        "soak: {} good calls, p99 {p99:?}; {} idle connections opened; {} largest requests \
         decided, {} oversized refused; {} reloads; RSS {cold} kB cold, {start} kB at the start, \
         {after} kB after",
        soak.latencies.len(),
        soak.opened,
        soak.decided,
        soak.refused,
        soak.reloads
    );
    assert_eq!(soak.miscounted, 0, "good keys were miscounted");
    assert_eq!(soak.unhealthy, 0, "/healthcheck failed during the soak");
    assert!(p99 < Duration::from_millis(50), "p99 {p99:?}");
    assert!(soak.opened > 1000 && soak.decided > 0 && soak.refused > 0 && soak.reloads >= 10);
    assert!(
        after <= bound,
        "RSS {start} kB at the start of the soak, {after} kB after: over 1.2 times"
    );
}
