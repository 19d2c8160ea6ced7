//! A lean HTTP/2 client side for unary gRPC calls, for load generation only.
//!
//! The Redis ratio compares our server with `redis-benchmark`, whose C event loop spends a
//! few microseconds per command on the same two cores as Redis. tonic's client on hyper
//! spends 12–18 µs per call on the cores the measured server needs, so with it the ratio
//! mostly measured the client. This module is the HTTP/2 analogue of `redis-benchmark`'s
//! client: requests leave as pre-encoded frames (HEADERS whose fields are, after the first
//! request, six one-byte HPACK table references, and one DATA frame that ends the stream,
//! as Envoy sends a unary call), and answers are read for only what a count needs.
//!
//! What it deliberately does not do: decode the server's header blocks. A call counts as
//! answered by its one DATA frame (the `overall_code` of the `RateLimitResponse` in it),
//! and as ended by the frame that ends its stream; a stream that ends with no message in
//! it (a gRPC error is a trailers-only answer), or is reset, is a failure. A server that
//! sends a message and then an error status would be counted by its message; the servers
//! measured here never do. No TLS, no priorities, no server push (refused in its
//! SETTINGS), and a peer that shrinks the HPACK table below its 4,096-byte default is
//! refused rather than followed.

use std::fmt;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;

/// The frame size this client accepts, the protocol's default; it never asks for more.
pub const MAX_FRAME: usize = 16_384;

/// The receive window of each stream, in the opening SETTINGS: answers are a few dozen
/// bytes, so a stream never waits for a window update.
const STREAM_WINDOW: u32 = 1 << 24;
/// The connection's receive window after the opening WINDOW_UPDATE; consumed bytes are
/// given back once they reach half of it, a frame per hundreds of thousands of answers.
const CONN_WINDOW: u32 = 1 << 30;
const DEFAULT_WINDOW: u32 = 65_535;

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `overall_code` OK.
    Allowed,
    /// `overall_code` OVER_LIMIT.
    OverLimit,
    /// Reset, ended with no message (a gRPC error status), or an undecodable message.
    Failed,
}

/// Why the connection cannot go on.
#[derive(Debug, PartialEq, Eq)]
pub enum H2Error {
    /// The peer broke the protocol in a way this client cannot step over.
    Protocol(&'static str),
    /// The peer is closing the connection (GOAWAY).
    GoAway { last_stream: u32, code: u32 },
    /// The peer asked for something this client does not do.
    Unsupported(&'static str),
    /// Every client stream id of the connection is used.
    StreamIdsExhausted,
}

impl fmt::Display for H2Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            H2Error::Protocol(what) => write!(f, "HTTP/2 protocol error from the server: {what}"),
            H2Error::GoAway { last_stream, code } => write!(
                f,
                "the server sent GOAWAY (error code {code}, last stream {last_stream})"
            ),
            H2Error::Unsupported(what) => {
                write!(f, "not supported by rl-load's raw client: {what}")
            }
            H2Error::StreamIdsExhausted => f.write_str("every stream id of the connection is used"),
        }
    }
}

impl std::error::Error for H2Error {}

fn frame_head(out: &mut Vec<u8>, len: usize, ty: u8, flags: u8, stream: u32) {
    let len = len as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(ty);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
}

/// What a connection sends before its first request: the preface, SETTINGS (no push, a
/// large stream window) and a WINDOW_UPDATE that opens the connection's window.
pub fn opening(out: &mut Vec<u8>) {
    out.extend_from_slice(PREFACE);
    frame_head(out, 12, SETTINGS, 0, 0);
    out.extend_from_slice(&0x2u16.to_be_bytes()); // ENABLE_PUSH
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&0x4u16.to_be_bytes()); // INITIAL_WINDOW_SIZE
    out.extend_from_slice(&STREAM_WINDOW.to_be_bytes());
    window_update(out, CONN_WINDOW - DEFAULT_WINDOW);
}

