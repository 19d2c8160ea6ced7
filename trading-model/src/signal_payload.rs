//! The `payload` of `marketplace/signals-add`: base64 (standard or URL-safe alphabet,
//! padding optional) of a JSON object describing the signal.
//!
//! The original calls the payload "encrypted" without saying how. The sandbox only encodes
//! it: there is no key exchange to reproduce, and a developer can build a payload with any
//! base64 tool. This module checks the shape only; whether `code` is listed on the market
//! is the server's business (it owns the market).
//!
//! ```
//! use base64::Engine;
//! let json = r#"{"name":"Momentum BTC","code":"binance-btcusdt","side":"both","description":"Buys strength, sells weakness."}"#;
//! let payload = base64::engine::general_purpose::STANDARD.encode(json);
//! let p = trading_model::signal_payload::parse(&payload).unwrap();
//! assert_eq!(p.code, "binance-btcusdt");
//! ```

use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::Value;

/// Largest payload accepted, in characters (a signal description, not a file).
pub const MAX_PAYLOAD: usize = 16_384;

/// The custom fields a signal carries (also editable through `signals-edit`).
pub const CUSTOM_FIELDS: [&str; 4] = ["custom_1", "custom_2", "custom_3", "custom_4"];

/// A decoded signal description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalPayload {
    /// Display name, 3 to 64 characters.
    pub name: String,
    /// Trading code the signal trades (`binance-btcusdt`), lower-cased.
    pub code: String,
    /// Sides the signal may open: `buy`, `sell` or `both` (the default).
    pub side: String,
    /// Free text, at most 2000 characters (empty when absent).
    pub description: String,
    /// `custom_1` .. `custom_4`, empty when absent; at most 256 characters each.
    pub custom: [String; 4],
}

const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
const STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);

fn text(obj: &serde_json::Map<String, Value>, name: &str, max: usize) -> Result<String, String> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) if s.chars().count() <= max => Ok(s.trim().to_owned()),
        Some(Value::String(_)) => Err(format!(
            "payload field {name} is longer than {max} characters."
        )),
        Some(_) => Err(format!("payload field {name} must be a string.")),
    }
}

fn is_code(code: &str) -> bool {
    let Some((ex, pair)) = code.split_once('-') else {
        return false;
    };
    !ex.is_empty()
        && ex.bytes().all(|b| b.is_ascii_alphanumeric())
        && pair
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && pair
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && code.len() <= 64
}

/// Decodes and checks a payload; the error says what is wrong, for a `missing_information`
/// entry.
pub fn parse(payload: &str) -> Result<SignalPayload, String> {
    let trimmed = payload.trim();
    if trimmed.len() > MAX_PAYLOAD {
        return Err(format!("payload is longer than {MAX_PAYLOAD} characters."));
    }
    let bytes = STANDARD
        .decode(trimmed)
        .or_else(|_| URL_SAFE.decode(trimmed))
        .map_err(|_| "payload is not base64.".to_owned())?;
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|_| "payload does not decode to JSON.".to_owned())?;
    let Value::Object(obj) = value else {
        return Err("payload must decode to a JSON object.".to_owned());
    };
    let name = text(&obj, "name", 64)?;
    if name.chars().count() < 3 {
        return Err("payload field name needs at least 3 characters.".to_owned());
    }
    let code = text(&obj, "code", 64)?.to_ascii_lowercase();
    if !is_code(&code) {
        return Err(
            "payload field code must be a trading code such as binance-btcusdt.".to_owned(),
        );
    }
    let side = match text(&obj, "side", 8)?.to_ascii_lowercase().as_str() {
        "" | "both" => "both",
        "buy" => "buy",
        "sell" => "sell",
        _ => return Err("payload field side must be buy, sell or both.".to_owned()),
    }
    .to_owned();
    let description = text(&obj, "description", 2000)?;
    let mut custom: [String; 4] = Default::default();
    for (slot, name) in custom.iter_mut().zip(CUSTOM_FIELDS) {
        *slot = text(&obj, name, 256)?;
    }
    Ok(SignalPayload {
        name,
        code,
        side,
        description,
        custom,
    })
}

/// Shared by the `signal_payload` fuzz target and the test replaying its corpus: any bytes,
/// read as (lossy) UTF-8, must give an answer and never panic.
pub fn fuzz(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(p) = parse(&text) {
        assert!(p.name.chars().count() >= 3);
        assert!(is_code(&p.code));
        assert!(["buy", "sell", "both"].contains(&p.side.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(json: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(json)
    }

    #[test]
    fn accepts_both_alphabets_with_or_without_padding() {
        let json = r#"{"name":"Mean reversion ETH ~~~ ???","code":"Kraken-ETHUSD","side":"SELL","custom_2":"x"}"#;
        let std = enc(json);
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
        assert_ne!(std.trim_end_matches('='), url, "the sample must use + or /");
        for p in [std.clone(), std.trim_end_matches('=').to_owned(), url] {
            let s = parse(&p).unwrap();
            assert_eq!(s.code, "kraken-ethusd");
            assert_eq!(s.side, "sell");
            assert_eq!(s.custom[1], "x");
            assert_eq!(s.custom[0], "");
        }
    }

    #[test]
    fn says_what_is_wrong() {
        assert_eq!(parse("%%%").unwrap_err(), "payload is not base64.");
        assert_eq!(
            parse(&enc("not json")).unwrap_err(),
            "payload does not decode to JSON."
        );
        assert!(parse(&enc("[1]")).unwrap_err().contains("object"));
        assert!(
            parse(&enc(r#"{"name":"ab","code":"binance-btcusdt"}"#))
                .unwrap_err()
                .contains("name")
        );
        assert!(
            parse(&enc(r#"{"name":"abc","code":"btcusdt"}"#))
                .unwrap_err()
                .contains("code")
        );
        assert!(
            parse(&enc(
                r#"{"name":"abc","code":"binance-btcusdt","side":"up"}"#
            ))
            .unwrap_err()
            .contains("side")
        );
        assert!(
            parse(&enc(
                r#"{"name":"abc","code":"binance-btcusdt","custom_1":3}"#
            ))
            .unwrap_err()
            .contains("custom_1")
        );
        let long = format!(
            r#"{{"name":"{}","code":"binance-btcusdt"}}"#,
            "n".repeat(65)
        );
        assert!(parse(&enc(&long)).unwrap_err().contains("longer"));
    }

    #[test]
    fn fuzz_corpus_replays() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/signal_payload");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let data = std::fs::read(entry.unwrap().path()).unwrap();
            fuzz(&data);
            n += 1;
        }
        assert!(n >= 5, "corpus too small: {n}");
        for junk in [
            &b""[..],
            b"====",
            b"\xff\xfe",
            b"e30",
            b"eyJuYW1lIjpudWxsfQ",
        ] {
            fuzz(junk);
        }
    }
}
