//! `--raw`: the same calls on [`h2raw`]'s lean HTTP/2 client, one plain thread per
//! connection and blocking sockets, no runtime.
//!
//! Closed loop, a connection's thread keeps its share of `--streams` in flight: it writes
//! every request it may send in one write, reads whatever answers have come, and starts
//! as many new calls as ended (one clock read per read, as `redis-benchmark` does per
//! event-loop turn). Open loop, a second thread per connection reads the answers while
//! the first releases the schedule's slots every [`PACE`]; a call's slot, and so its
//! scheduled time, follows from its stream id, so the two threads share nothing per call
//! but an atomic send time.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use prost::Message;
use ratelimit_benches::h2raw::{self, Answers, Outcome, Requests};

use crate::{Opts, PACE, Tally, cpu_ticks, grpc_request, new_hist, report};

const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// Send times of the open loop's calls in flight, by the connection's call number modulo
/// its length: a call still unanswered this many calls later reads a later call's time.
const SENT_RING: usize = 1 << 16;

/// How long a connection may make no progress (no answer to calls in flight, no call let
/// through) before the run fails instead of hanging.
const STALL: Duration = Duration::from_secs(10);

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

fn fail(conn: u64, what: impl std::fmt::Display) -> ! {
    eprintln!("rl-load: raw connection {conn}: {what}");
    std::process::exit(1)
}

/// Request bodies (length-prefixed gRPC messages) by sequence number: made once per key
/// when there are few keys, per call otherwise (the 1M-key memory run).
struct Bodies {
    o: Opts,
    by_key: Vec<Vec<u8>>,
    scratch: Vec<u8>,
}

impl Bodies {
    fn new(o: &Opts) -> Self {
        let by_key = if o.keys <= 65_536 {
            (0..o.keys).map(|k| encode(o, k)).collect()
        } else {
            Vec::new()
        };
        Bodies {
            o: o.clone(),
            by_key,
            scratch: Vec::new(),
        }
    }

    fn get(&mut self, seq: u64) -> &[u8] {
        if self.by_key.is_empty() {
            self.scratch = encode(&self.o, seq);
            &self.scratch
        } else {
            &self.by_key[(seq % self.o.keys) as usize]
        }
    }
}

fn encode(o: &Opts, seq: u64) -> Vec<u8> {
    let m = grpc_request(o, seq);
    let len = m.encoded_len();
    let mut v = Vec::with_capacity(5 + len);
    v.push(0);
    v.extend_from_slice(&(len as u32).to_be_bytes());
    m.encode(&mut v).expect("a Vec grows");
    v
}

/// Bytes read and not yet parsed.
struct Inbox {
    buf: Vec<u8>,
    filled: usize,
}

impl Inbox {
    fn new() -> Self {
        // Room for many answers per read, and always for the largest frame's remainder.
        Inbox {
            buf: vec![0; 256 * 1024],
            filled: 0,
        }
    }

    fn fill(&mut self, s: &mut TcpStream) -> std::io::Result<()> {
        match s.read(&mut self.buf[self.filled..])? {
            0 => Err(ErrorKind::UnexpectedEof.into()),
            n => {
                self.filled += n;
                Ok(())
            }
        }
    }

    fn parse(
        &mut self,
        answers: &mut Answers,
        done: impl FnMut(u32, Outcome),
    ) -> Result<(), h2raw::H2Error> {
        let used = answers.feed(&self.buf[..self.filled], done)?;
        self.buf.copy_within(used..self.filled, 0);
        self.filled -= used;
        Ok(())
    }
}

/// Send times of the closed loop's calls in flight, by stream id.
struct InFlight {
    base: u32,
    at: VecDeque<Option<Instant>>,
}

impl InFlight {
    fn push(&mut self, id: u32, t: Instant) {
        if self.at.is_empty() {
            self.base = id;
        }
        debug_assert_eq!(id, self.base + 2 * self.at.len() as u32);
        self.at.push_back(Some(t));
    }

    fn take(&mut self, id: u32) -> Option<Instant> {
        let i = (id.checked_sub(self.base)? / 2) as usize;
        let t = self.at.get_mut(i)?.take();
        while self.at.front().is_some_and(Option::is_none) {
            self.at.pop_front();
            self.base += 2;
        }
        t
    }
}

/// One connection, driven by one thread.
struct Link {
    idx: u64,
    s: TcpStream,
    reqs: Requests,
    answers: Answers,
    inbox: Inbox,
    window: i64,
    out: Vec<u8>,
}

