//! Loopback tests of the marketplace, competitions, algorithm creator, support and
//! calendar endpoints, with an injected clock that the tests move.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use serde_json::Value;
use trading_model::market::Market;
use trading_server::Settings;
use trading_server::store::Store;

const SEED: u64 = 7;
const CODE: &str = "binance-btcusdt";

struct World {
    clock: Arc<AtomicU64>,
    alice: Signer,
    bob: Signer,
    _server: Server,
    dir: std::path::PathBuf,
}

impl World {
    async fn new(tag: &str) -> World {
        let dir = temp_dir(tag);
        let store = Store::open(&dir).unwrap();
        let ka = store.create_key("alice", "Free", false, NOW).unwrap();
        let kb = store.create_key("bob", "Free", false, NOW).unwrap();
        drop(store);
        let clock = Arc::new(AtomicU64::new(NOW));
        let c = clock.clone();
        let server = start(Settings {
            clock: Arc::new(move || c.load(Ordering::SeqCst)),
            data_dir: Some(dir.clone()),
            seed: SEED,
            ..fixed_clock()
        })
        .await;
        let signer = |k: trading_server::store::NewKey| Signer {
            addr: server.addr,
            key: k.key,
            secret: k.secret,
            step: 0.into(),
        };
        World {
            clock,
            alice: signer(ka),
            bob: signer(kb),
            _server: server,
            dir,
        }
    }
    fn now(&self) -> u64 {
        self.clock.load(Ordering::SeqCst)
    }
    fn advance(&self, ms: u64) {
        self.clock.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ok(r: &Reply, endpoint: &str) -> Value {
    let v = envelope(r, endpoint);
    assert_eq!(r.status, 200, "{endpoint}: {v}");
    v["data"].clone()
}

fn refused(r: &Reply, endpoint: &str, param: &str) -> Value {
    let v = envelope(r, endpoint);
    assert_eq!(r.status, 422, "{endpoint}: {v}");
    assert_eq!(v["data"]["code"], 1440);
    assert_eq!(v["missing_information"][0]["parameter"], param, "{v}");
    v
}

fn payload(name: &str, code: &str, side: &str) -> String {
    let json = serde_json::json!({
        "name": name, "code": code, "side": side,
        "description": "Loopback test signal that opens and closes on command.",
    });
    base64url(json.to_string().as_bytes())
}

/// URL-safe base64 without padding: needs no escaping in a form body.
fn base64url(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ABC[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

/// A form body; the values used here need no escaping.
fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

async fn add_signal(who: &Signer, name: &str) -> i64 {
    let body = form(&[
        ("key", "dev-key"),
        ("payload", &payload(name, CODE, "both")),
    ]);
    let r = who.post("marketplace/signals-add", &body).await;
    ok(&r, "marketplace/signals-add")["id"].as_i64().unwrap()
}

async fn trigger(who: &Signer, id: i64, signal: &str, action: &str) -> Reply {
    who.get(&format!(
        "marketplace/signals-trigger?id={id}&signal={signal}&action={action}"
    ))
    .await
}

#[tokio::test]
async fn signal_feed_is_delayed_and_price_movement_follows_the_market() {
    let w = World::new("extras-signals").await;
    let market = Market::new(SEED);
    let id = add_signal(&w.alice, "Loopback momentum").await;

    // Undecodable payloads are refused with the payload named.
    let bad = form(&[("key", "dev-key"), ("payload", &"!".repeat(120))]);
    refused(
        &w.alice.post("marketplace/signals-add", &bad).await,
        "marketplace/signals-add",
        "payload",
    );

    let t0 = w.now();
    let it = ok(
        &trigger(&w.alice, id, "buy", "open").await,
        "marketplace/signals-trigger",
    );
    assert_eq!(it["open_price"].as_f64(), market.mid(CODE, t0));
    assert_eq!(it["number"], 1);
    let iteration = it["id"].as_i64().unwrap();
    // Opening twice, closing with the same side, and someone else's trigger are refused.
    refused(
        &trigger(&w.alice, id, "buy", "open").await,
        "marketplace/signals-trigger",
        "action",
    );
    refused(
        &trigger(&w.alice, id, "buy", "close").await,
        "marketplace/signals-trigger",
        "signal",
    );
    refused(
        &trigger(&w.bob, id, "sell", "close").await,
        "marketplace/signals-trigger",
        "id",
    );

    // Within the delay the feed shows the signal without the iteration.
    let body = form(&[("id", &id.to_string())]);
    let f = ok(
        &w.bob.post("marketplace/signals-feed", &body).await,
        "marketplace/signals-feed",
    );
    assert_eq!(f["delay_ms"], 60_000);
    assert_eq!(f["records"][0]["iteration_children"], serde_json::json!([]));
    let movement = form(&[
        ("id", &id.to_string()),
        ("iteration", &iteration.to_string()),
    ]);
    refused(
        &w.bob
            .post("marketplace/signals-iteration-price-movement", &movement)
            .await,
        "marketplace/signals-iteration-price-movement",
        "iteration",
    );

    w.advance(59_000);
    let f = ok(
        &w.bob.post("marketplace/signals-feed", &body).await,
        "marketplace/signals-feed",
    );
    assert_eq!(f["records"][0]["iteration_children_total"], 0);
    w.advance(1_000);
    let f = ok(
        &w.bob.post("marketplace/signals-feed", &body).await,
        "marketplace/signals-feed",
    );
    assert_eq!(f["records"][0]["iteration_children"][0]["id"], iteration);
    assert_eq!(f["records"][0]["iteration_children"][0]["status"], "open");

    // The owner's price movement runs to now and follows the market.
    w.advance(30_000);
    let now = w.now();
    let m = ok(
        &w.alice
            .post("marketplace/signals-iteration-price-movement", &movement)
            .await,
        "marketplace/signals-iteration-price-movement",
    );
    let open = market.mid(CODE, t0).unwrap();
    let last = market.mid(CODE, now).unwrap();
    assert_eq!(m["to_ms"], now);
    assert_eq!(m["last_price"].as_f64(), Some(last));
    let pct = m["change_pct"].as_f64().unwrap();
    assert!((pct - (last / open - 1.0) * 100.0).abs() < 1e-3, "{m}");
    assert_eq!(
        m["result_pct"], m["change_pct"],
        "a buy gains with the price"
    );
    let points = m["points"].as_array().unwrap();
    assert_eq!(points.first().unwrap()["time_ms"], t0);
    assert_eq!(points.last().unwrap()["time_ms"], now);
    // Others see it up to the delay.
    let m = ok(
        &w.bob
            .post("marketplace/signals-iteration-price-movement", &movement)
            .await,
        "marketplace/signals-iteration-price-movement",
    );
    assert_eq!(m["to_ms"], now - 60_000);
    assert_eq!(m["last_price"].as_f64(), market.mid(CODE, now - 60_000));

    // Closing records the market price; the feed shows the close a minute later.
    let closed = ok(
        &trigger(&w.alice, id, "sell", "close").await,
        "marketplace/signals-trigger",
    );
    assert_eq!(closed["close_price"].as_f64(), Some(last));
    let f = ok(
        &w.bob.post("marketplace/signals-feed", &body).await,
        "marketplace/signals-feed",
    );
    assert_eq!(f["records"][0]["iteration_children"][0]["status"], "open");
    w.advance(60_000);
    let f = ok(
        &w.bob.post("marketplace/signals-feed", &body).await,
        "marketplace/signals-feed",
    );
    let child = &f["records"][0]["iteration_children"][0];
    assert_eq!(child["status"], "closed");
    let expected = (last / open - 1.0) * 100.0;
    assert!((child["result_pct"].as_f64().unwrap() - expected).abs() < 1e-3);

    // Reset is the owner's: it destroys the iterations.
    refused(
        &w.bob
            .post("marketplace/signal-reset", &format!("id={id}"))
            .await,
        "marketplace/signal-reset",
        "id",
    );
    let r = ok(
        &w.alice
            .post("marketplace/signal-reset", &format!("id={id}"))
            .await,
        "marketplace/signal-reset",
    );
    assert_eq!(r["iterations_deleted"], 1);
    let f = ok(
        &w.bob.post("marketplace/signals-feed", &body).await,
        "marketplace/signals-feed",
    );
    assert_eq!(f["records"][0]["statistics"]["iterations"], 0);
}

#[tokio::test]
async fn reminders_and_competitions_follow_the_clock() {
    let w = World::new("extras-clock").await;
    let t0 = w.now();
    let hour = 3_600_000u64;
    let once = format!("calendar/add-reminder?time={}&text=rebalance", t0 + hour);
    let r = ok(&w.alice.get(&once).await, "calendar/add-reminder");
    assert_eq!(r["past"], false);
    assert_eq!(r["in_ms"], hour);
    let daily = format!(
        "calendar/add-reminder?time={}&text=daily%20review&repeat=daily",
        t0 + 2 * hour
    );
    ok(&w.alice.get(&daily).await, "calendar/add-reminder");
    refused(
        &w.alice
            .get(&format!("calendar/add-reminder?time={}&text=late", t0 - 1))
            .await,
        "calendar/add-reminder",
        "time",
    );

    w.advance(3 * hour);
    let s = ok(
        &w.alice.get("calendar/list-schedule").await,
        "calendar/list-schedule",
    );
    let s = s.as_array().unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0]["text"], "daily review");
    assert_eq!(s[0]["past"], false);
    assert_eq!(s[0]["next_ms"], t0 + 2 * hour + 24 * hour);
    assert_eq!(s[1]["text"], "rebalance");
    assert_eq!(s[1]["past"], true);
    let bob = ok(
        &w.bob.get("calendar/list-schedule").await,
        "calendar/list-schedule",
    );
    assert_eq!(bob, serde_json::json!([]));

    // Competitions: one week each, the last finished, the running one and two ahead.
    let list = ok(&w.alice.get("competitions/list").await, "competitions/list");
    let statuses: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["finished", "running", "upcoming", "upcoming"]);
    let running = &list[1];
    let now = w.now();
    assert!(running["starts_ms"].as_u64().unwrap() <= now);
    assert!(running["ends_ms"].as_u64().unwrap() > now);
    let cid = running["id"].as_i64().unwrap();
    let join = |c: i64| format!("competitions/join?id={c}");
    let j = ok(&w.alice.get(&join(cid)).await, "competitions/join");
    assert_eq!(j["enrolled"], true);
    refused(&w.alice.get(&join(cid)).await, "competitions/join", "id");
    refused(
        &w.alice.get(&join(cid - 1)).await,
        "competitions/join",
        "id",
    );
    refused(
        &w.bob.get(&format!("competitions/leave?id={cid}")).await,
        "competitions/leave",
        "id",
    );
    ok(&w.bob.get(&join(cid)).await, "competitions/join");

    // Alice's closed iteration puts her on top of the leaderboard.
    let id = add_signal(&w.alice, "Competition entry").await;
    let market = Market::new(SEED);
    // Pick a side that wins over the next minute, so the ranking is known.
    let (a, b) = (
        market.mid(CODE, w.now()).unwrap(),
        market.mid(CODE, w.now() + 60_000).unwrap(),
    );
    let (open, close) = if b >= a {
        ("buy", "sell")
    } else {
        ("sell", "buy")
    };
    ok(
        &trigger(&w.alice, id, open, "open").await,
        "marketplace/signals-trigger",
    );
    w.advance(60_000);
    ok(
        &trigger(&w.alice, id, close, "close").await,
        "marketplace/signals-trigger",
    );
    let list = ok(&w.bob.get("competitions/list").await, "competitions/list");
    let board = &list[1]["leaderboard"];
    assert_eq!(list[1]["participants"], 2);
    assert_eq!(board[0]["name"], "alice");
    assert_eq!(board[0]["iterations_closed"], 1);
    assert!(board[0]["return_pct"].as_f64().unwrap() >= 0.0);
    assert_eq!(board[1]["name"], "bob");

    // A week later that competition is over: leaving is refused, the results stay.
    w.advance(7 * 24 * hour);
    refused(
        &w.alice.get(&format!("competitions/leave?id={cid}")).await,
        "competitions/leave",
        "id",
    );
    let list = ok(&w.alice.get("competitions/list").await, "competitions/list");
    assert_eq!(list[0]["id"], cid);
    assert_eq!(list[0]["status"], "finished");
    assert_eq!(list[0]["enrolled"], true);
    assert_eq!(list[0]["leaderboard"][0]["name"], "alice");
}

#[tokio::test]
async fn algorithms_validate_before_they_publish() {
    let w = World::new("extras-algorithms").await;
    let a = ok(
        &w.alice
            .post(
                "algorithm-creator/algorithm-add",
                "name=Breakout&group_name=Trend&maximum_transactions_successful=5",
            )
            .await,
        "algorithm-creator/algorithm-add",
    );
    let id = a["id"].as_i64().unwrap();
    assert_eq!(a["published"], false);
    let v = ok(
        &w.alice
            .get(&format!("algorithm-creator/validate-algorithm?id={id}"))
            .await,
        "algorithm-creator/validate-algorithm",
    );
    assert_eq!(v["valid"], false);
    assert_eq!(v["problems"].as_array().unwrap().len(), 2);
    refused(
        &w.alice
            .get(&format!("algorithm-creator/publish-algorithm?id={id}"))
            .await,
        "algorithm-creator/publish-algorithm",
        "id",
    );
    refused(
        &w.alice
            .get(&format!(
                "algorithm-creator/condition-add?algorithm_id={id}&code={CODE}&operator=~&value=1"
            ))
            .await,
        "algorithm-creator/condition-add",
        "operator",
    );
    ok(
        &w.alice
            .get(&format!(
                "algorithm-creator/condition-add?algorithm_id={id}&code={CODE}&operator=crosses_above&value=10000"
            ))
            .await,
        "algorithm-creator/condition-add",
    );
    let x = ok(
        &w.alice
            .get(&format!(
                "algorithm-creator/execution-add?algorithm_id={id}&order_type=limit&side=buy&quantity=0.01&code=binance-nosuchcoin"
            ))
            .await,
        "algorithm-creator/execution-add",
    );
    let v = ok(
        &w.alice
            .get(&format!("algorithm-creator/validate-algorithm?id={id}"))
            .await,
        "algorithm-creator/validate-algorithm",
    );
    let text = v["problems"].to_string();
    assert!(
        text.contains("needs a price") && text.contains("not listed"),
        "{v}"
    );
    let xid = x["id"].as_i64().unwrap();
    ok(
        &w.alice
            .get(&format!(
                "algorithm-creator/execution-update?id={xid}&code={CODE}&price=9000"
            ))
            .await,
        "algorithm-creator/execution-update",
    );
    let v = ok(
        &w.alice
            .get(&format!("algorithm-creator/validate-algorithm?id={id}"))
            .await,
        "algorithm-creator/validate-algorithm",
    );
    assert_eq!(v["valid"], true, "{v}");
    let p = ok(
        &w.alice
            .get(&format!("algorithm-creator/publish-algorithm?id={id}"))
            .await,
        "algorithm-creator/publish-algorithm",
    );
    assert_eq!(p["published"], true);
    let st = ok(
        &w.alice
            .get(&format!("algorithm-creator/algorithm-statistics?id={id}"))
            .await,
        "algorithm-creator/algorithm-statistics",
    );
    assert_eq!(st["conditions"], 1);
    assert_eq!(st["executions"], 1);
    assert_eq!(st["maximum_transactions_successful"], 5);
    assert_eq!(st["time_published"], w.now() / 1000);
    // Bob cannot see or change Alice's algorithm.
    refused(
        &w.bob
            .get(&format!("algorithm-creator/algorithm-statistics?id={id}"))
            .await,
        "algorithm-creator/algorithm-statistics",
        "id",
    );
}
