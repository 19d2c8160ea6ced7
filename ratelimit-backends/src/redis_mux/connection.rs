//! The connection task behind a [`Mux`]: connects (again after any failure), writes every
//! queued call in one write per round, reads replies in order and hands each to its caller,
//! and keeps the callers' deadlines.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

use super::resp::{Reply, encode, parse};
use super::{Call, Responder, Target};
use crate::Io;

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

pub(super) async fn drive(t: Target, mut calls: mpsc::UnboundedReceiver<Call>) {
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
