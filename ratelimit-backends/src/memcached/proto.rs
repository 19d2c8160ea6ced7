//! The part of memcached's text protocol the store needs (`get`, `gets`, `incr`, `decr`,
//! `add`, `cas`), over any byte stream, so that plain TCP and TLS share one client. The
//! commands of one call are written together and their replies read in order (one round
//! trip per call): [`Conn::get`], [`Conn::arith`] and [`Conn::add`] for fixed windows,
//! [`Conn::run`] for any mix of commands (sliding windows, token buckets).
//!
//! Any error leaves the connection in an unknown state; callers drop it instead of pooling.

use std::io;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufStream};

/// Bound on a reply line: a `VALUE` header or a status; memcached's keys are at most 250.
const MAX_LINE: usize = 1024;
/// Bound on a value read back. Counters are a few digits; anything bigger is not ours and is
/// refused rather than buffered.
const MAX_VALUE: usize = 64 * 1024;

/// The reply to one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `incr`/`decr`: the new value.
    Value(u64),
    /// `gets`: the key's value (0 when it is not a number) and its CAS unique.
    Item {
        /// The number stored.
        value: u64,
        /// What a `cas` of the key must name.
        cas: u64,
    },
    /// `incr`/`decr`/`gets`/`cas` on a missing key.
    NotFound,
    /// `add`/`cas` stored the value.
    Stored,
    /// `add` found the key already there.
    NotStored,
    /// `cas`: the key changed since the `gets` that gave its CAS unique.
    Exists,
    /// `ERROR`, `CLIENT_ERROR ...` or `SERVER_ERROR ...` for this command.
    Error(String),
}

