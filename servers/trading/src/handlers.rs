//! Endpoint handlers: validated parameters in, `data` out. Only endpoints that need no
//! stored state are implemented so far.

use serde_json::{Value, json};
use trading_model::{ApiError, Catalogue, Endpoint, ErrorCode, Valid, Validator, endpoint_records};

/// Exchanges the sandbox accepts until exchange data is configurable: code and name.
pub(crate) const DEFAULT_EXCHANGES: [(&str, &str); 8] = [
    ("binance", "Binance"),
    ("bitfinex", "Bitfinex"),
    ("bitmax", "BitMax"),
    ("bitstamp", "Bitstamp"),
    ("coinbasepro", "Coinbase Pro"),
    ("huobipro", "Huobi Pro"),
    ("kraken", "Kraken"),
    ("okex", "OKEx"),
];

pub(crate) struct Env<'a> {
    pub cat: &'a Catalogue,
    pub now_ms: u64,
    pub exchanges: &'a [String],
}

pub(crate) fn call(ep: &Endpoint, valid: &Valid, env: &Env<'_>) -> Result<Value, ApiError> {
    let now = env.now_ms;
    Ok(match ep.path.as_str() {
        "system/timestamp" => json!({"seconds": now / 1000, "milliseconds": now}),
        "system/endpoints" | "system/ep" => endpoint_records(env.cat),
        "system/ping" => {
            let yours = valid.integer("milliseconds").unwrap_or(0);
            let ours = i64::try_from(now).unwrap_or(i64::MAX);
            json!({
                "our_server_ms": ours,
                "your_sent_ms": yours,
                "difference": ours.saturating_sub(yours),
                "equation": format!("{ours} - {yours}"),
                "note": "difference is the server clock minus the milliseconds you sent",
            })
        }
        "system/list-validation-functions" => json!(Validator::ORIGINAL_NAMES),
        "system/exchanges" => Value::Array(
            env.exchanges
                .iter()
                .map(|code| {
                    let name = DEFAULT_EXCHANGES
                        .iter()
                        .find(|(c, _)| c == code)
                        .map_or(code.as_str(), |(_, n)| n);
                    json!({"code": code, "name": name})
                })
                .collect(),
        ),
        "system/status" => json!([
            {"name": "api", "status": "running", "last_checked": now, "issues": "None"}
        ]),
        "user/close-account" => return Err(ApiError::new(ErrorCode::CloseAccountOnWebsite)),
        _ => {
            return Err(ApiError::new(ErrorCode::EmptyData)
                .with_status(501)
                .with_message(format!(
                    "{} is not implemented by this sandbox yet; its parameters were valid.",
                    ep.path
                )));
        }
    })
}
