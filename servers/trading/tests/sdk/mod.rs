//! Clients that put on the wire what the original executium SDKs put there (facts in
//! `shared/reference/trading-api-facts.md` and the SDKs' public sources; the code is
//! ours). What differs between them, and is reproduced here:
//!
//! | SDK | method | body encoding | nonce | token payload |
//! |---|---|---|---|---|
//! | Node `ApiAccess.js` | GET without input, else POST | `querystring` (space `%20`) | `Date.now() * 10000`: 17 digits, one value per millisecond | `{"nonce":N}` |
//! | Python `Class.py` (pycurl) | same | `urlencode` (space `+`) | `round(time.time() * 10**7)`: 17 digits | `{"nonce":N}` |
//! | PHP `class.php` (curl) | same | `http_build_query` (space `+`, `~` escaped) | `round(microtime(true) * 10**7)` as text: 17 digits | `{"nonce":"N"}` |
//! | Go `class.go` (net/http) | same; `Content-Type` form even on GET | `url.Values` (keys sorted) | first 18 digits of `UnixNano` as text | `{"nonce":"N"}` |
//!
//! All build the URL as `domain + "/api/v2/" + path`, so a domain configured with a
//! trailing slash asks for `//api/v2/...`. Every request here also says
//! `Connection: close` (the SDKs keep connections alive; reading to the end is simpler),
//! which changes nothing the server looks at.

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use test_support::http::{Response, exchange};
use trading_model::auth::sign;

/// Which SDK's wire behaviour a client reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sdk {
    Node,
    Python,
    Php,
    Go,
}

impl Sdk {
    pub const ALL: [Sdk; 4] = [Sdk::Node, Sdk::Python, Sdk::Php, Sdk::Go];

    fn user_agent(self) -> &'static str {
        match self {
            Sdk::Node => "API v2 (node cli)",
            Sdk::Python => "Trending News Python API v2",
            Sdk::Php => "API v2 (Marketdata)",
            Sdk::Go => "Executium Trending News (golang) API v2",
        }
    }

    /// The nonce this SDK makes at wall-clock time `since_epoch`, as it writes it.
    pub fn nonce_at(self, since_epoch: std::time::Duration) -> String {
        match self {
            Sdk::Node => (since_epoch.as_millis() * 10_000).to_string(),
            // A float of seconds, scaled and rounded, as `time.time()` gives it.
            Sdk::Python => ((since_epoch.as_secs_f64() * 1e7).round() as u128).to_string(),
            // `microtime(true)`: seconds as a float with microseconds.
            Sdk::Php => {
                let micros = since_epoch.as_micros() as f64;
                ((micros / 1e6 * 1e7).round() as u128).to_string()
            }
            Sdk::Go => since_epoch.as_nanos().to_string()[..18].to_owned(),
        }
    }

    /// The token payload around a nonce, as the SDK serialises it.
    fn payload(self, nonce: &str) -> String {
        match self {
            Sdk::Node | Sdk::Python => format!(r#"{{"nonce":{nonce}}}"#),
            Sdk::Php | Sdk::Go => format!(r#"{{"nonce":"{nonce}"}}"#),
        }
    }

    /// Form-encodes `input` as the SDK's library does.
    pub fn form(self, input: &[(&str, &str)]) -> String {
        let mut pairs: Vec<(&str, &str)> = input.to_vec();
        if self == Sdk::Go {
            pairs.sort_by_key(|p| p.0);
        }
        let escape = |s: &str| -> String {
            let mut out = String::new();
            for b in s.bytes() {
                let keep = b.is_ascii_alphanumeric()
                    || matches!(b, b'-' | b'_' | b'.')
                    || (b == b'~' && self != Sdk::Php);
                if keep {
                    out.push(char::from(b));
                } else if b == b' ' && self != Sdk::Node {
                    out.push('+');
                } else {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            out
        };
        pairs
            .iter()
            .map(|(k, v)| format!("{}={}", escape(k), escape(v)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

/// A client configured like the SDK's `ApiAccess`: a domain, a key and a secret.
pub struct SdkClient {
    pub sdk: Sdk,
    pub addr: SocketAddr,
    /// As the user configured it, e.g. `http://127.0.0.1:8090/` (trailing slash and all).
    pub domain: String,
    pub key: String,
    pub secret: String,
}

/// One request as sent, with the nonce its token carries.
pub struct Sent {
    pub nonce: String,
    pub token: String,
    pub method: &'static str,
    pub target: String,
    pub raw: Vec<u8>,
}

pub fn now_since_epoch() -> std::time::Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
}

impl SdkClient {
    /// The request the SDK's `send(path, input, {})` makes now.
    pub fn request(&self, path: &str, input: &[(&str, &str)]) -> Sent {
        let nonce = self.sdk.nonce_at(now_since_epoch());
        let token = sign(self.secret.as_bytes(), &self.sdk.payload(&nonce));
        self.request_with(path, input, nonce, token)
    }

    /// The same request carrying a given token (a replay, when the token was used).
    pub fn request_with(
        &self,
        path: &str,
        input: &[(&str, &str)],
        nonce: String,
        token: String,
    ) -> Sent {
        let url = format!("{}/api/v2/{path}", self.domain);
        let target = url
            .strip_prefix("http://")
            .and_then(|rest| rest.find('/').map(|i| rest[i..].to_owned()))
            .expect("an http:// domain");
        let body = self.sdk.form(input);
        let method = if body.is_empty() { "GET" } else { "POST" };
        let host = self.addr.to_string();
        let mut headers: Vec<(&str, String)> = vec![("Host", host)];
        let form = "application/x-www-form-urlencoded".to_owned();
        let length = body.len().to_string();
        match self.sdk {
            Sdk::Node => {
                headers.push(("key", self.key.clone()));
                headers.push(("authorization", token.clone()));
                headers.push(("User-Agent", self.sdk.user_agent().into()));
                if method == "POST" {
                    headers.push(("Content-Type", form));
                    headers.push(("Content-Length", length));
                }
            }
            Sdk::Python | Sdk::Php => {
                headers.push(("User-Agent", self.sdk.user_agent().into()));
                headers.push(("Accept", "*/*".into()));
                headers.push(("Key", self.key.clone()));
                headers.push(("Authorization", token.clone()));
                if method == "POST" {
                    headers.push(("Content-Length", length));
                    headers.push(("Content-Type", form));
                }
            }
            Sdk::Go => {
                headers.push(("User-Agent", self.sdk.user_agent().into()));
                if method == "POST" {
                    headers.push(("Content-Length", length));
                }
                headers.push(("Authorization", token.clone()));
                headers.push(("Content-Type", form));
                headers.push(("Key", self.key.clone()));
                headers.push(("Accept-Encoding", "gzip".into()));
            }
        }
        headers.push(("Connection", "close".into()));
        let mut raw = format!("{method} {target} HTTP/1.1\r\n");
        for (k, v) in &headers {
            raw.push_str(&format!("{k}: {v}\r\n"));
        }
        raw.push_str("\r\n");
        let mut raw = raw.into_bytes();
        raw.extend_from_slice(body.as_bytes());
        Sent {
            nonce,
            token,
            method,
            target,
            raw,
        }
    }

    /// Sends a request and reads the whole answer.
    pub fn send(&self, sent: &Sent) -> Response {
        exchange(self.addr, &sent.raw)
    }
}
