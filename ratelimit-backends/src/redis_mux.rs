//! One multiplexed Redis connection for the counting commands: every call queued while the
//! previous write was in flight goes out in the next single write, and replies are matched
//! to callers in order (Redis answers a connection's commands in the order it got them).
//!
//! Why not fred for this: fred flushes its socket whenever its own queue is empty, which
//! under load is after nearly every command (one `writev` each, measured with strace), so
//! concurrent decisions never share a write. Everything else (PING, health, `GET`,
//! refunds, Sentinel, Cluster, TLS) stays on fred; this speaks only plain RESP over TCP or a
//! Unix socket, with `AUTH` when configured.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, Sleep};

use crate::Io;
use tokio::sync::{mpsc, oneshot};

/// A reply, as far as the counting commands need one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `:n`
    Int(i64),
    /// `-ERR ...`: the command failed, the connection is fine.
    Error(String),
    /// `$n` and its bytes: the answers of the group script and the lone ones (`redis/`).
    Bulk(Vec<u8>),
    /// `+OK`, arrays, nil: accepted on the wire, not used by the callers.
    Other,
}

type Responder = oneshot::Sender<Result<Reply, String>>;

/// A queued call.
struct Call {
    frame: Vec<u8>,
    /// Commands in `frame`, each owed a reply.
    commands: usize,
    tx: Responder,
    /// When the caller gets a timeout instead, written or not.
    deadline: Instant,
}

/// A written call still owed replies.
struct Waiting {
    /// Taken when the call times out: its replies are still read, and thrown away.
    tx: Option<Responder>,
    /// Replies still to come for this call.
    left: usize,
    /// What the caller gets: the first reply, unless a later one is an error.
    reply: Option<Reply>,
    deadline: Instant,
}

/// Where and how to connect.
#[derive(Clone)]
pub struct Target {
    /// `host:port`, or a socket path when `unix`.
    pub addr: String,
    /// A Unix socket rather than TCP.
    pub unix: bool,
    /// `AUTH` arguments: `[password]` or `[user, password]`; empty for none.
    pub auth: Vec<String>,
    /// Bound on connecting (and authenticating), and on each call, from the call to its
    /// answer: a call still unanswered then gets an error saying it timed out.
    pub timeout: Duration,
    /// TLS over TCP, and the name the certificate is checked against.
    pub tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the AUTH arguments: this ends up in logs.
        f.debug_struct("Target")
            .field("addr", &self.addr)
            .field("unix", &self.unix)
            .field("timeout", &self.timeout)
            .field("tls", &self.tls.as_ref().map(|(_, name)| name))
            .finish_non_exhaustive()
    }
}

/// The handle callers use; each connection lives in a task.
///
/// A caller on a runtime of several workers (or none) shares the connection started with
/// the handle. A caller on a runtime of one worker (a current-thread runtime, or a
/// multi-thread one sized 1) gets a connection of its own thread, started on first use: a
/// server that runs a one-worker runtime per core (ours does, for its gRPC connections)
/// then keeps each decision, its Redis round trip included, on one thread. Through one
/// shared connection, each batch of replies woke the callers' threads from the
/// connection's.
#[derive(Debug, Clone)]
pub struct Mux {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    target: Target,
    /// The connection started with the handle, for callers without one of their own.
    home: mpsc::UnboundedSender<Call>,
    /// Per-thread connections. The home one is listed too when it was started on a
    /// one-worker runtime, so that its own thread does not open a second.
    own: Mutex<Vec<(ThreadId, mpsc::UnboundedSender<Call>)>>,
}

impl Mux {
    /// Starts the connection task (it connects on its own, and again after any failure).
    pub fn start(target: Target) -> Mux {
        let (home, rx) = mpsc::unbounded_channel();
        tokio::spawn(drive(target.clone(), rx));
        let mut own = Vec::new();
        if one_worker_runtime().is_some() {
            own.push((std::thread::current().id(), home.clone()));
        }
        Mux {
            shared: Arc::new(Shared {
                target,
                home,
                own: Mutex::new(own),
            }),
        }
    }

    /// Sends one encoded command and waits for its reply, at most the target's timeout.
    /// A dropped or timed-out call leaves the connection in step: its reply is read and
    /// discarded.
    pub async fn call(&self, frame: Vec<u8>) -> Result<Reply, String> {
        self.call_many(frame, 1).await
    }