fn window_update(out: &mut Vec<u8>, increment: u32) {
    frame_head(out, 4, WINDOW_UPDATE, 0, 0);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// An HPACK integer with an `n`-bit prefix whose high bits are `first` (RFC 7541 §5.1).
fn hpack_int(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

fn hpack_str(out: &mut Vec<u8>, s: &[u8]) {
    hpack_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// Writes requests: the first one's header block enters its fields into the peer's HPACK
/// table, every later one refers to them by index.
pub struct Requests {
    first: Vec<u8>,
    next_id: u32,
}

/// The later requests' header block: `:method POST` (static 3), `:scheme http` (static
/// 6), then the dynamic entries, newest first at 62: te, content-type, :authority, :path.
const INDEXED: [u8; 6] = [0x83, 0x86, 0x80 | 65, 0x80 | 64, 0x80 | 63, 0x80 | 62];

impl Requests {
    /// Requests for `path` (e.g. `/pkg.Service/Method`) on `authority` (`host:port`).
    pub fn new(path: &str, authority: &str) -> Self {
        let mut first = vec![0x83, 0x86];
        // Literal with incremental indexing, name from the static table: :path (4),
        // :authority (1), content-type (31); te has no static entry.
        first.push(0x40 | 4);
        hpack_str(&mut first, path.as_bytes());
        first.push(0x40 | 1);
        hpack_str(&mut first, authority.as_bytes());
        first.push(0x40 | 31);
        hpack_str(&mut first, b"application/grpc");
        first.push(0x40);
        hpack_str(&mut first, b"te");
        hpack_str(&mut first, b"trailers");
        Requests { first, next_id: 1 }
    }

    /// The id the next request will get.
    pub fn next_id(&self) -> u32 {
        self.next_id
    }

    /// Appends one call (HEADERS, then DATA with `body`, a length-prefixed gRPC message,
    /// ending the stream) and returns its stream id.
    pub fn push(&mut self, out: &mut Vec<u8>, body: &[u8]) -> Result<u32, H2Error> {
        let id = self.next_id;
        if id > 0x7fff_fffd {
            return Err(H2Error::StreamIdsExhausted);
        }
        if body.len() > MAX_FRAME {
            return Err(H2Error::Unsupported("a request body over 16 KiB"));
        }
        let block: &[u8] = if id == 1 { &self.first } else { &INDEXED };
        frame_head(out, block.len(), HEADERS, END_HEADERS, id);
        out.extend_from_slice(block);
        frame_head(out, body.len(), DATA, END_STREAM, id);
        out.extend_from_slice(body);
        self.next_id = id + 2;
        Ok(id)
    }
}

/// The answer side of a connection: parses the server's frames, reports each call's end,
/// and collects the control frames (acknowledgements, window updates) owed in return.
pub struct Answers {
    /// Streams whose message has arrived but not yet their end.
    pending: Vec<(u32, Outcome)>,
    unreturned: u32,
    credit: i64,
    max_streams: u32,
    control: Vec<u8>,
}

impl Default for Answers {
    fn default() -> Self {
        Answers {
            pending: Vec::new(),
            unreturned: 0,
            credit: 0,
            max_streams: u32::MAX,
            control: Vec::new(),
        }
    }
}

impl Answers {
    /// The server's connection send window before any WINDOW_UPDATE.
    pub const INITIAL_SEND_WINDOW: i64 = DEFAULT_WINDOW as i64;

    /// Parses the complete frames at the start of `input` and returns how many bytes they
    /// took; the rest is an incomplete frame to parse again with more bytes after it.
    /// `done` is called with each stream that ended.
    pub fn feed(
        &mut self,
        input: &[u8],
        mut done: impl FnMut(u32, Outcome),
    ) -> Result<usize, H2Error> {
        let mut rest = input;
        while rest.len() >= 9 {
            let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
            if len > MAX_FRAME {
                return Err(H2Error::Protocol(
                    "a frame larger than SETTINGS_MAX_FRAME_SIZE",
                ));
            }
            if rest.len() < 9 + len {
                break;
            }
            let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
            self.frame(rest[3], rest[4], stream, &rest[9..9 + len], &mut done)?;
            rest = &rest[9 + len..];
        }
        if self.unreturned >= CONN_WINDOW / 2 {
            window_update(&mut self.control, self.unreturned);
            self.unreturned = 0;
        }
        Ok(input.len() - rest.len())
    }

    fn frame(
        &mut self,
        ty: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
        done: &mut impl FnMut(u32, Outcome),
    ) -> Result<(), H2Error> {
        match ty {
            DATA => {
                if stream == 0 {
                    return Err(H2Error::Protocol("DATA on stream 0"));
                }
                // Flow control counts the whole payload, padding included.
                self.unreturned += payload.len() as u32;
                let data = unpad(flags, payload)?;
                let outcome = grpc_outcome(data);
                let at = self.pending.iter().position(|(s, _)| *s == stream);
                if flags & END_STREAM != 0 {
                    // A gRPC answer ends with trailers, never with DATA.
                    if let Some(i) = at {
                        self.pending.swap_remove(i);
                    }
                    done(stream, Outcome::Failed);
                } else if let Some(i) = at {
                    // A unary answer is one message.
                    self.pending[i].1 = Outcome::Failed;
                } else {
                    self.pending.push((stream, outcome));
                }
            }
            HEADERS => {
                if stream == 0 {
                    return Err(H2Error::Protocol("HEADERS on stream 0"));
                }
                if flags & END_STREAM != 0 {
                    let outcome = match self.pending.iter().position(|(s, _)| *s == stream) {
                        Some(i) => self.pending.swap_remove(i).1,
                        None => Outcome::Failed,
                    };
                    done(stream, outcome);
                }
            }
            RST_STREAM => {
                if stream == 0 || payload.len() != 4 {
                    return Err(H2Error::Protocol("a malformed RST_STREAM"));
                }
                if let Some(i) = self.pending.iter().position(|(s, _)| *s == stream) {
                    self.pending.swap_remove(i);
                }
                done(stream, Outcome::Failed);
            }
            SETTINGS => {
                if stream != 0 || payload.len() % 6 != 0 {
                    return Err(H2Error::Protocol("a malformed SETTINGS"));
                }
                if flags & ACK == 0 {
                    for s in payload.chunks_exact(6) {
                        let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
                        match u16::from_be_bytes([s[0], s[1]]) {
                            0x1 if v < 4096 => {
                                return Err(H2Error::Unsupported(
                                    "an HPACK table smaller than 4,096 bytes",
                                ));
                            }
                            0x3 => self.max_streams = v,
                            0x4 if v < 1024 => {
                                return Err(H2Error::Unsupported(
                                    "a stream window smaller than one request",
                                ));
                            }
                            _ => {}
                        }
                    }
                    frame_head(&mut self.control, 0, SETTINGS, ACK, 0);
                }
            }
            PING => {
                if stream != 0 || payload.len() != 8 {
                    return Err(H2Error::Protocol("a malformed PING"));
                }
                if flags & ACK == 0 {
                    frame_head(&mut self.control, 8, PING, ACK, 0);
                    self.control.extend_from_slice(payload);
                }
            }
            GOAWAY => {
                if payload.len() < 8 {
                    return Err(H2Error::Protocol("a malformed GOAWAY"));
                }
                return Err(H2Error::GoAway {
                    last_stream: u32::from_be_bytes([
                        payload[0], payload[1], payload[2], payload[3],
                    ]) & 0x7fff_ffff,
                    code: u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]),
                });
            }
            WINDOW_UPDATE => {
                if payload.len() != 4 {
                    return Err(H2Error::Protocol("a malformed WINDOW_UPDATE"));
                }
                let inc = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                    & 0x7fff_ffff;
                // A stream's window is never short: its one DATA frame fits the initial one.
                if stream == 0 {
                    self.credit += i64::from(inc);
                }
            }
            PUSH_PROMISE => return Err(H2Error::Protocol("PUSH_PROMISE with push disabled")),
            // CONTINUATION only continues header blocks this client does not decode;
            // PRIORITY and unknown types are ignored, as the protocol asks.
            _ => {}
        }
        Ok(())
    }

    /// Connection send window the server has granted since the last call.
    pub fn take_credit(&mut self) -> i64 {
        std::mem::take(&mut self.credit)
    }

    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until it says).
    pub fn max_streams(&self) -> u32 {
        self.max_streams
    }

    /// Frames owed to the server (SETTINGS and PING acknowledgements, window updates),
    /// to be written before anything else; cleared by the caller once written.
    pub fn control(&mut self) -> &mut Vec<u8> {
        &mut self.control
    }
}