impl Link {
    fn connect(o: &Opts, idx: u64) -> Self {
        let s = TcpStream::connect(&o.addr)
            .unwrap_or_else(|e| fail(idx, format_args!("cannot connect to {}: {e}", o.addr)));
        s.set_nodelay(true).unwrap_or_else(|e| fail(idx, e));
        // Sent at once: the server may send its SETTINGS before it reads ours, and the
        // acknowledgement must not overtake the preface (the open loop's reading thread
        // writes it).
        let mut out = Vec::with_capacity(64 * 1024);
        h2raw::opening(&mut out);
        (&s).write_all(&out).unwrap_or_else(|e| fail(idx, e));
        out.clear();
        Link {
            idx,
            s,
            reqs: Requests::new(PATH, &o.addr),
            answers: Answers::default(),
            inbox: Inbox::new(),
            window: Answers::INITIAL_SEND_WINDOW,
            out,
        }
    }

    /// Keeps up to `depth` calls in flight until `next` has no more sequence numbers or
    /// `deadline` passes, then waits for the last answers.
    fn closed(
        &mut self,
        depth: usize,
        mut next: impl FnMut() -> Option<u64>,
        deadline: Option<Instant>,
        bodies: &mut Bodies,
        hist: &mut Histogram<u64>,
        tally: &mut Tally,
    ) {
        let mut sent = InFlight {
            base: self.reqs.next_id(),
            at: VecDeque::new(),
        };
        let mut in_flight = 0usize;
        let mut stopped = false;
        let mut now = Instant::now();
        let mut heard = now;
        // Wakes up to see the deadline even when the server lets no call through.
        self.s
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap_or_else(|e| fail(self.idx, e));
        loop {
            stopped |= deadline.is_some_and(|d| now >= d);
            let control = self.answers.control();
            self.out.extend_from_slice(control);
            control.clear();
            let limit = depth.min(self.answers.max_streams() as usize);
            while !stopped && in_flight < limit {
                let Some(seq) = next() else {
                    stopped = true;
                    break;
                };
                let body = bodies.get(seq);
                if self.window < body.len() as i64 {
                    // No window: wait for the server to grant more.
                    break;
                }
                self.window -= body.len() as i64;
                let id = self
                    .reqs
                    .push(&mut self.out, body)
                    .unwrap_or_else(|e| fail(self.idx, e));
                sent.push(id, now);
                in_flight += 1;
            }
            if !self.out.is_empty() {
                self.s
                    .write_all(&self.out)
                    .unwrap_or_else(|e| fail(self.idx, e));
                self.out.clear();
            }
            if stopped && in_flight == 0 {
                return;
            }
            match self.inbox.fill(&mut self.s) {
                Ok(()) => {}
                Err(e) if is_timeout(&e) => {
                    now = Instant::now();
                    if now.duration_since(heard) >= STALL {
                        fail(
                            self.idx,
                            format_args!(
                                "the server sent nothing for {STALL:?} ({in_flight} calls in flight)"
                            ),
                        );
                    }
                    continue;
                }
                Err(e) => fail(self.idx, e),
            }
            now = Instant::now();
            heard = now;
            self.inbox
                .parse(&mut self.answers, |id, outcome| {
                    let Some(at) = sent.take(id) else { return };
                    in_flight -= 1;
                    let _ = hist.record(now.duration_since(at).as_nanos().max(1) as u64);
                    tally.add(outcome);
                })
                .unwrap_or_else(|e| fail(self.idx, e));
            self.window += self.answers.take_credit();
        }
    }
}

impl Tally {
    fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Allowed => self.ok += 1,
            Outcome::OverLimit => self.over += 1,
            Outcome::Failed => self.errors += 1,
        }
    }
}

/// What one connection measured.
struct Measured {
    hist: Histogram<u64>,
    sent_hist: Histogram<u64>,
    tally: Tally,
    late: Option<Histogram<u64>>,
}

