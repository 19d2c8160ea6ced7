//! Load generator for the `ratelimit` server (and the null server): N concurrent streams of
//! `ShouldRateLimit` over gRPC or `POST /json` over HTTP/1.1, closed loop or at a fixed
//! offered rate, reporting decisions/s and latency percentiles.
//!
//! ```text
//! rl-load [--target grpc|json] [--addr 127.0.0.1:8081] [--streams 64] [--conns 1]
//!         [--duration 10 | --count N] [--rate DECISIONS_PER_SEC] [--keys 1000]
//!         [--domain api] [--key user] [--override] [--threads 1] [--label name]
//!         [--warmup REQUESTS_PER_STREAM] [--channel | --raw | --h2]
//! ```
//!
//! gRPC goes through tonic's generated client on a bare hyper HTTP/2 connection per
//! `--conns`; `--channel` puts tonic's `Channel` (buffer task, reconnect) in between instead,
//! as a service would use it, to compare what that costs the shared cores. `--raw` sends
//! the same calls with [`ratelimit_benches::h2raw`], a lean HTTP/2 client on plain threads
//! (see `raw.rs`): the counterpart of `redis-benchmark`'s client, so that the Redis ratio
//! measures the server and not the client's share of the two cores. `--threads` sizes
//! tokio's runtime and so does not apply to it. `--h2` uses the `h2` crate directly (see
//! `h2call.rs`): each call is its own `send_request` and DATA frame, written when the
//! connection task next runs, without tonic or hyper in between: another write pattern.
//!
//! Open loop (`--rate`): each stream owns every `streams`-th slot of a fixed schedule and
//! latency is measured from the slot's scheduled time, not from when the request was
//! actually sent, so a stalled server shows up in the percentiles (no coordinated omission).
//! A pacer thread hands out the slots: it wakes every [`PACE`] and releases every slot that
//! is due, so a request leaves at most about that late (tokio's timer alone rounds to 1 ms,
//! which released the slots of a whole millisecond as one burst). The `send_*` columns
//! measure from the actual send instead (the service time, as a closed loop sees it).
//! `load_cpu_us` is this process's CPU time per decision: on shared cores, what the
//! measurement itself took from the server. The `pacer_late_*` columns are how late the pacer's own sleeps ended: a thread that
//! does nothing but wake up, so they are this machine's scheduling hiccups during the run,
//! which no server on it can answer faster than.

use std::time::{Duration, Instant};

mod direct;
mod h2call;
mod json;
mod raw;

use tokio::sync::mpsc;

use direct::{Direct, connect_direct};
use json::JsonConn;

/// How often the pacer releases due slots: short enough that slots leave close to their
/// time, long enough that the pacer costs the shared cores next to nothing.
const PACE: Duration = Duration::from_micros(100);

use hdrhistogram::Histogram;
use ratelimit_server::pb::rls;
use ratelimit_server::pb::rls::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::{Channel, Endpoint};

// The load generator shares two cores with what it measures: every cycle it spends on
// glibc's malloc (about a sixth of its time) is a cycle the server does not get.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Clone)]
struct Opts {
    target: String,
    addr: String,
    streams: u64,
    conns: u64,
    duration: Option<Duration>,
    count: Option<u64>,
    rate: Option<f64>,
    keys: u64,
    domain: String,
    key: String,
    with_override: bool,
    threads: usize,
    label: String,
    warmup: u64,
    channel: bool,
    raw: bool,
    h2: bool,
}

impl Opts {
    /// Which client sent the load, for the RESULT line.
    fn client(&self) -> &'static str {
        match (self.target.as_str(), self.raw, self.channel) {
            ("json", ..) => "http1",
            (_, true, _) => "raw",
            (_, _, true) => "channel",
            _ if self.h2 => "h2",
            _ => "tonic",
        }
    }
}

