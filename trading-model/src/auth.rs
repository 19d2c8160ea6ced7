//! Request authentication as the original SDKs do it, plus an opt-in strict mode.
//!
//! Wire format (headers `Key` and `Authorization`): the token is
//! `b64url(header) "." b64url(payload) "." b64url(HMAC-SHA256(secret, first two parts))`
//! with payload `{"nonce": N}`. The MAC is checked over the bytes as received, so clients
//! may serialise JSON however they like. Nonces have 17 to 20 digits, are read as times
//! and are accepted once each per key within a window ([`crate::replay`]); none may run
//! more than 60 s ahead of the server clock.
//!
//! The original signs only the nonce, so a captured token works against any endpoint and
//! body until the client uses a newer nonce. Strict mode (a per-key flag) closes that: the
//! payload must also carry `m` (method), `p` (path below `/api/v2/`), `q` (hex SHA-256 of the
//! raw query string), `b` (hex SHA-256 of the raw body) and `ts` (milliseconds, within
//! 60 s of the server clock).
//!
//! Everything here is pure: the secret and the time are arguments.

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::errors::{ApiError, ErrorCode};

/// How far ahead of the server clock a nonce or strict timestamp may be.
pub const MAX_AHEAD_MS: u64 = 60_000;

/// URL-safe alphabet; padding accepted but not required (SDKs strip it).
const B64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Why a request was not authenticated. Each maps to the original's error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No (or a blank) `Key` header: 2001.
    #[error("Missing Key")]
    MissingKey,
    /// The key is unknown or disabled: 2000.
    #[error("Invalid Key")]
    InvalidKey,
    /// No `Authorization` header: 2100.
    #[error("Missing Authorization")]
    MissingAuthorization,
    /// The token is not three base64url parts with a JSON header and payload, or not HS256: 1820.
    #[error("Unprocessable Entity: {0}")]
    Malformed(&'static str),
    /// The signature does not match the key's secret: 2000 (the key is not proven).
    #[error("Invalid Key: signature does not match")]
    BadSignature,
    /// The payload has no nonce: 2010.
    #[error("Nonce missing")]
    NonceMissing,
    /// The nonce is not 17 to 20 digits: 2012.
    #[error("Nonce incorrectly formatted")]
    NonceFormat,
    /// The nonce is older than the key's replay window: 2011.
    #[error("Nonce too small")]
    NonceTooSmall,
    /// The key accepted this very nonce before, so this is a replayed token: 2011.
    #[error("Nonce too small: this nonce was already used with this key (a replayed token)")]
    NonceReused,
    /// The nonce is more than 60 s ahead: 2014.
    #[error("Nonce too big at {0}")]
    NonceTooBig(u128),
    /// Strict mode: a claim is absent or does not match the request (1820 with HTTP 401).
    #[error("Token does not match the request: claim {0:?}")]
    StrictMismatch(&'static str),
}

impl AuthError {
    /// The error answer for this failure.
    pub fn to_api_error(&self) -> ApiError {
        let code = match self {
            AuthError::MissingKey => ErrorCode::MissingKey,
            AuthError::InvalidKey | AuthError::BadSignature => ErrorCode::InvalidKey,
            AuthError::MissingAuthorization => ErrorCode::MissingAuthorization,
            AuthError::Malformed(_) => ErrorCode::UnprocessableAuthorization,
            AuthError::NonceMissing => ErrorCode::NonceMissing,
            AuthError::NonceFormat => ErrorCode::NonceFormat,
            AuthError::NonceTooSmall | AuthError::NonceReused => ErrorCode::NonceTooSmall,
            AuthError::NonceTooBig(_) => ErrorCode::NonceTooBig,
            AuthError::StrictMismatch(_) => {
                return ApiError::new(ErrorCode::UnprocessableAuthorization)
                    .with_status(401)
                    .with_message(self.to_string());
            }
        };
        ApiError::new(code).with_message(self.to_string())
    }
}

/// A parsed, not yet verified token.
#[derive(Debug, Clone)]
pub struct Token {
    signed: String,
    signature: Vec<u8>,
    payload: serde_json::Map<String, Value>,
}

/// What a request looks like to strict mode.
#[derive(Debug, Clone, Copy)]
pub struct Signed<'a> {
    /// HTTP method.
    pub method: &'a str,
    /// Path below `/api/v2/`.
    pub path: &'a str,
    /// Raw query string (without `?`).
    pub query: &'a str,
    /// Raw body.
    pub body: &'a [u8],
}

