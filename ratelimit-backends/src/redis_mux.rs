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
use std::io;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::Io;
use tokio::sync::{mpsc, oneshot};

/// A reply, as far as the counting commands need one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `:n`
    Int(i64),
    /// `-ERR ...`: the command failed, the connection is fine.
    Error(String),
    /// `+OK`, bulk strings, arrays, nil: accepted on the wire, not used by the callers.
    Other,
}

type Responder = oneshot::Sender<Result<Reply, String>>;

/// A queued call: its frame, how many commands the frame holds, and who waits.
type Call = (Vec<u8>, usize, Responder);

/// A written call still owed replies.
struct Waiting {
    tx: Responder,
    /// Replies still to come for this call.
    left: usize,
    /// What the caller gets: the first reply, unless a later one is an error.
    reply: Option<Reply>,
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
    /// Bound on connecting (and authenticating).
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

    /// Sends one encoded command and waits for its reply. A dropped call (a timeout above)
    /// leaves the connection in step: the reply is read and discarded.
    pub async fn call(&self, frame: Vec<u8>) -> Result<Reply, String> {
        self.call_many(frame, 1).await
    }

    /// Sends a frame of `commands` encoded commands (they leave together, in order) and
    /// answers with the first command's reply, or with the first error any of them got:
    /// one wake-up for the caller however many commands it needed.
    pub async fn call_many(&self, frame: Vec<u8>, commands: usize) -> Result<Reply, String> {
        let (tx, rx) = oneshot::channel();
        self.send((frame, commands.max(1), tx))
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
        push_header(out, b'$', a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn push_header(out: &mut Vec<u8>, kind: u8, n: usize) {
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
            Ok((buf.len() >= total).then_some((Reply::Other, total)))
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
    // As fred reconnects: 10 ms, doubling to 1 s, for ever.
    let mut pause = Duration::from_millis(10);
    loop {
        let failed = match tokio::time::timeout(t.timeout, connect(&t)).await {
            Ok(Ok(conn)) => {
                pause = Duration::from_millis(10);
                // A failed connection has told its callers; the next one starts afresh.
                match serve(conn, &mut calls).await {
                    Ok(()) => return,
                    Err(e) => e.to_string(),
                }
            }
            Ok(Err(e)) => e,
            Err(_) => "redis connect timed out".to_owned(),
        };
        // Calls queued while no connection is up fail now rather than at their timeout.
        fail_waiting(&mut calls, &failed);
        if calls.is_closed() {
            // The store is gone: nobody will call again.
            return;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

fn fail_waiting(calls: &mut mpsc::UnboundedReceiver<Call>, e: &str) {
    while let Ok((_, _, tx)) = calls.try_recv() {
        let _ = tx.send(Err(e.to_owned()));
    }
}

/// Runs one connection until it fails (`Err`, every caller in flight told) or the store is
/// dropped (`Ok`).
async fn serve(conn: Box<dyn Io>, calls: &mut mpsc::UnboundedReceiver<Call>) -> io::Result<()> {
    let (mut rd, mut wr) = tokio::io::split(conn);
    let mut waiting: VecDeque<Waiting> = VecDeque::new();
    let mut out: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut inbuf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let result = loop {
        tokio::select! {
            call = calls.recv() => {
                let Some(first) = call else { break Ok(()) };
                let mut next = Some(first);
                // Everything queued meanwhile rides in the same write. A caller that gave
                // up (its timeout) is not sent: nothing waits for that count any more.
                while let Some((frame, left, tx)) = next.take() {
                    if !tx.is_closed() {
                        out.extend_from_slice(&frame);
                        waiting.push_back(Waiting { tx, left, reply: None });
                    }
                    if out.len() < 64 * 1024 {
                        next = calls.try_recv().ok();
                    }
                }
                if out.is_empty() {
                    continue;
                }
                if let Err(e) = wr.write_all(&out).await {
                    break Err(e);
                }
                out.clear();
            }
            // Read even with nothing in flight, so that a connection Redis closed is noticed
            // (and replaced) while idle, not by the next caller.
            read = rd.read_buf(&mut inbuf) => {
                match read {
                    Ok(0) => break Err(io::Error::new(io::ErrorKind::UnexpectedEof, "redis closed the connection")),
                    Ok(_) => {}
                    Err(e) => break Err(e),
                }
                let mut at = 0;
                loop {
                    match parse(&inbuf[at..]) {
                        Ok(Some((reply, used))) => {
                            at += used;
                            let Some(w) = waiting.front_mut() else {
                                inbuf.drain(..at);
                                return Err(io::Error::other("redis sent a reply nobody asked for"));
                            };
                            let first_error = matches!(reply, Reply::Error(_))
                                && !matches!(w.reply, Some(Reply::Error(_)));
                            if w.reply.is_none() || first_error {
                                w.reply = Some(reply);
                            }
                            w.left -= 1;
                            if w.left == 0
                                && let Some(done) = waiting.pop_front()
                            {
                                let _ = done.tx.send(Ok(done.reply.unwrap_or(Reply::Other)));
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            let e = io::Error::other(e);
                            fail_all(&mut waiting, &e);
                            return Err(e);
                        }
                    }
                }
                inbuf.drain(..at);
            }
        }
    };
    if let Err(e) = &result {
        fail_all(&mut waiting, e);
    }
    result
}

fn fail_all(waiting: &mut VecDeque<Waiting>, e: &io::Error) {
    for w in waiting.drain(..) {
        let _ = w.tx.send(Err(format!("redis connection failed: {e}")));
    }
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
        assert_eq!(parse(b"$3\r\nabc\r\n").unwrap(), Some((Reply::Other, 9)));
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
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mux = Mux::start(Target {
            addr: listener.local_addr().unwrap().to_string(),
            unix: false,
            auth: Vec::new(),
            timeout: Duration::from_secs(5),
            tls: None,
        });
        let (redis, _) = listener.accept().await.unwrap();
        (mux, redis)
    }

    /// A call queued behind a slow write whose caller gives up meanwhile is never sent;
    /// the calls around it are sent and answered in order.
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