    /// Sends a frame of `commands` encoded commands (they leave together, in order) and
    /// answers with the first command's reply, or with the first error any of them got:
    /// one wake-up for the caller however many commands it needed.
    ///
    /// The timeout is kept by the connection's task, not by a timer per call: arming a
    /// tokio timer due before anything else on the runtime wakes the runtime's I/O driver
    /// (an `eventfd` write, and one more `epoll_wait` to take it), and at 20,000 decisions/s
    /// that was 0.3-0.6 extra system calls per decision (strace, docs/benchmarks.md).
    pub async fn call_many(&self, frame: Vec<u8>, commands: usize) -> Result<Reply, String> {
        let (tx, rx) = oneshot::channel();
        self.send(Call {
            frame,
            commands: commands.max(1),
            tx,
            deadline: Instant::now() + self.shared.target.timeout,
        })
        .map_err(|_| "redis connection task is gone".to_owned())?;
        rx.await.map_err(|_| "redis connection closed".to_owned())?
    }

    fn send(&self, call: Call) -> Result<(), mpsc::error::SendError<Call>> {
        let Some(runtime) = one_worker_runtime() else {
            return self.shared.home.send(call);
        };
        let me = std::thread::current().id();
        // Held only to find or add this thread's sender: sends do not block.
        let mut own = self.shared.own.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, tx)) = own.iter().find(|(id, _)| *id == me) {
            return tx.send(call);
        }
        // A thread's runtime that has stopped took its connection task with it.
        own.retain(|(_, tx)| !tx.is_closed());
        let (tx, rx) = mpsc::unbounded_channel();
        runtime.spawn(drive(self.shared.target.clone(), rx));
        let sent = tx.send(call);
        own.push((me, tx));
        sent
    }
}

/// The runtime of the calling task, when it has a single worker: then that runtime's tasks
/// all run on one thread.
fn one_worker_runtime() -> Option<tokio::runtime::Handle> {
    tokio::runtime::Handle::try_current()
        .ok()
        .filter(|h| h.metrics().num_workers() == 1)
}

/// Appends a RESP array of bulk strings.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    push_header(out, b'*', args.len());
    for a in args {
        push_bulk(out, a);
    }
}

/// Appends one bulk string.
pub fn push_bulk(out: &mut Vec<u8>, a: &[u8]) {
    push_header(out, b'$', a.len());
    out.extend_from_slice(a);
    out.extend_from_slice(b"\r\n");
}

/// Appends a header line: `*n` for an array, `$n` for a bulk string.
pub fn push_header(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Deepest array nesting accepted: the counting commands get none, and a misbehaving peer
/// must not recurse this parser into a stack overflow.
const MAX_DEPTH: usize = 8;

/// Parses one complete reply at the start of `buf`: `Ok(None)` until it is all there, the
/// reply and its length once it is, an error for bytes that are not RESP.
pub fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
    parse_at(buf, 0)
}

fn parse_at(buf: &[u8], depth: usize) -> Result<Option<(Reply, usize)>, String> {
    if depth > MAX_DEPTH {
        return Err("redis sent arrays nested too deep".into());
    }
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    // An empty line has no type byte (found by the fuzz target: it used to panic here).
    let Some(line) = buf.get(1..end) else {
        return Err("redis sent an empty line".into());
    };
    let after = end + 2;
    let text = || String::from_utf8_lossy(line).into_owned();
    let number = || -> Result<i64, String> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("redis sent a bad number: {:?}", text()))
    };
    match buf.first() {
        Some(b':') => Ok(Some((Reply::Int(number()?), after))),
        Some(b'-') => Ok(Some((Reply::Error(text()), after))),
        Some(b'+') => Ok(Some((Reply::Other, after))),
        Some(b'$') => {
            let n = number()?;
            if n < 0 {
                return Ok(Some((Reply::Other, after)));
            }
            // Redis's own ceiling (`proto-max-bulk-len`): anything above is not Redis.
            if n > 512 * 1024 * 1024 {
                return Err(format!("redis sent a bulk length of {n}"));
            }
            let total = after + n as usize + 2;
            Ok((buf.len() >= total).then(|| (Reply::Bulk(buf[after..total - 2].to_vec()), total)))
        }
        Some(b'*') => {
            let n = number()?;
            let mut at = after;
            for _ in 0..n.max(0) {
                match parse_at(&buf[at..], depth + 1)? {
                    Some((_, used)) => at += used,
                    None => return Ok(None),
                }
            }
            Ok(Some((Reply::Other, at)))
        }
        _ => Err(format!(
            "redis sent bytes that are not a reply: {:?}",
            String::from_utf8_lossy(&buf[..end.min(64)])
        )),
    }
}

