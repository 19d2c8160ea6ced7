//! RESP, as far as the counting commands need it: encoding arrays of bulk strings, and
//! parsing one reply at a time from a buffer that may hold only part of it.

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
        let corpus = test_support::fuzz::corpus("redis_reply");
        let files = corpus.len();
        let replies: usize = corpus.iter().map(|(_, d)| check_parse(d)).sum();
        assert!(
            files >= 5 && replies >= 5,
            "{files} files, {replies} replies"
        );
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