fn parse() -> Opts {
    let mut o = Opts {
        target: "grpc".into(),
        addr: "127.0.0.1:8081".into(),
        streams: 64,
        conns: 1,
        duration: None,
        count: None,
        rate: None,
        keys: 1000,
        domain: "api".into(),
        key: "user".into(),
        with_override: false,
        threads: 1,
        label: String::new(),
        warmup: 0,
        channel: false,
        raw: false,
        h2: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].as_str();
        if flag == "--override" {
            o.with_override = true;
            i += 1;
            continue;
        }
        if flag == "--channel" {
            o.channel = true;
            i += 1;
            continue;
        }
        if flag == "--raw" {
            o.raw = true;
            i += 1;
            continue;
        }
        if flag == "--h2" {
            o.h2 = true;
            i += 1;
            continue;
        }
        let Some(v) = args.get(i + 1).cloned() else {
            usage(&format!("{flag} needs a value"));
        };
        let num = |v: &str| -> f64 { v.parse().unwrap_or_else(|_| usage(&format!("bad {flag}"))) };
        match flag {
            "--target" => o.target = v,
            "--addr" => o.addr = v,
            "--streams" => o.streams = num(&v) as u64,
            "--conns" => o.conns = num(&v) as u64,
            "--duration" => o.duration = Some(Duration::from_secs_f64(num(&v))),
            "--count" => o.count = Some(num(&v) as u64),
            "--rate" => o.rate = Some(num(&v)),
            "--keys" => o.keys = num(&v) as u64,
            "--domain" => o.domain = v,
            "--key" => o.key = v,
            "--threads" => o.threads = num(&v) as usize,
            "--label" => o.label = v,
            "--warmup" => o.warmup = num(&v) as u64,
            _ => usage(&format!("unknown flag {flag}")),
        }
        i += 2;
    }
    if o.streams == 0 || o.conns == 0 || o.keys == 0 || o.threads == 0 {
        usage("streams, conns, keys and threads must be positive");
    }
    if !matches!(o.target.as_str(), "grpc" | "json") {
        usage("--target is grpc or json");
    }
    if o.raw && (o.target != "grpc" || o.channel) {
        usage("--raw is a gRPC client of its own: not with --target json or --channel");
    }
    if o.h2 && (o.target != "grpc" || o.channel || o.raw) {
        usage("--h2 is a gRPC client of its own: not with --target json, --channel or --raw");
    }
    if o.duration.is_none() && o.count.is_none() {
        o.duration = Some(Duration::from_secs(10));
    }
    if o.label.is_empty() {
        o.label = o.target.clone();
    }
    o
}

fn usage(msg: &str) -> ! {
    eprintln!("rl-load: {msg}");
    eprintln!(
        "usage: rl-load [--target grpc|json] [--addr HOST:PORT] [--streams N] [--conns N] \
         [--duration SECS | --count N] [--rate PER_SEC] [--keys N] [--domain D] [--key K] \
         [--override] [--threads N] [--label NAME] [--warmup N] [--channel | --raw]"
    );
    std::process::exit(2)
}

#[derive(Default)]
struct Tally {
    ok: u64,
    over: u64,
    errors: u64,
}

/// Which request a global sequence number sends: key `seq % keys`, so `--count` equal to
/// `--keys` touches every key exactly once (the memory test's 1M distinct counters).
fn value_for(o: &Opts, seq: u64) -> String {
    if o.with_override {
        format!("ovr{}", seq % o.keys)
    } else {
        format!("u{}", seq % o.keys)
    }
}

