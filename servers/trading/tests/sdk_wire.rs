//! The sandbox driven as bot developers drive the original: through clients that send
//! what the Node, Python, PHP and Go SDKs send (`sdk/mod.rs`), unchanged, against the
//! real `trading-api` binary.
//!
//! * every catalogue endpoint answers each SDK's calls, with no input (the SDKs send GET)
//!   and with its required parameters (they send POST with a form body), whichever
//!   method the original documents; with the domain configured with and without a
//!   trailing slash; all four SDKs on one key, their nonces interleaved;
//! * 8 callers on one key, 200 calls each, concurrently: a nonce is refused only when it
//!   was used before, and every replayed token is refused.

mod sdk;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use sdk::{Sdk, SdkClient, Sent};
use serde_json::Value;
use test_support::process::{Capture, Proc};
use trading_model::{Catalogue, Endpoint, Kind, Param, Validator};

/// The original's authentication error codes: none may answer an honest SDK call.
const AUTH_CODES: [i64; 8] = [2000, 2001, 2010, 2011, 2012, 2014, 2100, 1820];

struct Api {
    proc: Proc,
    addr: std::net::SocketAddr,
    dir: PathBuf,
    key: String,
    secret: String,
}

impl Api {
    /// The binary on a fresh data directory with one key on the Unlimited plan (these
    /// tests measure nonces, not request limits), and no per-address limit.
    fn start(tag: &str) -> Api {
        let bin = env!("CARGO_BIN_EXE_trading-api");
        let dir = std::env::temp_dir().join(format!("trading-sdk-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let out = Command::new(bin)
            .args(["create-key", "--data-dir"])
            .arg(&dir)
            .args(["--name", "bot", "--plan", "Unlimited"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let creds: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut cmd = Command::new(bin);
        cmd.args([
            "--listen",
            "127.0.0.1:0",
            "--ip-per-minute",
            "0",
            "--data-dir",
        ])
        .arg(&dir);
        let proc = Proc::spawn(cmd, Capture::Stderr);
        let addr = proc
            .find_line(Duration::from_secs(20), |line| {
                let rest = line.split("http://").nth(1)?;
                rest.split('/').next()?.parse().ok()
            })
            .expect("trading-api reports its address");
        Api {
            proc,
            addr,
            dir,
            key: creds["key"].as_str().unwrap().to_owned(),
            secret: creds["secret"].as_str().unwrap().to_owned(),
        }
    }

    fn client(&self, sdk: Sdk, trailing_slash: bool) -> SdkClient {
        let slash = if trailing_slash { "/" } else { "" };
        SdkClient {
            sdk,
            addr: self.addr,
            domain: format!("http://{}{slash}", self.addr),
            key: self.key.clone(),
            secret: self.secret.clone(),
        }
    }

    fn stop(mut self) {
        let status = self.proc.terminate(Duration::from_secs(10));
        assert!(
            status.is_some_and(|s| s.success()),
            "clean exit: {status:?}"
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A value that passes the catalogue's rules for `p` (what a careful bot would send).
fn sample(p: &Param) -> String {
    let min_len = p.min_length.unwrap_or(1).max(1);
    let mut text = "v".to_owned();
    while text.chars().count() < min_len {
        text.push('x');
    }
    match (p.kind, p.validator) {
        (Kind::Integer, _) => {
            let lo = p.min.unwrap_or(1).max(1);
            let wide = 10i64.pow(u32::try_from(min_len).unwrap() - 1);
            let v = lo.max(wide);
            p.max.map_or(v, |hi| v.min(hi)).to_string()
        }
        (Kind::Decimal, _) => "1.5".into(),
        (Kind::Boolean, _) => "true".into(),
        (Kind::Date, _) => "2020-07-07".into(),
        (Kind::Enum, _) => p.allowed.iter().find(|a| !a.is_empty()).unwrap().clone(),
        (_, Some(Validator::IsEmail)) => "someone@example.com".into(),
        (_, Some(Validator::IsValidSymbol)) => "binance-btcusdt".into(),
        (_, Some(Validator::IsValidSide)) => "buy".into(),
        (_, Some(Validator::IsValidPair)) => "btcusdt".into(),
        (_, Some(Validator::IsValidCombination)) => "binance-btcusdt+bitfinex-btcusd".into(),
        (_, Some(Validator::IsBaseQuote)) => "BTC/USDT".into(),
        (_, Some(Validator::IsHttpUrl)) => "https://example.com/a.png".into(),
        (_, Some(Validator::JsMillisecondUpdate)) => "1592207324028".into(),
        (_, Some(Validator::IsSupportedExchange)) => "binance".into(),
        _ => text,
    }
}

/// Every parameter the endpoint requires (documented or sandbox), with a valid value.
fn required_input(ep: &Endpoint) -> Vec<(String, String)> {
    ep.parameters
        .iter()
        .filter(|p| p.required && p.default.is_none())
        .map(|p| (p.name.clone(), sample(p)))
        .collect()
}

/// The answer came from the endpoint itself: routed, authenticated, and refused (if at
/// all) for the values sent, never for the method, the path or the token.
fn assert_reached(
    sdk: Sdk,
    ep: &Endpoint,
    sent: &Sent,
    input: &[(String, String)],
    r: &test_support::http::Response,
) {
    let what = format!("{sdk:?} {} {}", sent.method, sent.target);
    let v = r.json();
    assert_eq!(v["meta"]["status"], r.status, "{what}: {v}");
    assert_eq!(v["meta"]["endpoint"], ep.path.as_str(), "{what}: {v}");
    assert!(
        r.status != 404 && r.status != 405 && r.status < 500,
        "{what}: {} {v}",
        r.status
    );
    let code = v["data"]["code"].as_i64();
    assert!(
        !code.is_some_and(|c| AUTH_CODES.contains(&c)),
        "{what}: authentication failed: {v}"
    );
    assert_eq!(v["meta"]["auth_success"], true, "{what}: {v}");
    let missing: Vec<&str> = v["missing_parameters"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let required: Vec<&str> = ep
        .parameters
        .iter()
        .filter(|p| p.required && p.default.is_none())
        .map(|p| p.name.as_str())
        .collect();
    if input.is_empty() {
        assert!(missing.iter().all(|m| required.contains(m)), "{what}: {v}");
    } else {
        assert!(
            missing.is_empty(),
            "{what}: the sent parameters were not read: {v}"
        );
    }
}

#[test]
fn every_endpoint_answers_each_sdk_as_it_sends() {
    let api = Api::start("endpoints");
    let mut statuses: HashMap<(Sdk, &'static str, u16), usize> = HashMap::new();
    let mut last_node_nonce = String::new();
    for (i, ep) in Catalogue::builtin().endpoints().iter().enumerate() {
        let input = required_input(ep);
        let pairs: Vec<(&str, &str)> = input
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        for sdk in Sdk::ALL {
            let client = api.client(sdk, i % 2 == 1);
            for with_input in [false, true] {
                if with_input && pairs.is_empty() {
                    continue;
                }
                let given = if with_input { &pairs[..] } else { &[] };
                let mut sent = client.request(&ep.path, given);
                // The Node SDK's nonce is the millisecond: two calls in one millisecond
                // carry the same token, and the second is a replay by design. A bot
                // calling in a loop waits for the next millisecond; so does this one.
                while sdk == Sdk::Node && sent.nonce == last_node_nonce {
                    std::thread::sleep(Duration::from_micros(200));
                    sent = client.request(&ep.path, given);
                }
                if sdk == Sdk::Node {
                    last_node_nonce = sent.nonce.clone();
                }
                let r = client.send(&sent);
                let owned: Vec<(String, String)> = if with_input {
                    input.clone()
                } else {
                    Vec::new()
                };
                assert_reached(sdk, ep, &sent, &owned, &r);
                *statuses.entry((sdk, sent.method, r.status)).or_default() += 1;
            }
        }
    }
    let mut summary: Vec<_> = statuses.into_iter().collect();
    summary.sort_by_key(|((sdk, m, s), _)| (format!("{sdk:?}"), *m, *s));
    eprintln!("answers by SDK, method and status: {summary:?}");
    api.stop();
}

/// One call's outcome in the concurrency test.
struct Outcome {
    nonce: String,
    status: u16,
    code: Option<i64>,
}

#[test]
fn eight_callers_share_a_key_without_false_nonce_failures() {
    const CALLERS: usize = 8;
    const CALLS: usize = 200;
    let api = Api::start("concurrent");
    let barrier = Arc::new(Barrier::new(CALLERS));
    // Tokens already sent, for the callers' deliberate replays.
    let sent_tokens: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let mut workers = Vec::new();
    for caller in 0..CALLERS {
        // Two of each SDK; half with a trailing slash in the domain.
        let client = api.client(Sdk::ALL[caller % 4], caller >= 4);
        let (barrier, sent_tokens) = (barrier.clone(), sent_tokens.clone());
        workers.push(std::thread::spawn(move || {
            let mut honest = Vec::new();
            let mut replays = Vec::new();
            barrier.wait();
            for call in 0..CALLS {
                let ms = (1_592_207_324_000 + call).to_string();
                let sent = if call % 2 == 0 {
                    client.request("subscriptions/details", &[])
                } else {
                    client.request("system/ping", &[("milliseconds", &ms)])
                };
                let r = client.send(&sent);
                let v = r.json();
                honest.push(Outcome {
                    nonce: sent.nonce.clone(),
                    status: r.status,
                    code: v["data"]["code"].as_i64(),
                });
                let replay = {
                    let mut tokens = sent_tokens.lock().unwrap();
                    tokens.push((sent.nonce.clone(), sent.token.clone()));
                    // Every tenth call, replay a token someone (maybe this caller) used.
                    (call % 10 == 9)
                        .then(|| tokens[(call * 7 + caller * 13) % tokens.len()].clone())
                };
                if let Some((nonce, token)) = replay {
                    let again = client.request_with("user/account-details", &[], nonce, token);
                    let r = client.send(&again);
                    replays.push((r.status, r.json()["data"]["code"].as_i64()));
                }
            }
            (honest, replays)
        }));
    }
    let mut by_nonce: HashMap<String, Vec<(u16, Option<i64>)>> = HashMap::new();
    let mut replays = Vec::new();
    for w in workers {
        let (honest, r) = w.join().unwrap();
        for o in honest {
            by_nonce
                .entry(o.nonce)
                .or_default()
                .push((o.status, o.code));
        }
        replays.extend(r);
    }
    let calls: usize = by_nonce.values().map(Vec::len).sum();
    assert_eq!(calls, CALLERS * CALLS);
    let mut shared = 0;
    for (nonce, outcomes) in &by_nonce {
        // Exactly one call per nonce succeeds; the others carried a used token.
        let ok = outcomes.iter().filter(|o| o.0 == 200).count();
        assert_eq!(ok, 1, "nonce {nonce}: {outcomes:?}");
        for o in outcomes.iter().filter(|o| o.0 != 200) {
            assert_eq!(*o, (401, Some(2011)), "nonce {nonce}: {outcomes:?}");
        }
        shared += outcomes.len() - 1;
    }
    assert!(!replays.is_empty());
    for r in &replays {
        assert_eq!(*r, (401, Some(2011)), "a replayed token must fail");
    }
    eprintln!(
        "{calls} calls, {} distinct nonces (all accepted once), {shared} calls that repeated \
         a nonce (Node: same millisecond) refused, {} deliberate replays refused",
        by_nonce.len(),
        replays.len()
    );
    api.stop();
}