/// Hex SHA-256, as strict mode expects in `q` and `b`.
pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Token {
    /// Splits and decodes an `Authorization` header value. A `Bearer ` prefix is tolerated.
    pub fn parse(header: &str) -> Result<Token, AuthError> {
        let header = header.trim();
        let header = header.strip_prefix("Bearer ").unwrap_or(header);
        if header.len() > 8192 {
            return Err(AuthError::Malformed("token too long"));
        }
        let mut parts = header.split('.');
        let (Some(h), Some(p), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(AuthError::Malformed(
                "a token has three dot-separated parts",
            ));
        };
        let decode = |part: &str| {
            B64.decode(part)
                .map_err(|_| AuthError::Malformed("part is not base64url"))
        };
        let head: Value = serde_json::from_slice(&decode(h)?)
            .map_err(|_| AuthError::Malformed("header is not JSON"))?;
        if head.get("alg").and_then(Value::as_str) != Some("HS256") {
            return Err(AuthError::Malformed("only alg HS256 is accepted"));
        }
        let payload = match serde_json::from_slice(&decode(p)?) {
            Ok(Value::Object(m)) => m,
            _ => return Err(AuthError::Malformed("payload is not a JSON object")),
        };
        Ok(Token {
            signed: format!("{h}.{p}"),
            signature: decode(s)?,
            payload,
        })
    }

    /// Checks the signature in constant time.
    pub fn verify(&self, secret: &[u8]) -> Result<(), AuthError> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret).map_err(|_| AuthError::BadSignature)?;
        mac.update(self.signed.as_bytes());
        mac.verify_slice(&self.signature)
            .map_err(|_| AuthError::BadSignature)
    }

    /// The nonce: a JSON number or a string of 17 to 20 digits.
    pub fn nonce(&self) -> Result<u128, AuthError> {
        let text = match self.payload.get("nonce") {
            None | Some(Value::Null) => return Err(AuthError::NonceMissing),
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(AuthError::NonceFormat),
        };
        if !(17..=20).contains(&text.len()) || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(AuthError::NonceFormat);
        }
        text.parse().map_err(|_| AuthError::NonceFormat)
    }

    /// The payload claims.
    pub fn claims(&self) -> &serde_json::Map<String, Value> {
        &self.payload
    }

    /// Strict mode: every request claim must be present and match.
    pub fn check_strict(&self, req: &Signed<'_>, now_ms: u64) -> Result<(), AuthError> {
        let text = |k: &'static str| {
            self.payload
                .get(k)
                .and_then(Value::as_str)
                .ok_or(AuthError::StrictMismatch(k))
        };
        if !text("m")?.eq_ignore_ascii_case(req.method) {
            return Err(AuthError::StrictMismatch("m"));
        }
        if text("p")?.trim_start_matches('/') != req.path {
            return Err(AuthError::StrictMismatch("p"));
        }
        if !text("q")?.eq_ignore_ascii_case(&sha256_hex(req.query.as_bytes())) {
            return Err(AuthError::StrictMismatch("q"));
        }
        if !text("b")?.eq_ignore_ascii_case(&sha256_hex(req.body)) {
            return Err(AuthError::StrictMismatch("b"));
        }
        let ts = self
            .payload
            .get("ts")
            .and_then(Value::as_u64)
            .ok_or(AuthError::StrictMismatch("ts"))?;
        if ts.abs_diff(now_ms) > MAX_AHEAD_MS {
            return Err(AuthError::StrictMismatch("ts"));
        }
        Ok(())
    }
}

