//! A small HTTP/1.1 client over a raw `TcpStream`: one request per connection
//! (`Connection: close`), the reply read to the end and parsed. Blocking functions for
//! tests that run the server as another process, `async` ones (tokio) for tests whose
//! server runs on the test's own runtime.

use std::io::{Read, Write};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a reply may take.
pub const LIMIT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body, chunked transfer coding removed.
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    /// The first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The bytes of one request: `Host: test` and `Connection: close` unless `headers` name
/// them, then `headers`, then `Content-Length` unless `headers` set it or
/// `Transfer-Encoding`.
pub fn encode(method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut head = format!("{method} {target} HTTP/1.1\r\n");
    if !has("host") {
        head.push_str("Host: test\r\n");
    }
    if !has("connection") {
        head.push_str("Connection: close\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !has("content-length") && !has("transfer-encoding") {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut raw = head.into_bytes();
    raw.extend_from_slice(body);
    raw
}

/// Sends `raw` as is on a fresh connection and reads the reply to the end. A failed
/// write is ignored: the server may answer (413, say) before it read everything.
pub fn exchange(addr: impl std::net::ToSocketAddrs, raw: &[u8]) -> Response {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let _ = s.write_all(raw);
    let mut bytes = Vec::new();
    s.read_to_end(&mut bytes).unwrap();
    parse(&bytes)
}

/// One request (see [`encode`]) on a fresh connection.
pub fn request(
    addr: impl std::net::ToSocketAddrs,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    exchange(addr, &encode(method, target, headers, body))
}

/// [`exchange`] on the tokio runtime; panics if the reply takes longer than [`LIMIT`].
pub async fn exchange_async(addr: impl tokio::net::ToSocketAddrs, raw: &[u8]) -> Response {
    tokio::time::timeout(LIMIT, async {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _ = s.write_all(raw).await;
        let mut bytes = Vec::new();
        s.read_to_end(&mut bytes).await.unwrap();
        parse(&bytes)
    })
    .await
    .expect("a reply in time")
}

/// [`request`] on the tokio runtime.
pub async fn request_async(
    addr: impl tokio::net::ToSocketAddrs,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    exchange_async(addr, &encode(method, target, headers, body)).await
}

/// Parses a whole reply; panics if there is no complete head.
pub fn parse(raw: &[u8]) -> Response {
    try_parse(raw)
        .unwrap_or_else(|| panic!("not an HTTP reply: {:?}", String::from_utf8_lossy(raw)))
}

/// Parses a whole reply, `None` if there is no complete head with a status.
pub fn try_parse(raw: &[u8]) -> Option<Response> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Some(Response {
        status,
        headers,
        body,
    })
}

/// The data of a chunked body (extensions and trailers dropped; stops at what is cut off).
pub fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(nl) = b.windows(2).position(|w| w == b"\r\n") {
        let line = String::from_utf8_lossy(&b[..nl]);
        let size = line.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(size, 16) else {
            break;
        };
        if size == 0 || b.len() < nl + 2 + size {
            break;
        }
        out.extend_from_slice(&b[nl + 2..nl + 2 + size]);
        b = b.get(nl + 2 + size + 2..).unwrap_or_default();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_heads_and_chunked_bodies() {
        let r = parse(b"HTTP/1.1 200 OK\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
        assert_eq!(
            (r.status, r.header("x-a"), r.text().as_str()),
            (200, Some("1"), "abcde")
        );
        assert!(try_parse(b"HTTP/1.1 200 OK\r\n").is_none());
    }

    #[test]
    fn encodes_defaults_unless_given() {
        let raw = encode("GET", "/", &[("Host", "h")], b"");
        assert_eq!(
            String::from_utf8(raw).unwrap(),
            "GET / HTTP/1.1\r\nConnection: close\r\nHost: h\r\nContent-Length: 0\r\n\r\n"
        );
    }
}