fn grpc_request(o: &Opts, seq: u64) -> rls::RateLimitRequest {
    use ratelimit_server::pb::envoy::extensions::common::ratelimit::v3 as common;
    let limit = o
        .with_override
        .then_some(common::rate_limit_descriptor::RateLimitOverride {
            requests_per_unit: 1_000_000,
            unit: 2,
        });
    rls::RateLimitRequest {
        domain: o.domain.clone(),
        descriptors: vec![common::RateLimitDescriptor {
            entries: vec![common::rate_limit_descriptor::Entry {
                key: o.key.clone(),
                value: value_for(o, seq),
            }],
            limit,
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

fn json_body(o: &Opts, seq: u64) -> String {
    let limit = if o.with_override {
        r#","limit":{"requests_per_unit":1000000,"unit":"MINUTE"}"#
    } else {
        ""
    };
    format!(
        r#"{{"domain":"{}","descriptors":[{{"entries":[{{"key":"{}","value":"{}"}}]{limit}}}]}}"#,
        o.domain,
        o.key,
        value_for(o, seq)
    )
}

enum Conn {
    Grpc(RateLimitServiceClient<Channel>),
    Direct(RateLimitServiceClient<Direct>),
    H2(h2call::H2Conn),
    Json(JsonConn),
}

fn allowed(r: Result<tonic::Response<rls::RateLimitResponse>, tonic::Status>) -> Option<bool> {
    let code = r.ok()?.into_inner().overall_code;
    Some(code == rls::rate_limit_response::Code::Ok as i32)
}

/// Sends one request: `Some(true)` allowed, `Some(false)` over the limit, `None` failed.
async fn send(o: &Opts, conn: &mut Conn, seq: u64) -> Option<bool> {
    match conn {
        Conn::Grpc(c) => allowed(c.should_rate_limit(grpc_request(o, seq)).await),
        Conn::Direct(c) => allowed(c.should_rate_limit(grpc_request(o, seq)).await),
        Conn::H2(c) => c.call(&grpc_request(o, seq)).await,
        Conn::Json(c) => match c.post(&o.addr, &json_body(o, seq)).await {
            Ok(200) => Some(true),
            Ok(429) => Some(false),
            Ok(_) => None,
            Err(_) => {
                if let Ok(fresh) = JsonConn::connect(&o.addr).await {
                    *c = fresh;
                }
                None
            }
        },
    }
}

/// One stream: sends its share of the sequence until the deadline or the count.
async fn stream(
    o: Opts,
    idx: u64,
    mut conn: Conn,
    start: Instant,
    mut slots: Option<mpsc::UnboundedReceiver<(u64, Instant)>>,
    (mut hist, mut sent_hist): (Histogram<u64>, Histogram<u64>),
) -> (Histogram<u64>, Histogram<u64>, Tally) {
    let mut tally = Tally::default();
    let mut k: u64 = 0;
    loop {
        let (seq, scheduled) = match &mut slots {
            // The pacer ends the run by closing the channel.
            Some(rx) => match rx.recv().await {
                Some(slot) => slot,
                None => break,
            },
            None => {
                let seq = k * o.streams + idx;
                if o.count.is_some_and(|c| seq >= c) {
                    break;
                }
                let now = Instant::now();
                if o.duration.is_some_and(|d| now.duration_since(start) >= d) {
                    break;
                }
                (seq, now)
            }
        };
        let outcome = if slots.is_some() {
            let sent = Instant::now();
            let outcome = send(&o, &mut conn, seq).await;
            let _ = hist.record(scheduled.elapsed().as_nanos().max(1) as u64);
            let _ = sent_hist.record(sent.elapsed().as_nanos().max(1) as u64);
            outcome
        } else {
            // Closed loop: scheduled when sent, so one clock read and one histogram; the
            // send columns are copied from it at the end.
            let outcome = send(&o, &mut conn, seq).await;
            let _ = hist.record(scheduled.elapsed().as_nanos().max(1) as u64);
            outcome
        };
        match outcome {
            Some(true) => tally.ok += 1,
            Some(false) => tally.over += 1,
            None => tally.errors += 1,
        }
        k += 1;
    }
    if slots.is_none() {
        sent_hist = hist.clone();
    }
    (hist, sent_hist, tally)
}

async fn run(o: Opts) {
    let mut channels = Vec::new();
    let mut direct = Vec::new();
    let mut h2conns = Vec::new();
    if o.h2 {
        for _ in 0..o.conns {
            h2conns.push(h2call::H2Conn::connect(&o.addr).await.unwrap_or_else(|e| {
                eprintln!("rl-load: cannot connect to {}: {e}", o.addr);
                std::process::exit(1)
            }));
        }
    } else if o.target == "grpc" && !o.channel {
        let origin: http::Uri = format!("http://{}", o.addr).parse().unwrap_or_else(|e| {
            eprintln!("rl-load: bad address {}: {e}", o.addr);
            std::process::exit(2)
        });
        for _ in 0..o.conns {
            let d = connect_direct(&o.addr).await.unwrap_or_else(|e| {
                eprintln!("rl-load: cannot connect to {}: {e}", o.addr);
                std::process::exit(1)
            });
            direct.push((d, origin.clone()));
        }
    } else if o.target == "grpc" {
        for _ in 0..o.conns {
            let ch = Endpoint::from_shared(format!("http://{}", o.addr))
                .expect("address")
                .tcp_nodelay(true)
                .connect()
                .await
                .unwrap_or_else(|e| {
                    eprintln!("rl-load: cannot connect to {}: {e}", o.addr);
                    std::process::exit(1)
                });
            channels.push(ch);
        }
    }
    let mut conns = Vec::new();
    for i in 0..o.streams {
        conns.push(if let Some(h) = h2conns.get((i % o.conns) as usize) {
            Conn::H2(h.clone())
        } else if let Some((d, origin)) = direct.get((i % o.conns) as usize) {
            Conn::Direct(RateLimitServiceClient::with_origin(
                d.clone(),
                origin.clone(),
            ))
        } else if o.target == "grpc" {
            Conn::Grpc(RateLimitServiceClient::new(
                channels[(i % o.conns) as usize].clone(),
            ))
        } else {
            Conn::Json(JsonConn::connect(&o.addr).await.unwrap_or_else(|e| {
                eprintln!("rl-load: cannot connect to {}: {e}", o.addr);
                std::process::exit(1)
            }))
        });
    }
    if o.warmup > 0 {
        // Every stream's first requests (connection windows, lazily built state on both
        // sides) before the clock starts; all on the key of sequence number 0, so a run
        // over N distinct keys still touches exactly N.
        let warming: Vec<_> = conns
            .into_iter()
            .map(|mut c| {
                let o = o.clone();
                tokio::spawn(async move {
                    for _ in 0..o.warmup {
                        let _ = send(&o, &mut c, 0).await;
                    }
                    c
                })
            })
            .collect();
        conns = Vec::new();
        for w in warming {
            conns.push(w.await.expect("warm-up task"));
        }
    }
    // Made before the clock starts: 128 histograms of ~200 KB each, zeroed, took the first
    // ~20 ms of every run, and showed as a 12-15 ms p99.9 in open-loop runs.
    let mut hists: Vec<_> = (0..conns.len()).map(|_| (new_hist(), new_hist())).collect();
    let cpu_before = cpu_ticks();
    let start = Instant::now();
    let mut receivers = Vec::new();
    let mut pacer = None;
    if let Some(rate) = o.rate {
        let mut senders = Vec::new();
        for _ in 0..o.streams {
            let (tx, rx) = mpsc::unbounded_channel();
            senders.push(tx);
            receivers.push(Some(rx));
        }
        let (count, duration) = (o.count, o.duration);
        pacer = Some(std::thread::spawn(move || {
            pace(rate, start, count, duration, senders)
        }));
    } else {
        receivers.resize_with(conns.len(), || None);
    }
    let tasks: Vec<_> = conns
        .into_iter()
        .zip(receivers)
        .enumerate()
        .map(|(i, (c, rx))| {
            let h = hists.pop().expect("one per stream");
            tokio::spawn(stream(o.clone(), i as u64, c, start, rx, h))
        })
        .collect();
    let mut hist = new_hist();
    let mut sent_hist = new_hist();
    let mut tally = Tally::default();
    for t in tasks {
        let (h, s, t) = t.await.expect("stream task");
        hist.add(&h).expect("same bounds");
        sent_hist.add(&s).expect("same bounds");
        tally.ok += t.ok;
        tally.over += t.over;
        tally.errors += t.errors;
    }
    let secs = start.elapsed().as_secs_f64();
    let late = pacer.map(|p| p.join().expect("pacer thread"));
    report(&o, secs, &hist, &sent_hist, &tally, cpu_before, late);
}

/// Prints the RESULT line every client path ends with.
fn report(
    o: &Opts,
    secs: f64,
    hist: &Histogram<u64>,
    sent_hist: &Histogram<u64>,
    tally: &Tally,
    cpu_before: Option<u64>,
    late: Option<Histogram<u64>>,
) {
    let cpu_col = match (cpu_before, cpu_ticks()) {
        (Some(a), Some(b)) if tally.ok + tally.over > 0 => format!(
            " load_cpu_us={:.1}",
            (b - a) as f64 * 1e6 / TICKS_PER_SEC / (tally.ok + tally.over) as f64
        ),
        _ => String::new(),
    };
    let late_cols = late.map_or(String::new(), |h| {
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        format!(
            " pacer_late_p99_us={:.0} pacer_late_p999_us={:.0} pacer_late_max_us={:.0}",
            us(0.99),
            us(0.999),
            h.max() as f64 / 1000.0
        )
    });
    let decided = tally.ok + tally.over;
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    let send_us = |q: f64| sent_hist.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "RESULT label={} target={} client={} streams={} conns={} offered={} decisions={} errors={} \
         over_limit={} secs={secs:.2} rate={:.0} p50_us={:.0} p99_us={:.0} p999_us={:.0} max_us={:.0} \
         send_p50_us={:.0} send_p99_us={:.0} send_p999_us={:.0}{cpu_col}{late_cols}",
        o.label,
        o.target,
        o.client(),
        o.streams,
        o.conns,
        o.rate.map_or("closed".into(), |r| format!("{r:.0}")),
        decided,
        tally.errors,
        tally.over,
        decided as f64 / secs,
        us(0.5),
        us(0.99),
        us(0.999),
        hist.max() as f64 / 1000.0,
        send_us(0.5),
        send_us(0.99),
        send_us(0.999),
    );
}

/// Releases the open-loop schedule: slot `seq` is due at `start + seq / rate` and goes to
/// stream `seq % streams`, whatever that stream is doing (a busy stream's slots wait in its
/// queue, and that wait counts in the latency from the schedule).
fn pace(
    rate: f64,
    start: Instant,
    count: Option<u64>,
    duration: Option<Duration>,
    senders: Vec<mpsc::UnboundedSender<(u64, Instant)>>,
) -> Histogram<u64> {
    let mut late = new_hist();
    let streams = senders.len() as u64;
    let mut seq = 0u64;
    loop {
        let now = Instant::now();
        loop {
            if count.is_some_and(|c| seq >= c) {
                return late;
            }
            let at = start + Duration::from_secs_f64(seq as f64 / rate);
            if duration.is_some_and(|d| at.duration_since(start) >= d) {
                return late;
            }
            if at > now {
                break;
            }
            // A closed channel means the runtime is gone: nothing left to pace.
            if senders[(seq % streams) as usize].send((seq, at)).is_err() {
                return late;
            }
            seq += 1;
        }
        let asleep = Instant::now();
        std::thread::sleep(PACE);
        let over = asleep.elapsed().saturating_sub(PACE);
        let _ = late.record(over.as_nanos().max(1) as u64);
    }
}

/// Linux reports process CPU time in `USER_HZ` ticks, 100 a second on every architecture
/// it runs on.
const TICKS_PER_SEC: f64 = 100.0;

/// This process's user + system CPU time in ticks, from `/proc/self/stat` (fields 14 and 15,
/// counted after the parenthesised command name, which may itself hold spaces). `None`
/// off Linux: the column is then left out. With it, a run shows what the load generator
/// itself cost the cores it shares with the server.
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let mut f = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let utime: u64 = f.nth(11)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Nanoseconds, 1 ns to 60 s, 3 significant digits.
fn new_hist() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("bounds")
}

fn main() {
    let o = parse();
    if o.raw {
        raw::run(o);
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.threads)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(o));
}