/// Builds a token the way the SDKs do (for tests and the example client).
///
/// ```
/// use trading_model::auth::{sign, Token};
/// let t = sign(b"secret-123", r#"{"nonce":15922073240280000}"#);
/// let parsed = Token::parse(&t).unwrap();
/// assert!(parsed.verify(b"secret-123").is_ok());
/// assert_eq!(parsed.nonce().unwrap(), 15_922_073_240_280_000);
/// ```
pub fn sign(secret: &[u8], payload_json: &str) -> String {
    let h = B64.encode(br#"{"typ":"JWT","alg":"HS256"}"#);
    let p = B64.encode(payload_json.as_bytes());
    let signed = format!("{h}.{p}");
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(m) => m,
        // HMAC takes keys of any length; this arm is unreachable in practice.
        Err(_) => return signed,
    };
    mac.update(signed.as_bytes());
    let s = B64.encode(mac.finalize().into_bytes());
    format!("{signed}.{s}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Computed independently with Python's hmac/hashlib/base64 (json.dumps spacing).
    const VECTOR: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.eyJub25jZSI6IDE1OTIyMDczMjQwMjgwMDAwfQ.RvrpwNhlQOj7j-zZYcDAuXFTTTYLo-Y1vEI9o9LWPpY";

    #[test]
    fn fixed_vector_from_an_independent_implementation() {
        let t = Token::parse(VECTOR).unwrap();
        t.verify(b"secret-123").unwrap();
        assert_eq!(t.verify(b"secret-124"), Err(AuthError::BadSignature));
        assert_eq!(t.nonce().unwrap(), 15_922_073_240_280_000);
        // Our signer produces the same signature for the same bytes (PHP-style JSON).
        let ours = sign(b"secret-123", r#"{"nonce": 15922073240280000}"#);
        assert_eq!(ours, VECTOR);
    }

    #[test]
    fn tampering_is_detected() {
        let mut bad = VECTOR.to_owned();
        bad.replace_range(40..41, "A");
        let r = Token::parse(&bad).and_then(|t| t.verify(b"secret-123"));
        assert!(r.is_err());
        let (hp, _) = VECTOR.rsplit_once('.').unwrap();
        let other = sign(b"secret-123", r#"{"nonce":15922073240280001}"#);
        let spliced = format!("{hp}.{}", other.rsplit_once('.').unwrap().1);
        assert_eq!(
            Token::parse(&spliced).unwrap().verify(b"secret-123"),
            Err(AuthError::BadSignature)
        );
    }

    #[test]
    fn malformed_tokens() {
        for t in [
            "",
            "a.b",
            "a.b.c.d",
            "!!.x.y",
            "e30.e30.",
            "eyJhbGciOiJub25lIn0.e30.xx",
        ] {
            assert!(
                matches!(Token::parse(t), Err(AuthError::Malformed(_))),
                "{t}"
            );
        }
        // Padding is tolerated.
        let padded = sign(b"k", r#"{"nonce":"15922073240280000"}"#);
        assert!(Token::parse(&padded).unwrap().nonce().is_ok());
    }

    #[test]
    fn nonce_shapes() {
        let tok = |p: &str| Token::parse(&sign(b"k", p)).unwrap();
        assert_eq!(tok("{}").nonce(), Err(AuthError::NonceMissing));
        assert_eq!(
            tok(r#"{"nonce":1234}"#).nonce(),
            Err(AuthError::NonceFormat)
        );
        assert_eq!(
            tok(r#"{"nonce":"1592207324028000x"}"#).nonce(),
            Err(AuthError::NonceFormat)
        );
        assert_eq!(tok(r#"{"nonce":1.5}"#).nonce(), Err(AuthError::NonceFormat));
        assert_eq!(tok(r#"{"nonce":[1]}"#).nonce(), Err(AuthError::NonceFormat));
        assert_eq!(
            tok(r#"{"nonce":"99999999999999999999"}"#).nonce(),
            Ok(99_999_999_999_999_999_999)
        );
        assert_eq!(
            tok(r#"{"nonce":"100000000000000000000"}"#).nonce(),
            Err(AuthError::NonceFormat)
        );
    }

    #[test]
    fn nonce_clock_scaling() {
        use crate::replay::{Memory, Nonce, judge};
        let now = 1_592_207_324_028u64;
        // PHP/Python/Node (17 digits), Go (18), nanoseconds (19), 20 digits; all "now".
        for n in [
            15_922_073_240_280_000u128,
            159_220_732_402_800_000,
            1_592_207_324_028_000_000,
            15_922_073_240_280_000_000,
        ] {
            let nonce = Nonce::new(n).unwrap();
            assert!(judge(&nonce, &Memory::default(), false, now).is_ok(), "{n}");
            assert!(
                judge(&nonce, &Memory::default(), false, now - 61_000).is_err(),
                "{n} ahead"
            );
        }
        assert_eq!(Nonce::new(1), Err(AuthError::NonceFormat));
    }

    #[test]
    fn strict_mode_claims() {
        let now = 1_592_207_324_028u64;
        let req = Signed {
            method: "POST",
            path: "exchange-api-keys/add",
            query: "a=1",
            body: b"label=x",
        };
        let payload = serde_json::json!({
            "nonce": 15_922_073_240_280_000u64, "m": "POST", "p": "exchange-api-keys/add",
            "q": sha256_hex(b"a=1"), "b": sha256_hex(b"label=x"), "ts": now,
        });
        let t = Token::parse(&sign(b"k", &payload.to_string())).unwrap();
        t.check_strict(&req, now).unwrap();
        assert_eq!(
            t.check_strict(
                &Signed {
                    body: b"label=y",
                    ..req
                },
                now
            ),
            Err(AuthError::StrictMismatch("b"))
        );
        assert_eq!(
            t.check_strict(
                &Signed {
                    query: "a=2",
                    ..req
                },
                now
            ),
            Err(AuthError::StrictMismatch("q"))
        );
        assert_eq!(
            t.check_strict(
                &Signed {
                    path: "exchange-api-keys/delete",
                    ..req
                },
                now
            ),
            Err(AuthError::StrictMismatch("p"))
        );
        assert_eq!(
            t.check_strict(
                &Signed {
                    method: "GET",
                    ..req
                },
                now
            ),
            Err(AuthError::StrictMismatch("m"))
        );
        assert_eq!(
            t.check_strict(&req, now + 60_001),
            Err(AuthError::StrictMismatch("ts"))
        );
        let legacy = Token::parse(VECTOR).unwrap();
        assert_eq!(
            legacy.check_strict(&req, now),
            Err(AuthError::StrictMismatch("m"))
        );
    }

    #[test]
    fn errors_map_to_documented_codes() {
        let pairs = [
            (AuthError::MissingKey, 2001, 401),
            (AuthError::InvalidKey, 2000, 401),
            (AuthError::BadSignature, 2000, 401),
            (AuthError::MissingAuthorization, 2100, 401),
            (AuthError::Malformed("x"), 1820, 422),
            (AuthError::NonceMissing, 2010, 401),
            (AuthError::NonceTooSmall, 2011, 401),
            (AuthError::NonceFormat, 2012, 401),
            (AuthError::NonceTooBig(5), 2014, 401),
            (AuthError::StrictMismatch("b"), 1820, 401),
        ];
        for (e, code, status) in pairs {
            let api = e.to_api_error();
            assert_eq!((api.code.code(), api.status), (code, status), "{e:?}");
        }
        assert_eq!(
            AuthError::NonceTooBig(7).to_api_error().message,
            "Nonce too big at 7"
        );
    }
}
