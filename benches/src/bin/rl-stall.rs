//! How much one client's large requests slow another client's small ones when both
//! connections are served by the same connection thread.
//!
//! `rl-stall ADDR DESCRIPTORS SECONDS`: a victim sends one-descriptor `ShouldRateLimit`
//! calls back to back on one connection while an attacker sends requests of DESCRIPTORS
//! descriptors (0: no attacker) back to back on another; prints the victim's calls and
//! latency percentiles, and how the attacker's requests were answered.

use std::time::{Duration, Instant};

use ratelimit_core::{Descriptor, Request};
use ratelimit_server::convert;
use ratelimit_server::pb::rls::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::{Channel, Endpoint};

async fn connect(addr: &str) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"))
}

fn request(value: &str, descriptors: usize) -> Request {
    Request::new("api", vec![Descriptor::new([("user", value)]); descriptors])
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, addr, descriptors, seconds] = args.as_slice() else {
        eprintln!("usage: rl-stall ADDR DESCRIPTORS SECONDS");
        std::process::exit(2);
    };
    let descriptors: usize = descriptors.parse().expect("DESCRIPTORS: a number");
    let length = Duration::from_secs(seconds.parse().expect("SECONDS: a number"));
    let victim = connect(addr).await;
    let deadline = Instant::now() + length;
    let attacker_addr = addr.clone();
    let attack = async move {
        let (mut ok, mut refused) = (0u64, 0u64);
        if descriptors == 0 {
            return (ok, refused);
        }
        let mut client = RateLimitServiceClient::new(connect(&attacker_addr).await)
            .max_encoding_message_size(usize::MAX)
            .max_decoding_message_size(usize::MAX);
        let big = convert::request_to_pb(&request("a", descriptors));
        while Instant::now() < deadline {
            match client.should_rate_limit(big.clone()).await {
                Ok(_) => ok += 1,
                Err(_) => refused += 1,
            }
        }
        (ok, refused)
    };
    let victim_calls = async {
        let mut client = RateLimitServiceClient::new(victim);
        let small = convert::request_to_pb(&request("victim", 1));
        let mut latencies = Vec::new();
        while Instant::now() < deadline {
            let started = Instant::now();
            client
                .should_rate_limit(small.clone())
                .await
                .expect("victim call");
            latencies.push(started.elapsed());
        }
        latencies
    };
    // The attacker runs on a thread and a runtime of its own (its connection's task too),
    // so that on this side it never waits on the victim.
    let attack = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(attack)
    });
    // Both connections open before the victim starts timing.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut latencies = victim_calls.await;
    let (ok, refused) = attack.join().expect("attacker");
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "descriptors={descriptors} victim_calls={} p50_us={} p99_us={} max_us={} attacker_ok={ok} attacker_refused={refused}",
        latencies.len(),
        at(0.50).as_micros(),
        at(0.99).as_micros(),
        latencies.last().map_or(0, |d| d.as_micros()),
    );
}