/// Feeds `data[1..]` to a fresh [`Answers`] in two reads, split where `data[0]` says, and
/// checks what the load generator relies on: no panic, never more bytes taken than given.
/// Returns how many calls ended. The fuzz target `h2raw_answers` and the corpus replay
/// test call it.
pub fn check_feed(data: &[u8]) -> usize {
    let Some((&cut, rest)) = data.split_first() else {
        return 0;
    };
    let cut = cut as usize * rest.len() / 255;
    let mut a = Answers::default();
    let mut ended = 0;
    let mut buf = rest[..cut].to_vec();
    if let Ok(used) = a.feed(&buf, |_, _| ended += 1) {
        assert!(used <= buf.len(), "took {used} of {}", buf.len());
        buf.drain(..used);
        buf.extend_from_slice(&rest[cut..]);
        if let Ok(used) = a.feed(&buf, |_, _| ended += 1) {
            assert!(used <= buf.len(), "took {used} of {}", buf.len());
        }
    }
    ended
}

fn unpad(flags: u8, payload: &[u8]) -> Result<&[u8], H2Error> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let Some((&pad, rest)) = payload.split_first() else {
        return Err(H2Error::Protocol("a padded frame with no pad length"));
    };
    rest.len()
        .checked_sub(pad as usize)
        .map(|end| &rest[..end])
        .ok_or(H2Error::Protocol("padding longer than the frame"))
}

