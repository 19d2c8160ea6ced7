//! The part of memcached's text protocol the store needs (`get`, `incr`, `decr`, `add`),
//! over any byte stream, so that plain TCP and TLS share one client. The commands of one
//! call are written together and their replies read in order (one round trip per call).
//!
//! Any error leaves the connection in an unknown state; callers drop it instead of pooling.

use std::io;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufStream};

/// Bound on a reply line: a `VALUE` header or a status; memcached's keys are at most 250.
const MAX_LINE: usize = 1024;
/// Bound on a value read back. Counters are a few digits; anything bigger is not ours and is
/// refused rather than buffered.
const MAX_VALUE: usize = 64 * 1024;

/// The reply to one `incr`, `decr` or `add`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `incr`/`decr`: the new value.
    Value(u64),
    /// `incr`/`decr` on a missing key.
    NotFound,
    /// `add` stored the key.
    Stored,
    /// `add` found the key already there.
    NotStored,
    /// `ERROR`, `CLIENT_ERROR ...` or `SERVER_ERROR ...` for this command.
    Error(String),
}

/// One connection to one memcached node.
pub struct Conn<S> {
    io: BufStream<S>,
    line: Vec<u8>,
    out: Vec<u8>,
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
        }
    }

    async fn send(&mut self) -> io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    /// Runs `f` against a peer that answers with `reply` once it has read `expect`.
    async fn exchange<T>(
        expect: &'static [u8],
        reply: &'static [u8],
        f: impl AsyncFnOnce(&mut Conn<tokio::io::DuplexStream>) -> T,
    ) -> T {
        let (client, mut server) = duplex(4096);
        let peer = tokio::spawn(async move {
            let mut got = vec![0u8; expect.len()];
            server.read_exact(&mut got).await.unwrap();
            assert_eq!(got, expect, "{}", String::from_utf8_lossy(&got));
            server.write_all(reply).await.unwrap();
            server
        });
        let mut conn = Conn::new(client);
        let out = f(&mut conn).await;
        drop(peer.await.unwrap());
        out
    }

    #[tokio::test]
    async fn get_maps_values_to_keys() {
        let v = exchange(
            b"get a b a c\r\n",
            b"VALUE a 0 1\r\n7\r\nVALUE c 0 3 99\r\nabc\r\nEND\r\n",
            async |c| c.get(&["a", "b", "a", "c"]).await,
        )
        .await
        .unwrap();
        assert_eq!(v, [7, 0, 7, 0]);
    }

    #[tokio::test]
    async fn pipelined_replies_in_order() {
        let r = exchange(
            b"incr a 1\r\nincr b 2\r\nincr c 3\r\n",
            b"5\r\nNOT_FOUND\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
            async |c| c.arith("incr", &[("a", 1), ("b", 2), ("c", 3)]).await,
        )
        .await
        .unwrap();
        assert_eq!(r[0], Reply::Value(5));
        assert_eq!(r[1], Reply::NotFound);
        assert!(matches!(&r[2], Reply::Error(e) if e.contains("non-numeric")));
        let r = exchange(
            b"add a 0 60 2\r\n12\r\nadd b 0 60 1\r\n1\r\n",
            b"STORED\r\nNOT_STORED\r\n",
            async |c| c.add(&[("a", 12, 60), ("b", 1, 60)]).await,
        )
        .await
        .unwrap();
        assert_eq!(r, [Reply::Stored, Reply::NotStored]);
    }

    /// The committed cargo-fuzz corpus of `memcached_reply`, replayed on stable.
    #[test]
    fn fuzz_corpus_replays() {
        let corpus = crate::fuzz_corpus("memcached_reply");
        let files = corpus.len();
        let answered: usize = corpus.iter().map(|d| check_replies(d)).sum();
        assert!(
            files >= 4 && answered >= 3,
            "{files} files, {answered} answers"
        );
    }

    #[tokio::test]
    async fn garbage_is_an_error_not_a_panic() {
        for reply in [
            &b"VALUE a 0 99999999999\r\n"[..],
            b"VALUE a 0 x\r\n",
            b"VALUE a\r\n",
            b"VALUE a 0 1\r\n12\r\nEND\r\n",
            b"SERVER_ERROR out of memory\r\n",
            b"no newline",
        ] {
            let (client, mut server) = duplex(4096);
            server.write_all(reply).await.unwrap();
            drop(server);
            let mut c = Conn::new(client);
            assert!(c.get(&["a"]).await.is_err(), "{reply:?}");
        }
        let (client, mut server) = duplex(4096);
        server.write_all(&[b'9'; 2000]).await.unwrap();
        let mut c = Conn::new(client);
        assert!(c.arith("incr", &[("a", 1)]).await.is_err());
    }
}
