//! An HTTP/1.1 load generator, for the latency and the throughput a proxy in front of an
//! app gets with one rate limit service or another.
//!
//! `--rate` requests a second spread over `--conns` keep-alive connections, `GET /` with an
//! `x-api-key` header cycling over `--keys` values. Each request is timed from when it was
//! due, not from when it was sent, so a stall shows in the tail instead of quietly slowing
//! the schedule (coordinated omission). tokio's timer wakes at millisecond granularity, so
//! a request may leave up to about 1 ms after it was due: the `send_*` columns time from
//! the actual send instead.
//!
//! `--rate 0` is closed loop instead: each connection sends its next request as soon as the
//! last is answered, for `--duration` seconds; `rate=` is then the answers a second, and a
//! request is due when it is sent.
//!
//! Prints one line: `LABEL rate=R sent=N non200=E p50_us=.. p90_us=.. p99_us=.. max_us=..
//! send_p50_us=.. send_p99_us=..`.
//!
//! Usage: rl-http --addr HOST:PORT [--rate 2000 | 0] [--duration 5] [--conns 16] [--keys 1000]
//!        [--label http]

use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Options {
    addr: String,
    rate: u64,
    duration: u64,
    conns: u64,
    keys: u64,
    label: String,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        addr: String::new(),
        rate: 2000,
        duration: 5,
        conns: 16,
        keys: 1000,
        label: "http".into(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: not a number"))
        };
        match flag.as_str() {
            "--addr" => o.addr = value.clone(),
            "--rate" => o.rate = number()?,
            "--duration" => o.duration = number()?.max(1),
            "--conns" => o.conns = number()?.max(1),
            "--keys" => o.keys = number()?.max(1),
            "--label" => o.label = value.clone(),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if o.addr.is_empty() {
        return Err("--addr is required".into());
    }
    Ok(o)
}

/// When a connection sends its requests.
#[derive(Clone, Copy)]
enum Schedule {
    /// Requests `first`, `first + step`, ... of `total`, each due at its place in a fixed
    /// `rate` a second from `start`.
    Fixed { rate: u64, total: u64, step: u64 },
    /// One after another from `start`, each sent when the last is answered, until `until`.
    Closed { until: Instant },
}

/// One connection's requests: latencies from when each was due and from its send, and the
/// answers that were not 200.
async fn connection(
    addr: String,
    first: u64,
    schedule: Schedule,
    keys: u64,
    start: Instant,
) -> Result<(Histogram<u64>, Histogram<u64>, u64), String> {
    let stream = TcpStream::connect(&addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut stream = BufReader::new(stream);
    let mut hist = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    let mut sent_hist = hist.clone();
    let (mut non_200, mut line) = (0, String::new());
    tokio::time::sleep_until(start).await;
    let mut i = first;
    loop {
        let due = match schedule {
            Schedule::Fixed { rate, total, .. } if i < total => {
                let due = start + Duration::from_nanos(i * 1_000_000_000 / rate);
                tokio::time::sleep_until(due).await;
                due
            }
            Schedule::Closed { until } if Instant::now() < until => Instant::now(),
            _ => break,
        };
        let sent = Instant::now();
        let ok = exchange(&mut stream, &mut line, i % keys).await?;
        non_200 += u64::from(!ok);
        let _ = hist.record(due.elapsed().as_micros() as u64);
        let _ = sent_hist.record(sent.elapsed().as_micros() as u64);
        i += match schedule {
            Schedule::Fixed { step, .. } => step,
            Schedule::Closed { .. } => 1,
        };
    }
    Ok((hist, sent_hist, non_200))
}

/// Sends one request with API key `key` and reads its answer: whether it was a 200.
async fn exchange(
    stream: &mut BufReader<TcpStream>,
    line: &mut String,
    key: u64,
) -> Result<bool, String> {
    let request = format!("GET / HTTP/1.1\r\nHost: bench\r\nx-api-key: k{key}\r\n\r\n");
    stream
        .get_mut()
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut length = 0usize;
    let mut status_ok = false;
    let mut first_line = true;
    loop {
        line.clear();
        if stream.read_line(line).await.map_err(|e| e.to_string())? == 0 {
            return Err("the server closed the connection".into());
        }
        let l = line.trim_end();
        if first_line {
            status_ok = l.split(' ').nth(1) == Some("200");
            first_line = false;
        } else if l.is_empty() {
            break;
        } else if let Some((name, value)) = l.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().map_err(|_| "bad content-length")?;
        }
    }
    let mut body = vec![0u8; length];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| format!("body: {e}"))?;
    Ok(status_ok)
}

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rl-http: {e}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let start = Instant::now() + Duration::from_millis(100);
    let schedule = match o.rate {
        0 => Schedule::Closed {
            until: start + Duration::from_secs(o.duration),
        },
        rate => Schedule::Fixed {
            rate,
            total: rate * o.duration,
            step: o.conns,
        },
    };
    let result = runtime.block_on(async {
        let tasks: Vec<_> = (0..o.conns)
            .map(|k| tokio::spawn(connection(o.addr.clone(), k, schedule, o.keys, start)))
            .collect();
        let mut all = Histogram::<u64>::new(3).expect("a histogram");
        let mut all_sent = all.clone();
        let mut non_200 = 0;
        for t in tasks {
            let (h, s, e) = t.await.map_err(|e| e.to_string())??;
            all.add(&h).map_err(|e| e.to_string())?;
            all_sent.add(&s).map_err(|e| e.to_string())?;
            non_200 += e;
        }
        Ok::<_, String>((all, all_sent, non_200))
    });
    match result {
        Ok((h, s, non_200)) => println!(
            "{} rate={} sent={} non200={} p50_us={} p90_us={} p99_us={} max_us={} \
             send_p50_us={} send_p99_us={}",
            o.label,
            match o.rate {
                0 => h.len() / o.duration,
                rate => rate,
            },
            h.len(),
            non_200,
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.9),
            h.value_at_quantile(0.99),
            h.max(),
            s.value_at_quantile(0.5),
            s.value_at_quantile(0.99)
        ),
        Err(e) => {
            eprintln!("rl-http: {e}");
            std::process::exit(1);
        }
    }
}
