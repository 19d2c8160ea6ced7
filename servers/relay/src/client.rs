//! The outbound HTTP client the chat senders and the Grafana renderer share: hyper's
//! pooled client over rustls with the ring provider and the webpki root store (no
//! aws-lc, no OpenSSL). Unlike the original relay, certificates are verified.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Largest response body read from a chat API or Grafana (a rendered panel is a few
/// hundred KiB; anything much larger is not an answer we can use).
pub const MAX_RESPONSE: usize = 16 << 20;

/// A response read into memory.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON, or `Null` when it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// `Retry-After` in seconds (Slack and most HTTP APIs), when present and numeric.
    pub fn retry_after(&self) -> Option<Duration> {
        self.headers
            .get(header::RETRY_AFTER)?
            .to_str()
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()
            .map(Duration::from_secs)
    }
}

/// Why a request produced no reply. The text never contains the URL, which may carry a
/// token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The URL does not parse.
    #[error("invalid URL: {0}")]
    Url(String),
    /// Connecting, sending or reading failed.
    #[error("request failed: {0}")]
    Io(String),
    /// No complete answer within the timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// A cheap-to-clone HTTP(S) client.
#[derive(Clone)]
pub struct HttpClient {
    inner: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl HttpClient {
    /// A client trusting the webpki (Mozilla) roots.
    pub fn new() -> Result<HttpClient, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(provider)
            .map_err(|e| format!("TLS setup: {e}"))?
            .https_or_http()
            .enable_http1()
            .build();
        let inner = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(https);
        Ok(HttpClient { inner })
    }

    /// Sends one request and reads the whole answer, all within `timeout`.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, String)],
        body: Bytes,
        timeout: Duration,
    ) -> Result<Reply, ClientError> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| ClientError::Url(e.to_string()))?;
        let mut req = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            req = req.header(*k, v.as_str());
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| ClientError::Url(e.to_string()))?;
        let work = async {
            let resp = self
                .inner
                .request(req)
                .await
                .map_err(|e| ClientError::Io(error_chain(&e)))?;
            let (parts, body) = resp.into_parts();
            let body = Limited::new(body, MAX_RESPONSE)
                .collect()
                .await
                .map_err(|e| ClientError::Io(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok(Reply {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| ClientError::Timeout(timeout))?
    }
}

/// hyper's top-level error says only "client error (Connect)"; the cause says why.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// A `multipart/form-data` body (RFC 7578), built in memory.
pub struct Multipart {
    boundary: String,
    body: Vec<u8>,
}

impl Multipart {
    /// An empty form with a boundary that cannot occur in our text fields by accident.
    pub fn new() -> Multipart {
        let n = crate::now().timestamp_nanos_opt().unwrap_or(0);
        Multipart {
            boundary: format!("----event-relay-{n:x}"),
            body: Vec::new(),
        }
    }

    /// Adds a text field.
    pub fn text(mut self, name: &str, value: &str) -> Multipart {
        self.body.extend_from_slice(
            format!(
                "--{}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n",
                self.boundary
            )
            .as_bytes(),
        );
        self.body.extend_from_slice(value.as_bytes());
        self.body.extend_from_slice(b"\r\n");
        self
    }

    /// Adds a file part.
    pub fn file(
        mut self,
        name: &str,
        filename: &str,
        content_type: &str,
        data: &[u8],
    ) -> Multipart {
        self.body.extend_from_slice(
            format!(
                "--{}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: {content_type}\r\n\r\n",
                self.boundary
            )
            .as_bytes(),
        );
        self.body.extend_from_slice(data);
        self.body.extend_from_slice(b"\r\n");
        self
    }

    /// The `Content-Type` header value and the body.
    pub fn finish(mut self) -> (String, Bytes) {
        self.body
            .extend_from_slice(format!("--{}--\r\n", self.boundary).as_bytes());
        (
            format!("multipart/form-data; boundary={}", self.boundary),
            Bytes::from(self.body),
        )
    }
}

impl Default for Multipart {
    fn default() -> Self {
        Multipart::new()
    }
}

/// `application/x-www-form-urlencoded` body from pairs.
pub fn form(pairs: &[(&str, &str)]) -> Bytes {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    Bytes::from(s.finish())
}

/// The query parameters of a URL, decoded.
pub fn query_pairs(url: &str) -> Vec<(String, String)> {
    match url.split_once('?') {
        Some((_, q)) => form_urlencoded::parse(q.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipart_layout() {
        let m = Multipart {
            boundary: "B".into(),
            body: Vec::new(),
        };
        let (ct, body) = m
            .text("a", "x\ny")
            .file("f", "p.png", "image/png", b"\x89PNG")
            .finish();
        assert_eq!(ct, "multipart/form-data; boundary=B");
        assert_eq!(
            &body[..],
            b"--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\ny\r\n--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"p.png\"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n--B--\r\n"
        );
    }

    #[test]
    fn query_is_decoded() {
        assert_eq!(
            query_pairs("https://x/api/files.upload?token=a%2Bb&channels=C1,C2"),
            [
                ("token".to_string(), "a+b".to_string()),
                ("channels".to_string(), "C1,C2".to_string())
            ]
        );
        assert!(query_pairs("https://x/").is_empty());
    }
}