/// The outcome a DATA payload holding one uncompressed gRPC message says: the
/// `RateLimitResponse.overall_code` (field 1, varint; absent means UNKNOWN).
fn grpc_outcome(data: &[u8]) -> Outcome {
    let Some((&[0, a, b, c, d], msg)) = data.split_first_chunk::<5>() else {
        return Outcome::Failed;
    };
    if u32::from_be_bytes([a, b, c, d]) as usize != msg.len() {
        return Outcome::Failed;
    }
    let mut buf = msg;
    let mut code = 0u64;
    while !buf.is_empty() {
        let Ok(key) = prost::encoding::decode_varint(&mut buf) else {
            return Outcome::Failed;
        };
        let skip = match key & 7 {
            0 => match prost::encoding::decode_varint(&mut buf) {
                Ok(v) => {
                    if key >> 3 == 1 {
                        code = v;
                    }
                    0
                }
                Err(_) => return Outcome::Failed,
            },
            1 => 8,
            2 => match prost::encoding::decode_varint(&mut buf) {
                Ok(n) => n,
                Err(_) => return Outcome::Failed,
            },
            5 => 4,
            _ => return Outcome::Failed,
        };
        match usize::try_from(skip).ok().and_then(|n| buf.get(n..)) {
            Some(rest) => buf = rest,
            None => return Outcome::Failed,
        }
    }
    match code {
        1 => Outcome::Allowed,
        2 => Outcome::OverLimit,
        _ => Outcome::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        frame_head(&mut v, payload.len(), ty, flags, stream);
        v.extend_from_slice(payload);
        v
    }

    fn grpc(msg: &[u8]) -> Vec<u8> {
        let mut v = vec![0];
        v.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        v.extend_from_slice(msg);
        v
    }

    fn ends(a: &mut Answers, bytes: &[u8]) -> Result<Vec<(u32, Outcome)>, H2Error> {
        let mut out = Vec::new();
        let used = a.feed(bytes, |s, o| out.push((s, o)))?;
        assert_eq!(used, bytes.len());
        Ok(out)
    }

    #[test]
    fn an_answer_is_its_message_and_ends_with_its_trailers() {
        let mut a = Answers::default();
        let mut wire = frame(HEADERS, END_HEADERS, 1, &[0x88]);
        // overall_code OVER_LIMIT after a status (field 2, length-delimited) and a
        // fixed32 field this client does not know.
        wire.extend(frame(
            DATA,
            0,
            1,
            &grpc(&[0x12, 2, 0x08, 1, 0x1d, 0, 0, 0, 0, 0x08, 2]),
        ));
        wire.extend(frame(HEADERS, END_HEADERS, 3, &[0x88]));
        wire.extend(frame(
            DATA,
            PADDED,
            3,
            &[2, 0, 0, 0, 0, 2, 0x08, 1, 0xff, 0xff],
        ));
        assert_eq!(ends(&mut a, &wire), Ok(vec![]));
        let mut wire = frame(HEADERS, END_STREAM | END_HEADERS, 3, &[0xbe]);
        wire.extend(frame(HEADERS, END_STREAM | END_HEADERS, 1, &[0xbe]));
        assert_eq!(
            ends(&mut a, &wire),
            Ok(vec![(3, Outcome::Allowed), (1, Outcome::OverLimit)])
        );
        assert!(a.pending.is_empty());
    }

    #[test]
    fn errors_and_resets_fail_the_call() {
        let mut a = Answers::default();
        let mut wire = frame(HEADERS, END_STREAM | END_HEADERS, 1, &[0x88]);
        wire.extend(frame(DATA, 0, 3, &grpc(&[0x08, 1])));
        wire.extend(frame(RST_STREAM, 0, 3, &8u32.to_be_bytes()));
        // Compressed, truncated, UNKNOWN, and a second message on one stream.
        wire.extend(frame(DATA, 0, 5, &[1, 0, 0, 0, 2, 0x08, 1]));
        wire.extend(frame(DATA, 0, 7, &[0, 0, 0, 0, 3, 0x08, 1]));
        wire.extend(frame(DATA, 0, 9, &grpc(&[])));
        wire.extend(frame(DATA, 0, 11, &grpc(&[0x08, 1])));
        wire.extend(frame(DATA, 0, 11, &grpc(&[0x08, 1])));
        wire.extend(frame(DATA, END_STREAM, 13, &grpc(&[0x08, 1])));
        for s in [5, 7, 9, 11] {
            wire.extend(frame(HEADERS, END_STREAM | END_HEADERS, s, &[0xbe]));
        }
        let got = ends(&mut a, &wire).expect("parses");
        let want: Vec<_> = [1, 3, 13, 5, 7, 9, 11]
            .into_iter()
            .map(|s| (s, Outcome::Failed))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn settings_and_pings_are_answered_and_windows_counted() {
        let mut a = Answers::default();
        let mut settings = Vec::new();
        settings.extend_from_slice(&[0, 3, 0, 0, 0, 100]);
        settings.extend_from_slice(&[0, 4, 0, 1, 0, 0]);
        let mut wire = frame(SETTINGS, 0, 0, &settings);
        wire.extend(frame(SETTINGS, ACK, 0, &[]));
        wire.extend(frame(PING, 0, 0, b"12345678"));
        wire.extend(frame(PING, ACK, 0, b"abcdefgh"));
        wire.extend(frame(WINDOW_UPDATE, 0, 0, &1000u32.to_be_bytes()));
        wire.extend(frame(WINDOW_UPDATE, 0, 1, &7u32.to_be_bytes()));
        wire.extend(frame(0x2, 0, 1, &[0, 0, 0, 0, 1])); // PRIORITY
        wire.extend(frame(0xfa, 0, 0, b"unknown"));
        assert_eq!(ends(&mut a, &wire), Ok(vec![]));
        assert_eq!(a.max_streams(), 100);
        assert_eq!(a.take_credit(), 1000);
        assert_eq!(a.take_credit(), 0);
        let mut want = frame(SETTINGS, ACK, 0, &[]);
        want.extend(frame(PING, ACK, 0, b"12345678"));
        assert_eq!(a.control(), &want);
    }

    #[test]
    fn a_partial_frame_waits_for_the_rest() {
        let mut a = Answers::default();
        let mut wire = frame(PING, 0, 0, b"12345678");
        wire.extend(frame(DATA, 0, 1, &grpc(&[0x08, 1])));
        let mut seen = 0;
        let used = a
            .feed(&wire[..wire.len() - 1], |_, _| seen += 1)
            .expect("parses");
        assert_eq!(used, 17);
        assert_eq!(
            a.feed(&wire[used..], |_, _| seen += 1),
            Ok(wire.len() - used)
        );
        assert_eq!(seen, 0);
        assert_eq!(a.pending, vec![(1, Outcome::Allowed)]);
    }

    #[test]
    fn what_it_cannot_follow_is_an_error() {
        let cases: [(Vec<u8>, H2Error); 6] = [
            (
                frame(GOAWAY, 0, 0, &[0, 0, 0, 7, 0, 0, 0, 2]),
                H2Error::GoAway {
                    last_stream: 7,
                    code: 2,
                },
            ),
            (
                frame(SETTINGS, 0, 0, &[0, 1, 0, 0, 0, 0]),
                H2Error::Unsupported("an HPACK table smaller than 4,096 bytes"),
            ),
            (
                frame(PUSH_PROMISE, 0, 1, &[0, 0, 0, 2]),
                H2Error::Protocol("PUSH_PROMISE with push disabled"),
            ),
            (
                frame(DATA, PADDED, 1, &[9, 1]),
                H2Error::Protocol("padding longer than the frame"),
            ),
            (
                frame(PING, 0, 0, b"short"),
                H2Error::Protocol("a malformed PING"),
            ),
            (
                {
                    let mut v = vec![0, 0x40, 1];
                    v.extend_from_slice(&[0; 6]);
                    v
                },
                H2Error::Protocol("a frame larger than SETTINGS_MAX_FRAME_SIZE"),
            ),
        ];
        for (wire, want) in cases {
            assert_eq!(Answers::default().feed(&wire, |_, _| ()), Err(want));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_or_stall() {
        // xorshift: reproducible noise, with frame-like lengths often enough to reach
        // every frame type's checks.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let mut bytes = Vec::new();
            for _ in 0..(next() % 4) {
                let len = (next() % 24) as usize;
                let head = [0, 0, len as u8, (next() % 11) as u8, next() as u8];
                bytes.extend_from_slice(&head);
                bytes.extend_from_slice(&((next() % 16) as u32).to_be_bytes());
                bytes.extend((0..len).map(|_| next() as u8));
            }
            bytes.insert(0, next() as u8);
            check_feed(&bytes);
        }
    }

    /// The committed cargo-fuzz corpus of `h2raw_answers`, replayed on stable.
    #[test]
    fn fuzz_corpus_replays() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/h2raw_answers");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).expect("corpus directory") {
            check_feed(&std::fs::read(e.expect("entry").path()).expect("corpus file"));
            n += 1;
        }
        assert!(n > 0, "empty corpus in {}", dir.display());
    }

    #[test]
    fn requests_index_their_fields_after_the_first() {
        let mut r = Requests::new("/p.S/M", "h:1");
        let mut out = Vec::new();
        assert_eq!(r.push(&mut out, &grpc(&[0x0a, 1, b'x'])), Ok(1));
        let first_len = out.len();
        // HEADERS: 9 + block, block = 2 + (1+1+6) + (1+1+3) + (1+1+16) + (1+1+2+1+8) = 46.
        assert_eq!(&out[..9], &[0, 0, 46, HEADERS, END_HEADERS, 0, 0, 0, 1]);
        assert_eq!(
            &out[9 + 46..9 + 46 + 9],
            &[0, 0, 8, DATA, END_STREAM, 0, 0, 0, 1]
        );
        assert_eq!(r.push(&mut out, &grpc(&[])), Ok(3));
        assert_eq!(
            &out[first_len..first_len + 15],
            &[
                0,
                0,
                6,
                HEADERS,
                END_HEADERS,
                0,
                0,
                0,
                3,
                0x83,
                0x86,
                0xc1,
                0xc0,
                0xbf,
                0xbe
            ]
        );
        assert_eq!(r.next_id(), 5);
        let mut long = Vec::new();
        hpack_int(&mut long, 0, 7, 300);
        assert_eq!(long, [127, 173, 1]);
    }
}