pub(crate) fn run(o: Opts) {
    // A connection's share of the streams (closed loop) or of the schedule (open loop).
    let conns = o.conns;
    let gate = Arc::new(Barrier::new(conns as usize + 1));
    let threads: Vec<_> = (0..conns)
        .map(|c| {
            let o = o.clone();
            let gate = gate.clone();
            std::thread::spawn(move || connection(o, c, &gate))
        })
        .collect();
    // Every connection is up and warm before the clock starts.
    gate.wait();
    let cpu_before = cpu_ticks();
    let start = Instant::now();
    let mut hist = new_hist();
    let mut sent_hist = new_hist();
    let mut tally = Tally::default();
    let mut late: Option<Histogram<u64>> = None;
    for t in threads {
        let m = t.join().expect("connection thread");
        hist.add(&m.hist).expect("same bounds");
        sent_hist.add(&m.sent_hist).expect("same bounds");
        tally.ok += m.tally.ok;
        tally.over += m.tally.over;
        tally.errors += m.tally.errors;
        if let Some(l) = m.late {
            match &mut late {
                Some(all) => all.add(&l).expect("same bounds"),
                None => late = Some(l),
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    report(&o, secs, &hist, &sent_hist, &tally, cpu_before, late);
}

fn connection(o: Opts, c: u64, gate: &Barrier) -> Measured {
    let depth = (o.streams / o.conns + u64::from(c < o.streams % o.conns)).max(1) as usize;
    let mut link = Link::connect(&o, c);
    let mut bodies = Bodies::new(&o);
    let mut hist = new_hist();
    let mut tally = Tally::default();
    if o.warmup > 0 {
        // On the key of sequence number 0, as the other clients warm up.
        let mut left = o.warmup * depth as u64;
        let mut scratch = (new_hist(), Tally::default());
        link.closed(
            depth,
            || {
                left.checked_sub(1).map(|l| {
                    left = l;
                    0
                })
            },
            None,
            &mut bodies,
            &mut scratch.0,
            &mut scratch.1,
        );
    }
    gate.wait();
    let start = Instant::now();
    let Some(rate) = o.rate else {
        let mut k = 0u64;
        let (count, conns) = (o.count, o.conns);
        link.closed(
            depth,
            || {
                let seq = k * conns + c;
                k += 1;
                count.is_none_or(|n| seq < n).then_some(seq)
            },
            o.duration.map(|d| start + d),
            &mut bodies,
            &mut hist,
            &mut tally,
        );
        // Closed loop: sent when scheduled.
        return Measured {
            sent_hist: hist.clone(),
            hist,
            tally,
            late: None,
        };
    };
    open(o, c, link, bodies, start, rate)
}

/// What the open loop's two threads of a connection share.
struct Shared {
    writer: Mutex<TcpStream>,
    window: AtomicI64,
    max_streams: AtomicU32,
    sent: AtomicU64,
    ended: AtomicU64,
    sending_done: AtomicBool,
    /// Nanoseconds from `start` to each call's actual send, by call number.
    sent_ns: Vec<AtomicU64>,
}

fn open(o: Opts, c: u64, link: Link, mut bodies: Bodies, start: Instant, rate: f64) -> Measured {
    let Link {
        idx,
        s,
        mut reqs,
        answers,
        inbox,
        window,
        mut out,
    } = link;
    let first_id = reqs.next_id();
    let shared = Arc::new(Shared {
        writer: Mutex::new(s.try_clone().unwrap_or_else(|e| fail(idx, e))),
        window: AtomicI64::new(window),
        max_streams: AtomicU32::new(answers.max_streams()),
        sent: AtomicU64::new(0),
        ended: AtomicU64::new(0),
        sending_done: AtomicBool::new(false),
        sent_ns: (0..SENT_RING).map(|_| AtomicU64::new(0)).collect(),
    });
    let at = move |seq: u64| start + Duration::from_secs_f64(seq as f64 / rate);
    let reader = {
        let shared = shared.clone();
        let conns = o.conns;
        std::thread::spawn(move || {
            answer_loop(s, answers, inbox, &shared, idx, start, |id| {
                // Anything else is no call of the open loop (the warm-up's all ended).
                let n = u64::from(id.checked_sub(first_id)? / 2);
                Some((n, at(n * conns + c)))
            })
        })
    };
    let mut late = new_hist();
    let mut n = 0u64;
    let mut scheduled_all = false;
    let mut last_sent = Instant::now();
    while !scheduled_all {
        let now = Instant::now();
        let due = at(n * o.conns + c);
        if due < now && now.duration_since(last_sent.max(due)) >= STALL {
            fail(
                idx,
                format_args!(
                    "the server let no call through for {STALL:?} (stream limit or window)"
                ),
            );
        }
        loop {
            let seq = n * o.conns + c;
            let due = at(seq);
            if o.count.is_some_and(|k| seq >= k)
                || o.duration.is_some_and(|d| due.duration_since(start) >= d)
            {
                scheduled_all = true;
                break;
            }
            if due > now {
                break;
            }
            let in_flight = n - shared.ended.load(Ordering::Acquire);
            if in_flight >= u64::from(shared.max_streams.load(Ordering::Relaxed)) {
                break;
            }
            let body = bodies.get(seq);
            let len = body.len() as i64;
            if shared.window.load(Ordering::Acquire) < len {
                break;
            }
            shared.window.fetch_sub(len, Ordering::AcqRel);
            reqs.push(&mut out, body).unwrap_or_else(|e| fail(idx, e));
            let sent_ns = now.duration_since(start).as_nanos() as u64;
            shared.sent_ns[n as usize % SENT_RING].store(sent_ns, Ordering::Relaxed);
            n += 1;
            last_sent = now;
        }
        if !out.is_empty() {
            shared.sent.store(n, Ordering::Release);
            let mut w = shared.writer.lock().expect("writer");
            w.write_all(&out).unwrap_or_else(|e| fail(idx, e));
            drop(w);
            out.clear();
        }
        if scheduled_all {
            break;
        }
        let asleep = Instant::now();
        std::thread::sleep(PACE);
        let over = asleep.elapsed().saturating_sub(PACE);
        let _ = late.record(over.as_nanos().max(1) as u64);
    }
    shared.sent.store(n, Ordering::Release);
    shared.sending_done.store(true, Ordering::Release);
    let (hist, sent_hist, tally) = reader.join().expect("reader thread");
    Measured {
        hist,
        sent_hist,
        tally,
        late: Some(late),
    }
}

/// The open loop's reading side: records each call from its slot's scheduled time
/// (`slot` maps a stream id to its call number and that time) and from its actual send.
fn answer_loop(
    mut s: TcpStream,
    mut answers: Answers,
    mut inbox: Inbox,
    shared: &Shared,
    idx: u64,
    start: Instant,
    slot: impl Fn(u32) -> Option<(u64, Instant)>,
) -> (Histogram<u64>, Histogram<u64>, Tally) {
    // Wakes up now and then to see whether the sender has finished with nothing in flight.
    s.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap_or_else(|e| fail(idx, e));
    let (mut hist, mut sent_hist, mut tally) = (new_hist(), new_hist(), Tally::default());
    let mut ended = 0u64;
    let mut heard = Instant::now();
    loop {
        match inbox.fill(&mut s) {
            Ok(()) => {}
            Err(e) if is_timeout(&e) => {
                if finished(shared, ended) {
                    break;
                }
                let in_flight = shared.sent.load(Ordering::Acquire) - ended;
                if in_flight > 0 && heard.elapsed() >= STALL {
                    fail(
                        idx,
                        format_args!(
                            "the server sent nothing for {STALL:?} ({in_flight} calls in flight)"
                        ),
                    );
                }
                continue;
            }
            Err(e) => fail(idx, e),
        }
        let now = Instant::now();
        heard = now;
        inbox
            .parse(&mut answers, |id, outcome| {
                let Some((n, due)) = slot(id) else { return };
                let _ = hist.record(now.saturating_duration_since(due).as_nanos().max(1) as u64);
                let sent_ns = shared.sent_ns[n as usize % SENT_RING].load(Ordering::Relaxed);
                let sent = start + Duration::from_nanos(sent_ns);
                let _ =
                    sent_hist.record(now.saturating_duration_since(sent).as_nanos().max(1) as u64);
                tally.add(outcome);
                ended += 1;
            })
            .unwrap_or_else(|e| fail(idx, e));
        shared.ended.store(ended, Ordering::Release);
        shared
            .window
            .fetch_add(answers.take_credit(), Ordering::AcqRel);
        shared
            .max_streams
            .store(answers.max_streams(), Ordering::Relaxed);
        let control = answers.control();
        if !control.is_empty() {
            let mut w = shared.writer.lock().expect("writer");
            w.write_all(control).unwrap_or_else(|e| fail(idx, e));
            drop(w);
            control.clear();
        }
        if finished(shared, ended) {
            break;
        }
    }
    (hist, sent_hist, tally)
}

/// The sender is done and every call it sent has ended.
fn finished(shared: &Shared, ended: u64) -> bool {
    shared.sending_done.load(Ordering::Acquire) && ended == shared.sent.load(Ordering::Acquire)
}