/// One command of a [`Conn::run`] pipeline. Values are numbers, stored with flags 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd<'a> {
    /// `gets <key>`: [`Reply::Item`] or [`Reply::NotFound`].
    Gets(&'a str),
    /// `incr <key> <delta>`: [`Reply::Value`] or [`Reply::NotFound`].
    Incr(&'a str, u64),
    /// `decr <key> <delta>` (memcached stops at 0): [`Reply::Value`] or [`Reply::NotFound`].
    Decr(&'a str, u64),
    /// `add <key> 0 <exptime>` of a value: [`Reply::Stored`] or [`Reply::NotStored`].
    Add(&'a str, u64, i64),
    /// `cas <key> 0 <exptime> .. <unique>` of a value: [`Reply::Stored`], [`Reply::Exists`]
    /// or [`Reply::NotFound`].
    Cas(&'a str, u64, i64, u64),
}

impl<'a> Cmd<'a> {
    /// The key the command is about (which decides its node).
    pub fn key(&self) -> &'a str {
        match *self {
            Cmd::Gets(k)
            | Cmd::Incr(k, _)
            | Cmd::Decr(k, _)
            | Cmd::Add(k, _, _)
            | Cmd::Cas(k, _, _, _) => k,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        use std::io::Write as _;
        // Writing into a Vec cannot fail.
        let _ = match *self {
            Cmd::Gets(k) => write!(out, "gets {k}\r\n"),
            Cmd::Incr(k, d) => write!(out, "incr {k} {d}\r\n"),
            Cmd::Decr(k, d) => write!(out, "decr {k} {d}\r\n"),
            Cmd::Add(k, v, exp) => {
                let v = v.to_string();
                write!(out, "add {k} 0 {exp} {}\r\n{v}\r\n", v.len())
            }
            Cmd::Cas(k, v, exp, unique) => {
                let v = v.to_string();
                write!(out, "cas {k} 0 {exp} {} {unique}\r\n{v}\r\n", v.len())
            }
        };
    }
}

/// One connection to one memcached node.
pub struct Conn<S> {
    io: BufStream<S>,
    line: Vec<u8>,
    out: Vec<u8>,
    /// Whether the current call has read any reply yet (see [`Conn::replied`]).
    replied: bool,
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    /// A connection over `io` (already connected, TLS handshake done).
    pub fn new(io: S) -> Conn<S> {
        Conn {
            io: BufStream::new(io),
            line: Vec::with_capacity(64),
            out: Vec::with_capacity(256),
            replied: false,
        }
    }

    /// Whether the last call read any reply line before it ended. A call on a pooled
    /// connection that failed without one met a connection the node had already closed:
    /// nothing of it ran, so it is safe to send again on a fresh connection.
    pub fn replied(&self) -> bool {
        self.replied
    }

    async fn send(&mut self) -> io::Result<()> {
        self.replied = false;
        self.io.write_all(&self.out).await?;
        self.out.clear();
        self.io.flush().await
    }

    /// Reads one `\r\n`-terminated line into `self.line`, without the terminator.
    async fn read_line(&mut self) -> io::Result<()> {
        self.line.clear();
        let n = (&mut self.io)
            .take(MAX_LINE as u64 + 2)
            .read_until(b'\n', &mut self.line)
            .await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "memcached closed the connection",
            ));
        }
        self.replied = true;
        if !self.line.ends_with(b"\r\n") {
            return Err(bad("reply line too long or not terminated"));
        }
        self.line.truncate(self.line.len() - 2);
        Ok(())
    }

    fn error_line(&self) -> Option<String> {
        let l = self.line.as_slice();
        (l == b"ERROR" || l.starts_with(b"CLIENT_ERROR") || l.starts_with(b"SERVER_ERROR"))
            .then(|| String::from_utf8_lossy(l).into_owned())
    }

    /// The counters under `keys`, in order: 0 for missing keys and for values that are not
    /// a number. A key given twice gets its value twice.
    pub async fn get(&mut self, keys: &[&str]) -> io::Result<Vec<u64>> {
        let mut values = vec![0u64; keys.len()];
        if keys.is_empty() {
            return Ok(values);
        }
        self.out.extend_from_slice(b"get");
        for k in keys {
            self.out.push(b' ');
            self.out.extend_from_slice(k.as_bytes());
        }
        self.out.extend_from_slice(b"\r\n");
        self.send().await?;
        let mut data = Vec::new();
        loop {
            self.read_line().await?;
            if self.line == b"END" {
                return Ok(values);
            }
            if let Some(e) = self.error_line() {
                return Err(io::Error::other(e));
            }
            // VALUE <key> <flags> <bytes> [<cas>]
            let header = std::str::from_utf8(&self.line)
                .map_err(|_| bad("VALUE line is not text"))?
                .to_owned();
            let mut parts = header.split(' ');
            let (Some("VALUE"), Some(key), Some(_flags), Some(len)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(bad(format!("unexpected reply to get: {header:?}")));
            };
            let len: usize = len
                .parse()
                .map_err(|_| bad(format!("bad length in {header:?}")))?;
            if len > MAX_VALUE {
                return Err(bad(format!("value of {len} bytes for {key:?}")));
            }
            data.resize(len + 2, 0);
            self.io.read_exact(&mut data).await?;
            if !data.ends_with(b"\r\n") {
                return Err(bad(format!("value for {key:?} not terminated")));
            }
            let n = std::str::from_utf8(&data[..len])
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            for (v, _) in values.iter_mut().zip(keys).filter(|(_, k)| **k == key) {
                *v = n;
            }
        }
    }

    /// `cmd` (`incr` or `decr`) by each `(key, delta)`, pipelined.
    pub async fn arith(&mut self, cmd: &str, ops: &[(&str, u64)]) -> io::Result<Vec<Reply>> {
        for (k, d) in ops {
            self.out
                .extend_from_slice(format!("{cmd} {k} {d}\r\n").as_bytes());
        }
        self.send().await?;
        let mut replies = Vec::with_capacity(ops.len());
        for _ in ops {
            self.read_line().await?;
            let r = if self.line == b"NOT_FOUND" {
                Reply::NotFound
            } else if let Some(e) = self.error_line() {
                Reply::Error(e)
            } else {
                let v = std::str::from_utf8(&self.line)
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .ok_or_else(|| {
                        bad(format!(
                            "unexpected reply to {cmd}: {:?}",
                            String::from_utf8_lossy(&self.line)
                        ))
                    })?;
                Reply::Value(v)
            };
            replies.push(r);
        }
        Ok(replies)
    }

    /// `add` of each `(key, value, exptime)` (flags 0), pipelined.
    pub async fn add(&mut self, items: &[(&str, u64, i64)]) -> io::Result<Vec<Reply>> {
        for (k, v, exp) in items {
            let v = v.to_string();
            self.out
                .extend_from_slice(format!("add {k} 0 {exp} {}\r\n{v}\r\n", v.len()).as_bytes());
        }
        self.send().await?;
        let mut replies = Vec::with_capacity(items.len());
        for _ in items {
            self.read_line().await?;
            let r = match self.line.as_slice() {
                b"STORED" => Reply::Stored,
                b"NOT_STORED" => Reply::NotStored,
                _ => match self.error_line() {
                    Some(e) => Reply::Error(e),
                    None => {
                        return Err(bad(format!(
                            "unexpected reply to add: {:?}",
                            String::from_utf8_lossy(&self.line)
                        )));
                    }
                },
            };
            replies.push(r);
        }
        Ok(replies)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    /// Sends `cmds` in one write and reads their replies in order: one round trip for any
    /// mix of commands. A command memcached refuses answers [`Reply::Error`] and the
    /// others still run; a reply that fits no command is an error for the whole call.
    pub async fn run(&mut self, cmds: &[Cmd<'_>]) -> io::Result<Vec<Reply>> {
        for c in cmds {
            c.write(&mut self.out);
        }
        self.send().await?;
        let mut replies = Vec::with_capacity(cmds.len());
        for c in cmds {
            self.read_line().await?;
            let r = match (c, self.line.as_slice()) {
                (_, b"ERROR") => Reply::Error("ERROR".into()),
                (_, l) if l.starts_with(b"CLIENT_ERROR") || l.starts_with(b"SERVER_ERROR") => {
                    Reply::Error(String::from_utf8_lossy(l).into_owned())
                }
                (Cmd::Gets(k), _) => self.item(k).await?,
                (Cmd::Incr(..) | Cmd::Decr(..) | Cmd::Cas(..), b"NOT_FOUND") => Reply::NotFound,
                (Cmd::Incr(..) | Cmd::Decr(..), l) => std::str::from_utf8(l)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .map(Reply::Value)
                    .ok_or_else(|| self.unexpected(c))?,
                (Cmd::Add(..) | Cmd::Cas(..), b"STORED") => Reply::Stored,
                (Cmd::Add(..), b"NOT_STORED") => Reply::NotStored,
                (Cmd::Cas(..), b"EXISTS") => Reply::Exists,
                _ => return Err(self.unexpected(c)),
            };
            replies.push(r);
        }
        Ok(replies)
    }

    fn unexpected(&self, c: &Cmd<'_>) -> io::Error {
        bad(format!(
            "unexpected reply to {c:?}: {:?}",
            String::from_utf8_lossy(&self.line)
        ))
    }

    /// The rest of the reply to `gets <key>`, whose first line is in `self.line`: `END`
    /// alone, or one `VALUE <key> <flags> <bytes> <cas>` with its data and `END`.
    async fn item(&mut self, key: &str) -> io::Result<Reply> {
        if self.line == b"END" {
            return Ok(Reply::NotFound);
        }
        let header = String::from_utf8_lossy(&self.line).into_owned();
        let mut parts = header.split(' ');
        let (Some("VALUE"), Some(k), Some(_flags), Some(len), Some(cas), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(bad(format!("unexpected reply to gets: {header:?}")));
        };
        let (Ok(len), Ok(cas)) = (len.parse::<usize>(), cas.parse::<u64>()) else {
            return Err(bad(format!("bad length or cas in {header:?}")));
        };
        if k != key || len > MAX_VALUE {
            return Err(bad(format!("unexpected reply to gets {key}: {header:?}")));
        }
        let mut data = vec![0; len + 2];
        self.io.read_exact(&mut data).await?;
        if !data.ends_with(b"\r\n") {
            return Err(bad(format!("value for {key:?} not terminated")));
        }
        let value = std::str::from_utf8(&data[..len])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        self.read_line().await?;
        if self.line != b"END" {
            return Err(bad(format!("gets {key}: no END after the value")));
        }
        Ok(Reply::Item { value, cas })
    }
}

/// The client's contract, for the fuzz target and the corpus replay: whatever bytes a
/// node sends back, `get`, `incr` and `add` answer or fail, and never panic or hang (the
/// stream here ends where the bytes do, so a reply cut short is an error, not a wait).
#[doc(hidden)]
pub fn check_replies(data: &[u8]) -> usize {
    let mut conn = Conn::new(tokio::io::join(data, tokio::io::sink()));
    let mut answered = 0;
    let mut run = |f: std::pin::Pin<&mut dyn Future<Output = bool>>| {
        // Memory on both sides: every poll completes, so no runtime or waker is needed.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(true) = f.poll(&mut cx) {
            answered += 1;
        }
    };
    run(std::pin::pin!(async {
        conn.get(&["a", "b", "a"]).await.is_ok()
    }));
    run(std::pin::pin!(async {
        conn.arith("incr", &[("a", 1), ("b", 2)]).await.is_ok()
    }));
    run(std::pin::pin!(async {
        conn.add(&[("a", 1, 60)]).await.is_ok()
    }));
    answered
}

/// [`check_replies`] for [`Conn::run`], the pipeline of the sliding windows and token
/// buckets (fuzz target `memcached_pipeline`): every command kind, any bytes back. Returns
/// how many calls answered.
#[doc(hidden)]
pub fn check_pipeline_replies(data: &[u8]) -> usize {
    let mut conn = Conn::new(tokio::io::join(data, tokio::io::sink()));
    let cmds = [
        Cmd::Gets("a"),
        Cmd::Incr("a_60", 1),
        Cmd::Gets("a_0"),
        Cmd::Add("b", 0, 60),
        Cmd::Cas("b", 17, 60, 9),
        Cmd::Decr("a_60", 1),
    ];
    let mut answered = 0;
    for _ in 0..2 {
        let fut = std::pin::pin!(conn.run(&cmds));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(Ok(replies)) = fut.poll(&mut cx) {
            assert_eq!(replies.len(), cmds.len());
            answered += 1;
        }
    }
    answered
}

#[cfg(test)]
mod tests;