/// The parser's contract, for the fuzz target and the corpus replay: walking any bytes
/// reply by reply ends (each reply consumes at least one byte and never more than there
/// is) and never panics.
#[doc(hidden)]
pub fn check_parse(data: &[u8]) -> usize {
    let mut at = 0;
    let mut replies = 0;
    while at < data.len() {
        match parse(&data[at..]) {
            Ok(Some((_, used))) => {
                assert!(used > 0 && used <= data.len() - at, "used {used} at {at}");
                at += used;
                replies += 1;
            }
            Ok(None) | Err(_) => break,
        }
    }
    replies
}

async fn connect(t: &Target) -> Result<Box<dyn Io>, String> {
    let io: Box<dyn Io> = if t.unix {
        Box::new(
            tokio::net::UnixStream::connect(&t.addr)
                .await
                .map_err(|e| format!("redis {}: {e}", t.addr))?,
        )
    } else {
        let s = tokio::net::TcpStream::connect(&t.addr)
            .await
            .map_err(|e| format!("redis {}: {e}", t.addr))?;
        let _ = s.set_nodelay(true);
        match &t.tls {
            Some((tls, name)) => Box::new(
                tls.connect(name.clone(), s)
                    .await
                    .map_err(|e| format!("redis {} TLS: {e}", t.addr))?,
            ),
            None => Box::new(s),
        }
    };
    let mut io = io;
    if !t.auth.is_empty() {
        let mut frame = Vec::new();
        let mut args: Vec<&[u8]> = vec![b"AUTH"];
        args.extend(t.auth.iter().map(|a| a.as_bytes()));
        encode(&mut frame, &args);
        io.write_all(&frame).await.map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        loop {
            if let Some((reply, _)) = parse(&buf)? {
                return match reply {
                    Reply::Error(e) => Err(format!("redis AUTH: {e}")),
                    _ => Ok(io),
                };
            }
            let mut chunk = [0u8; 256];
            let n = io.read(&mut chunk).await.map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("redis closed the connection during AUTH".into());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    }
    Ok(io)
}

async fn drive(t: Target, mut calls: mpsc::UnboundedReceiver<Call>) {
    // Calls that came while no connection was up, oldest first.
    let mut held = VecDeque::new();
    // As fred reconnects: 10 ms, doubling to 1 s, for ever.
    let mut pause = Duration::from_millis(10);
    loop {
        let connecting = tokio::time::timeout(t.timeout, connect(&t));
        let failed = match hold(connecting, &t, &mut calls, &mut held).await {
            Ok(Ok(conn)) => {
                pause = Duration::from_millis(10);
                // A failed connection has told its callers; the next one starts afresh.
                match serve(conn, &t, &mut calls, &mut held).await {
                    Ok(()) => return,
                    Err(e) => e.to_string(),
                }
            }
            Ok(Err(e)) => e,
            Err(_) => "redis connect timed out".to_owned(),
        };
        // Calls queued while no connection is up fail now rather than at their timeout.
        fail_waiting(&mut calls, &mut held, &failed);
        if calls.is_closed() {
            // The store is gone: nobody will call again.
            return;
        }
        hold(tokio::time::sleep(pause), &t, &mut calls, &mut held).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

fn fail_waiting(calls: &mut mpsc::UnboundedReceiver<Call>, held: &mut VecDeque<Call>, e: &str) {
    while let Ok(c) = calls.try_recv() {
        held.push_back(c);
    }
    for c in held.drain(..) {
        let _ = c.tx.send(Err(e.to_owned()));
    }
}

fn timed_out(t: &Target) -> String {
    format!("redis request timed out after {:?}", t.timeout)
}

/// The one timer of a connection's task, due at the earliest deadline it holds, or idle.
/// It is moved only when it fires (to the next deadline, always later) or when it was
/// idle, not per call: a timer set earlier than the runtime's next wake-up costs a
/// system call.
struct Expiry {
    sleep: Pin<Box<Sleep>>,
    armed: bool,
}

impl Expiry {
    fn new() -> Expiry {
        Expiry {
            // Never polled while idle, so this deadline is never registered.
            sleep: Box::pin(tokio::time::sleep_until(Instant::now())),
            armed: false,
        }
    }

    /// Makes sure it fires by `at`, at the latest, when it is idle.
    fn arm(&mut self, at: Instant) {
        if !self.armed {
            self.armed = true;
            self.sleep.as_mut().reset(at);
        }
    }

    fn rearm(&mut self, next: Option<Instant>) {
        self.armed = false;
        if let Some(at) = next {
            self.arm(at);
        }
    }
}

/// Tells the held calls past their deadline (the oldest come first) and returns the next
/// deadline among the rest.
fn expire_held(held: &mut VecDeque<Call>, now: Instant, t: &Target) -> Option<Instant> {
    while let Some(c) = held.pop_front() {
        if c.deadline > now {
            let next = c.deadline;
            held.push_front(c);
            return Some(next);
        }
        let _ = c.tx.send(Err(timed_out(t)));
    }
    None
}

/// Runs `phase` (connecting, or the pause before the next attempt) while no connection
/// serves: calls that arrive meanwhile wait in `held` for the next connection, and each
/// fails at its deadline if none comes in time.
async fn hold<F: Future>(
    phase: F,
    t: &Target,
    calls: &mut mpsc::UnboundedReceiver<Call>,
    held: &mut VecDeque<Call>,
) -> F::Output {
    tokio::pin!(phase);
    let mut expiry = Expiry::new();
    if let Some(c) = held.front() {
        expiry.arm(c.deadline);
    }
    let mut open = true;
    loop {
        tokio::select! {
            out = &mut phase => return out,
            call = calls.recv(), if open => match call {
                Some(c) => {
                    expiry.arm(c.deadline);
                    held.push_back(c);
                }
                None => open = false,
            },
            () = expiry.sleep.as_mut(), if expiry.armed => {
                expiry.rearm(expire_held(held, Instant::now(), t));
            }
        }
    }
}

/// The written calls, in the order Redis answers them, and the timeouts among them.
struct InFlight {
    waiting: VecDeque<Waiting>,
    /// How many at the front have been told they timed out (deadlines come in order).
    expired: usize,
    expiry: Expiry,
}

impl InFlight {
    /// Adds `c`'s frame to `out` unless its caller has gone or its time is up.
    fn queue(&mut self, c: Call, out: &mut Vec<u8>, now: Instant, t: &Target) {
        if c.tx.is_closed() {
            // Its caller gave up: nothing waits for that count any more.
            return;
        }
        if c.deadline <= now {
            let _ = c.tx.send(Err(timed_out(t)));
            return;
        }
        out.extend_from_slice(&c.frame);
        self.expiry.arm(c.deadline);
        self.waiting.push_back(Waiting {
            tx: Some(c.tx),
            left: c.commands,
            reply: None,
            deadline: c.deadline,
        });
    }

    /// The timer fired: tells every call past its deadline, written or `held` (which all
    /// came after the written ones), and sets it for the next deadline.
    fn expire(&mut self, held: &mut VecDeque<Call>, t: &Target) {
        let now = Instant::now();
        let mut next = None;
        for w in self.waiting.iter_mut().skip(self.expired) {
            if w.deadline > now {
                next = Some(w.deadline);
                break;
            }
            if let Some(tx) = w.tx.take() {
                let _ = tx.send(Err(timed_out(t)));
            }
            self.expired += 1;
        }
        if next.is_none() {
            next = expire_held(held, now, t);
        }
        self.expiry.rearm(next);
    }

    /// One reply, for the call at the front.
    fn answer(&mut self, reply: Reply) -> io::Result<()> {
        let Some(w) = self.waiting.front_mut() else {
            return Err(io::Error::other("redis sent a reply nobody asked for"));
        };
        let first_error =
            matches!(reply, Reply::Error(_)) && !matches!(w.reply, Some(Reply::Error(_)));
        if w.reply.is_none() || first_error {
            w.reply = Some(reply);
        }
        w.left -= 1;
        if w.left == 0
            && let Some(done) = self.waiting.pop_front()
        {
            self.expired = self.expired.saturating_sub(1);
            if let Some(tx) = done.tx {
                let _ = tx.send(Ok(done.reply.unwrap_or(Reply::Other)));
            }
        }
        Ok(())
    }

    fn fail_all(&mut self, e: &io::Error) {
        for w in self.waiting.drain(..) {
            if let Some(tx) = w.tx {
                let _ = tx.send(Err(format!("redis connection failed: {e}")));
            }
        }
        self.expired = 0;
    }
}

/// Runs one connection until it fails (`Err`, every caller in flight told) or the store is
/// dropped (`Ok`). The calls `held` while connecting go out first.
async fn serve(
    conn: Box<dyn Io>,
    t: &Target,
    calls: &mut mpsc::UnboundedReceiver<Call>,
    held: &mut VecDeque<Call>,
) -> io::Result<()> {
    let (mut rd, mut wr) = tokio::io::split(conn);
    let mut flight = InFlight {
        waiting: VecDeque::new(),
        expired: 0,
        expiry: Expiry::new(),
    };
    let mut out: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut inbuf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut next_batch = None;
    let result = loop {
        if next_batch.is_none() {
            next_batch = held.pop_front();
        }
        if next_batch.is_none() {
            tokio::select! {
                call = calls.recv() => match call {
                    Some(c) => next_batch = Some(c),
                    None => break Ok(()),
                },
                // Read even with nothing in flight, so that a connection Redis closed is
                // noticed (and replaced) while idle, not by the next caller.
                read = rd.read_buf(&mut inbuf) => {
                    match read {
                        Ok(0) => break Err(io::Error::new(io::ErrorKind::UnexpectedEof, "redis closed the connection")),
                        Ok(_) => {}
                        Err(e) => break Err(e),
                    }
                    let mut at = 0;
                    let parsed = loop {
                        match parse(&inbuf[at..]) {
                            Ok(Some((reply, used))) => {
                                at += used;
                                if let Err(e) = flight.answer(reply) {
                                    break Err(e);
                                }
                            }
                            Ok(None) => break Ok(()),
                            Err(e) => break Err(io::Error::other(e)),
                        }
                    };
                    inbuf.drain(..at);
                    if let Err(e) = parsed {
                        break Err(e);
                    }
                }
                () = flight.expiry.sleep.as_mut(), if flight.expiry.armed => flight.expire(held, t),
            }
            continue;
        }
        // Everything queued meanwhile rides in the same write.
        let now = Instant::now();
        while let Some(c) = next_batch.take() {
            flight.queue(c, &mut out, now, t);
            if out.len() < 64 * 1024 {
                next_batch = held.pop_front().or_else(|| calls.try_recv().ok());
            }
        }
        if out.is_empty() {
            continue;
        }
        // A Redis that stopped reading fills the socket and blocks this write: the calls
        // that come meanwhile wait for the next write, and every timeout still fires.
        let write = wr.write_all(&out);
        tokio::pin!(write);
        let mut open = true;
        let written = loop {
            tokio::select! {
                r = &mut write => break r,
                call = calls.recv(), if open => match call {
                    Some(c) => {
                        flight.expiry.arm(c.deadline);
                        held.push_back(c);
                    }
                    // Noticed again, and acted on, once the write is done.
                    None => open = false,
                },
                () = flight.expiry.sleep.as_mut(), if flight.expiry.armed => flight.expire(held, t),
            }
        };
        if let Err(e) = written {
            break Err(e);
        }
        out.clear();
    };
    if let Err(e) = &result {
        flight.fail_all(e);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_an_array_of_bulk_strings() {
        let mut out = Vec::new();
        encode(&mut out, &[b"INCRBY", b"k", b"12"]);
        assert_eq!(out, b"*3\r\n$6\r\nINCRBY\r\n$1\r\nk\r\n$2\r\n12\r\n");
    }

    #[test]
    fn parses_whole_replies_and_waits_for_partial_ones() {
        assert_eq!(parse(b":42\r\n").unwrap(), Some((Reply::Int(42), 5)));
        assert_eq!(parse(b":-3\r\n:1").unwrap(), Some((Reply::Int(-3), 5)));
        assert_eq!(
            parse(b"-NOSCRIPT No matching script\r\n").unwrap(),
            Some((Reply::Error("NOSCRIPT No matching script".into()), 30))
        );
        assert_eq!(parse(b"+OK\r\n").unwrap(), Some((Reply::Other, 5)));
        assert_eq!(
            parse(b"$3\r\nabc\r\n").unwrap(),
            Some((Reply::Bulk(b"abc".to_vec()), 9))
        );
        assert_eq!(parse(b"$-1\r\n").unwrap(), Some((Reply::Other, 5)));
        assert_eq!(
            parse(b"*2\r\n:1\r\n$1\r\nx\r\n").unwrap(),
            Some((Reply::Other, 15))
        );
        for partial in [&b""[..], b":4", b":42\r", b"$3\r\nab", b"*2\r\n:1\r\n"] {
            assert_eq!(parse(partial).unwrap(), None, "{partial:?}");
        }
    }

    /// The committed cargo-fuzz corpus of `redis_reply`, replayed on stable.
    #[test]
    fn fuzz_corpus_replays() {
        let corpus = crate::fuzz_corpus("redis_reply");
        let files = corpus.len();
        let replies: usize = corpus.iter().map(|d| check_parse(d)).sum();
        assert!(
            files >= 5 && replies >= 5,
            "{files} files, {replies} replies"
        );
    }

    /// A mux connected to a socket the test plays Redis on.
    async fn mux_and_fake_redis() -> (Mux, tokio::net::TcpStream) {
        mux_with_timeout(Duration::from_secs(5)).await
    }

    async fn mux_with_timeout(timeout: Duration) -> (Mux, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mux = Mux::start(Target {
            addr: listener.local_addr().unwrap().to_string(),
            unix: false,
            auth: Vec::new(),
            timeout,
            tls: None,
        });
        let (redis, _) = listener.accept().await.unwrap();
        (mux, redis)
    }

    fn frame(args: &[&[u8]]) -> Vec<u8> {
        let mut f = Vec::new();
        encode(&mut f, args);
        f
    }

    /// Reads from the fake Redis until what came ends with `end`.
    async fn read_until(redis: &mut tokio::net::TcpStream, end: &[u8]) -> Vec<u8> {
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        while !got.ends_with(end) {
            let n = redis.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the mux closed the connection");
            got.extend_from_slice(&chunk[..n]);
        }
        got
    }

    /// A call Redis answers too late gets a timeout at its deadline; its late reply is
    /// read and dropped, so the next call still gets its own reply.
    #[tokio::test]
    async fn an_unanswered_call_times_out_and_the_connection_stays_in_step() {
        let timeout = Duration::from_millis(300);
        let (mux, mut redis) = mux_with_timeout(timeout).await;
        let t = std::time::Instant::now();
        let slow = tokio::spawn({
            let mux = mux.clone();
            async move { mux.call(frame(&[b"INCRBY", b"slow", b"1"])).await }
        });
        read_until(&mut redis, b"$4\r\nslow\r\n$1\r\n1\r\n").await;
        let answer = tokio::time::timeout(Duration::from_secs(5), slow)
            .await
            .expect("no answer at all")
            .unwrap();
        let took = t.elapsed();
        assert_eq!(
            answer,
            Err("redis request timed out after 300ms".to_owned()),
            "after {took:?}"
        );
        assert!(took >= timeout && took < timeout * 3, "{took:?}");
        let next = tokio::spawn({
            let mux = mux.clone();
            async move { mux.call(frame(&[b"INCRBY", b"next", b"1"])).await }
        });
        read_until(&mut redis, b"$4\r\nnext\r\n$1\r\n1\r\n").await;
        redis.write_all(b":41\r\n:7\r\n").await.unwrap();
        assert_eq!(next.await.unwrap(), Ok(Reply::Int(7)));
    }

    /// Redis stops reading: the socket fills, the write of a big call blocks, and the
    /// calls queued behind it still end at their deadlines instead of waiting for ever.
    #[tokio::test]
    async fn calls_behind_a_blocked_write_still_time_out() {
        let timeout = Duration::from_millis(300);
        let (mux, _redis) = mux_with_timeout(timeout).await;
        let big = vec![b'x'; 32 << 20];
        let first = tokio::spawn({
            let (mux, f) = (mux.clone(), frame(&[b"SET", b"big", &big]));
            async move { mux.call(f).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let t = std::time::Instant::now();
        let behind = tokio::time::timeout(
            Duration::from_secs(5),
            mux.call(frame(&[b"INCRBY", b"behind", b"1"])),
        )
        .await
        .expect("no answer at all");
        let took = t.elapsed();
        assert_eq!(
            behind,
            Err("redis request timed out after 300ms".to_owned())
        );
        assert!(took < timeout * 3, "{took:?}");
        assert_eq!(
            first.await.unwrap(),
            Err("redis request timed out after 300ms".to_owned())
        );
    }

    /// With nothing listening, the connection task keeps reconnecting with pauses that
    /// grow to a second; a call made meanwhile is held for the next connection, and ends
    /// at its deadline, not at the next failed attempt.
    #[tokio::test]
    async fn calls_while_redis_is_unreachable_end_by_their_deadline() {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .to_string();
        let timeout = Duration::from_millis(150);
        let mux = Mux::start(Target {
            addr,
            unix: false,
            auth: Vec::new(),
            timeout,
            tls: None,
        });
        let (mut worst, mut timed_out, mut refused) = (Duration::ZERO, 0, 0);
        let start = std::time::Instant::now();
        // Long enough for pauses of 320 ms, 640 ms and 1 s, each longer than the timeout.
        while start.elapsed() < Duration::from_millis(3500) {
            let t = std::time::Instant::now();
            let r = tokio::time::timeout(Duration::from_secs(5), mux.call(frame(&[b"PING"])))
                .await
                .expect("no answer at all");
            worst = worst.max(t.elapsed());
            match r {
                Err(e) if e.contains("timed out") => timed_out += 1,
                Err(_) => refused += 1,
                Ok(r) => panic!("an answer from nowhere: {r:?}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(worst < timeout * 3, "a call took {worst:?}");
        assert!(timed_out > 0 && refused > 0, "{timed_out} {refused}");
    }

    /// A fake Redis numbering its connections from 1, answering every `PING` on a
    /// connection with that connection's number.
    async fn numbering_fake_redis() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            for n in 1.. {
                let (mut conn, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 256];
                    loop {
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(k) => buf.extend_from_slice(&chunk[..k]),
                        }
                        let ping = b"*1\r\n$4\r\nPING\r\n";
                        while buf.starts_with(ping) {
                            buf.drain(..ping.len());
                            let reply = format!(":{n}\r\n");
                            conn.write_all(reply.as_bytes()).await.unwrap();
                        }
                    }
                });
            }
        });
        addr
    }

    #[test]
    fn a_one_worker_runtime_calls_over_a_connection_of_its_own_thread() {
        let ping = || {
            let mut f = Vec::new();
            encode(&mut f, &[b"PING"]);
            f
        };
        let shared = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mux = shared.block_on(async {
            Mux::start(Target {
                addr: numbering_fake_redis().await,
                unix: false,
                auth: Vec::new(),
                timeout: Duration::from_secs(5),
                tls: None,
            })
        });
        let on_shared = |mux: Mux| {
            shared
                .block_on(shared.spawn(async move { mux.call(ping()).await }))
                .unwrap()
        };
        assert_eq!(on_shared(mux.clone()), Ok(Reply::Int(1)));

        // A current-thread runtime: this thread's own connection, reused.
        let here = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert_eq!(here.block_on(mux.call(ping())), Ok(Reply::Int(2)));
        assert_eq!(here.block_on(mux.call(ping())), Ok(Reply::Int(2)));

        // A one-worker runtime, as the server's connection threads are: its worker's own.
        let one = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let call_on_one = |mux: Mux| {
            one.block_on(one.spawn(async move { mux.call(ping()).await }))
                .unwrap()
        };
        assert_eq!(call_on_one(mux.clone()), Ok(Reply::Int(3)));
        assert_eq!(call_on_one(mux.clone()), Ok(Reply::Int(3)));

        // The work-stealing runtime's callers still share the first connection.
        assert_eq!(on_shared(mux.clone()), Ok(Reply::Int(1)));
        assert_eq!(here.block_on(mux.call(ping())), Ok(Reply::Int(2)));
    }

    /// A call queued behind a slow write whose caller gives up meanwhile is never sent;
    /// the calls around it are sent and answered in order.
    #[tokio::test]
    async fn a_call_given_up_before_its_write_is_not_sent() {
        let (mux, mut redis) = mux_and_fake_redis().await;
        let frame = |args: &[&[u8]]| {
            let mut f = Vec::new();
            encode(&mut f, args);
            f
        };
        // Far more than loopback's socket buffers hold: with the peer not reading, the
        // write of this call blocks, and later calls queue behind it.
        let big = vec![b'x'; 32 << 20];
        let first = tokio::spawn({
            let (mux, f) = (mux.clone(), frame(&[b"SET", b"big", &big]));
            async move { mux.call(f).await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        let gave_up = tokio::time::timeout(
            Duration::from_millis(100),
            mux.call(frame(&[b"INCRBY", b"gave-up", b"1"])),
        )
        .await;
        assert!(gave_up.is_err(), "{gave_up:?}");
        let last = tokio::spawn({
            let (mux, f) = (mux.clone(), frame(&[b"INCRBY", b"waits", b"1"]));
            async move { mux.call(f).await }
        });
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        while !got.ends_with(b"$5\r\nwaits\r\n$1\r\n1\r\n") {
            let n = redis.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the mux closed the connection");
            got.extend_from_slice(&chunk[..n]);
        }
        assert!(!got.windows(7).any(|w| w == b"gave-up"));
        redis.write_all(b":1\r\n:2\r\n").await.unwrap();
        assert_eq!(first.await.unwrap(), Ok(Reply::Int(1)));
        assert_eq!(last.await.unwrap(), Ok(Reply::Int(2)));
    }

    /// A call of several commands gets one answer once all its replies are in: the first
    /// reply, or the first error among them; the calls after it keep their own replies.
    #[tokio::test]
    async fn a_multi_command_call_answers_once_with_its_first_reply_or_error() {
        let (mux, mut redis) = mux_and_fake_redis().await;
        let frame = |commands: &[&[u8]]| {
            let mut f = Vec::new();
            for c in commands {
                encode(&mut f, &[c]);
            }
            f
        };
        let mut calls = Vec::new();
        for (frame, n) in [
            (frame(&[b"A1", b"A2"]), 2),
            (frame(&[b"B1", b"B2"]), 2),
            (frame(&[b"C1", b"C2"]), 2),
            (frame(&[b"D1"]), 1),
        ] {
            let mux = mux.clone();
            calls.push(tokio::spawn(async move { mux.call_many(frame, n).await }));
            // In this order on the wire.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut got = Vec::new();
        let mut chunk = [0u8; 256];
        while !got.ends_with(b"$2\r\nD1\r\n") {
            let n = redis.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the mux closed the connection");
            got.extend_from_slice(&chunk[..n]);
        }
        // A: both fine. B: the second fails. C: both fail, the first error wins. D: its
        // own single reply, after the six of the calls before it.
        redis
            .write_all(b":7\r\n:1\r\n:8\r\n-ERR two\r\n-ERR three\r\n-ERR four\r\n:9\r\n")
            .await
            .unwrap();
        let mut answers = Vec::new();
        for c in calls.drain(..3) {
            answers.push(c.await.unwrap());
        }
        assert_eq!(
            answers,
            [
                Ok(Reply::Int(7)),
                Ok(Reply::Error("ERR two".into())),
                Ok(Reply::Error("ERR three".into())),
            ]
        );
        assert_eq!(calls.pop().unwrap().await.unwrap(), Ok(Reply::Int(9)));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let deep = "*1\r\n".repeat(20);
        let huge = format!("${}\r\n", i64::MAX);
        for bad in [
            &b"hello\r\n"[..],
            b":x\r\n",
            b"$zz\r\n",
            b"*q\r\n",
            b"\r\n",
            deep.as_bytes(),
            huge.as_bytes(),
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
