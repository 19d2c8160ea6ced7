//! Paper trading over real sockets with an injected clock that the tests move: orders fill,
//! rest, expire, repeat and wait for their send time; strategies produce transactions as
//! the clock moves; the state machine's refusals; exports.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use serde_json::Value;
use trading_server::Settings;
use trading_server::store::Store;

struct World {
    _server: Server,
    clock: Arc<AtomicU64>,
    alice: Signer,
}

async fn world(tag: &str) -> World {
    let dir = temp_dir(tag);
    let store = Store::open(&dir).unwrap();
    let k = store.create_key("alice", "Unlimited", false, NOW).unwrap();
    drop(store);
    let clock = Arc::new(AtomicU64::new(NOW));
    let c = clock.clone();
    let server = start(Settings {
        data_dir: Some(dir),
        clock: Arc::new(move || c.load(Ordering::SeqCst)),
        seed: 7,
        ..fixed_clock()
    })
    .await;
    let alice = Signer {
        addr: server.addr,
        key: k.key,
        secret: k.secret,
        step: 0.into(),
    };
    World {
        _server: server,
        clock,
        alice,
    }
}

impl World {
    fn advance(&self, ms: u64) {
        self.clock.fetch_add(ms, Ordering::SeqCst);
    }
    /// POST when the catalogue allows it, else GET with the parameters in the query.
    async fn send(&self, path: &str, body: &str) -> Reply {
        let ep = trading_model::Catalogue::builtin().get(path).unwrap();
        if ep.documents(trading_model::Method::Post) {
            self.alice.post(path, body).await
        } else if body.is_empty() {
            self.alice.get(path).await
        } else {
            self.alice.get(&format!("{path}?{body}")).await
        }
    }
    async fn ok(&self, path: &str, body: &str) -> Value {
        let r = self.send(path, body).await;
        assert_eq!(
            r.status,
            200,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        envelope(&r, path)["data"].clone()
    }
    async fn refused(&self, path: &str, body: &str) -> Value {
        let r = self.send(path, body).await;
        assert_eq!(
            r.status,
            422,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        let v = envelope(&r, path);
        assert_eq!(v["data"]["code"], 1440, "{v}");
        v["missing_information"][0].clone()
    }
    async fn key(&self, exchange: &str, extra: &str) -> i64 {
        let v = self
            .ok(
                "exchange-api-keys/add",
                &format!("exchange={exchange}&label=main&token=tok12345&secret=sec12345{extra}"),
            )
            .await;
        v["id"].as_i64().unwrap()
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or(f64::NAN)
}

#[tokio::test]
async fn orders_fill_rest_expire_repeat_and_wait_on_the_clock() {
    let w = world("orders").await;
    let key = w.key("binance", "").await;

    // A market buy walks the book at once.
    let v = w
        .ok(
            "exchange-query/order-create",
            &format!("apikey={key}&ordertype=market&code=binance-btcusdt&side=buy&quantity=0.002"),
        )
        .await;
    let o = &v["orders"][0];
    assert_eq!(o["status"], "closed", "{o}");
    assert_eq!(o["symbol"], "BTC/USDT");
    assert!((f(&o["filled"]) - 0.002).abs() < 1e-12);
    assert_eq!(f(&o["remaining"]), 0.0);
    let trades_cost: f64 = o["trades"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| f(&t["cost"]))
        .sum();
    assert!((f(&o["cost"]) - trades_cost).abs() < 1e-6);
    assert!((f(&o["fee"]["cost"]) - f(&o["cost"]) * 0.001).abs() < 1e-6);
    assert_eq!(o["fee"]["currency"], "USDT");

    // A limit buy far below the market rests, then expires on the clock.
    let v = w
        .ok(
            "exchange-query/order-create",
            &format!("apikey={key}&ordertype=limit&code=binance-btcusdt&side=buy&quantity=0.001&price=100&expire_after=5000"),
        )
        .await;
    let resting = v["orders"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(v["orders"][0]["status"], "open");
    let open = w.ok("exchange-query/list-open-orders", "").await;
    assert_eq!(open[0]["id"], resting.as_str());
    w.advance(6_000);
    let v = w
        .ok("exchange-query/order-check", &format!("id={resting}"))
        .await;
    assert_eq!(v["status"], "expired");
    assert_eq!(f(&v["filled"]), 0.0);

    // A delayed order waits for its send time; repeats follow at their interval.
    let send = NOW + 6_000 + 10_000;
    let v = w
        .ok(
            "exchange-query/order-create",
            &format!("apikey={key}&ordertype=market&code=binance-btcusdt&side=sell&quantity=0.001&order_send_time={send}&repeat_times=3&repeat_interval=2000"),
        )
        .await;
    assert_eq!(v["count"], 3);
    assert!(
        v["orders"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["status"] == "pending")
    );
    assert_eq!(v["orders"][2]["timestamp"], send + 4_000);
    w.advance(12_000);
    let closed = w.ok("exchange-query/list-closed-orders", "").await;
    let sent: Vec<&Value> = closed
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["side"] == "sell")
        .collect();
    assert_eq!(sent.len(), 2, "two of three sent after 12 s: {closed}");
    w.advance(2_000);
    let closed = w.ok("exchange-query/list-closed-orders", "").await;
    assert_eq!(
        closed
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["side"] == "sell")
            .count(),
        3
    );

    // Cancel a resting order; a second cancel is refused.
    let v = w
        .ok(
            "exchange-query/order-create",
            &format!("apikey={key}&ordertype=limit&code=binance-btcusdt&side=buy&quantity=0.001&price=100"),
        )
        .await;
    let id = v["orders"][0]["id"].as_str().unwrap().to_owned();
    let v = w
        .ok("exchange-query/order-cancel", &format!("id={id}"))
        .await;
    assert_eq!(v["status"], "canceled");
    let m = w
        .refused("exchange-query/order-cancel", &format!("id={id}"))
        .await;
    assert_eq!(m["parameter"], "id");

    // Refusals: wrong exchange for the key, below the symbol minimum, limit without price.
    let m = w
        .refused(
            "exchange-query/order-create",
            &format!("apikey={key}&ordertype=market&code=kraken-btcusd&side=buy&quantity=0.01"),
        )
        .await;
    assert_eq!(m["parameter"], "apikey");
    let m = w
        .refused(
            "exchange-query/order-create",
            &format!(
                "apikey={key}&ordertype=market&code=binance-btcusdt&side=buy&quantity=0.00000001"
            ),
        )
        .await;
    assert_eq!(m["parameter"], "quantity");
    let m = w
        .refused(
            "exchange-query/order-create",
            &format!("apikey={key}&ordertype=limit&code=binance-btcusdt&side=buy&quantity=0.001"),
        )
        .await;
    assert_eq!(m["parameter"], "price");

    // Balances moved: bought 0.002, sold 0.003, from the seeded start.
    let b = w.ok("exchange-query/list-balances", "").await;
    let btc = &b[0]["balances"]["BTC"];
    assert!(f(&btc["total"]) > 0.0, "{b}");
    let req = w.ok("exchange-query/list-exchange-requests", "").await;
    assert!(
        req.as_array()
            .unwrap()
            .iter()
            .any(|r| r["request"] == "cancelOrder")
    );
    let pnl = w.ok("statistics/account-pnl", "").await;
    assert_eq!(pnl["symbols"][0]["code"], "binance-btcusdt");
    assert!((f(&pnl["symbols"][0]["sold"]) - 0.003).abs() < 1e-12);
}

fn profile_body(id: i64, key: i64, extra: &str) -> String {
    format!(
        "id={id}&algorithm_id=3&name=Capture&slice_delay=2&executable_codes[]=binance-btcusdt\
         &executable_apikeys[]={key}&executable_values[]=0.001&executable_priceoffset[]=5\
         &condition_codes[]=binance-btcusdt&condition_values[]=%3E0{extra}"
    )
}

#[tokio::test]
async fn strategy_state_machine_and_worker() {
    let w = world("strategy").await;
    let key = w.key("binance", "").await;
    let p = w.ok("strategy/create-profile", "name=Capture").await["id"]
        .as_i64()
        .unwrap();
    let m = w
        .refused(
            "strategy/edit-profile",
            &profile_body(p, key, "").replace("algorithm_id=3", "algorithm_id=99"),
        )
        .await;
    assert_eq!(m["parameter"], "algorithm_id");
    let v = w
        .ok("strategy/edit-profile", &profile_body(p, key, ""))
        .await;
    assert_eq!(v["executable_codes"][0], "binance-btcusdt");
    assert_eq!(v["condition_values"][0], ">0");

    let v = w.ok("strategy/start", &format!("id={p}")).await;
    assert_eq!(v["state"], "running");
    let v = w.ok("strategy/start", &format!("id={p}")).await;
    assert_eq!(v["changed"], false, "start on running does nothing");
    // The first slice runs at once, then one every 2 s: 6 slices by +10 s, 2 orders each.
    w.advance(10_000);
    let v = w
        .ok(
            "strategy/list-strategy-transactions",
            &format!("main_id={p}&limit=100"),
        )
        .await;
    assert_eq!(v["total"], 12, "{v}");
    let t = &v["transactions"][0];
    for k in [
        "id",
        "c_payload",
        "c_conditions",
        "c_order_status",
        "c_time_journey",
        "c_max_time",
        "custom_id",
    ] {
        assert!(t[k].is_string(), "{k} in {t}");
    }
    assert_eq!(
        t.as_object().unwrap().len(),
        40,
        "every field of the spec's record"
    );
    assert!(t.as_object().unwrap().values().all(Value::is_string));
    assert_eq!(t["c_conditions"], "[\"binance-btcusdt\"]");
    let payload: Value = serde_json::from_str(t["c_payload"].as_str().unwrap()).unwrap();
    assert_eq!(payload["status"], "open", "5 % away the limit orders rest");

    // Refusals while running.
    let m = w
        .refused("exchange-api-keys/delete", &format!("id={key}"))
        .await;
    assert_eq!(m["strategies"][0], p);
    w.refused("strategy/hard-reset", &format!("id={p}")).await;
    w.refused("strategy/delete-profile", &format!("id={p}"))
        .await;
    w.refused("strategy/edit-profile", &profile_body(p, key, ""))
        .await;
    let running = w.ok("strategy/list-strategies", "").await;
    assert_eq!(running[0]["id"], p);

    // Force stop leaves the orders open and flagged; a later start re-checks them.
    let v = w.ok("strategy/stop", &format!("id={p}&force=true")).await;
    assert_eq!(v["orders_left_open"], 12);
    let dbg = w.ok("strategy/data/debug", "").await;
    assert_eq!(dbg[0]["flagged_orders"].as_array().unwrap().len(), 12);
    w.advance(5_000);
    let v = w
        .ok(
            "strategy/list-strategy-transactions",
            &format!("main_id={p}&limit=100"),
        )
        .await;
    assert_eq!(v["total"], 12, "no transactions while stopped");
    let v = w.ok("strategy/start", &format!("id={p}")).await;
    assert_eq!(v["rechecked_orders"].as_array().unwrap().len(), 12);
    w.advance(2_000);
    let v = w.ok("strategy/stop", &format!("id={p}")).await;
    assert!(v["orders_cancelled"].as_u64().unwrap() >= 12);
    let open = w.ok("exchange-query/list-open-orders", "").await;
    assert_eq!(open, serde_json::json!([]), "a stop without force cancels");
    let ov = w.ok("strategy/high-level-overview", "").await;
    assert_eq!(
        (ov["active"].as_u64(), ov["total"].as_u64()),
        (Some(0), Some(1))
    );

    // Hard reset empties the transactions; the profile stays.
    let v = w.ok("strategy/hard-reset", &format!("id={p}")).await;
    assert!(v["transactions_deleted"].as_u64().unwrap() > 12);
    let v = w
        .ok(
            "strategy/list-strategy-transactions",
            &format!("main_id={p}"),
        )
        .await;
    assert_eq!(v["total"], 0);

    // Plan limits refuse a start.
    let v = w
        .ok(
            "strategy/edit-profile",
            &profile_body(p, key, "").replace("slice_delay=2", "slice_delay=1"),
        )
        .await;
    assert_eq!(v["slice_delay"], "1");
    let m = w.refused("strategy/start", &format!("id={p}")).await;
    assert_eq!(m["parameter"], "slice_delay");
    w.ok(
        "strategy/edit-profile",
        &profile_body(p, key, "").replace("values[]=0.001", "values[]=5"),
    )
    .await;
    let m = w.refused("strategy/start", &format!("id={p}")).await;
    assert_eq!(m["parameter"], "executable_values");

    // Two executables of spread capture: 4 orders every 2 s, above 1 order per second.
    let two = format!(
        "id={p}&algorithm_id=3&name=Capture&slice_delay=2\
         &executable_codes[]=binance-btcusdt&executable_codes[]=binance-ethusdt\
         &executable_apikeys[]={key}&executable_apikeys[]={key}\
         &executable_values[]=0.001&executable_values[]=0.01\
         &executable_priceoffset[]=5&executable_priceoffset[]=5"
    );
    w.ok("strategy/edit-profile", &two).await;
    let m = w.refused("strategy/start", &format!("id={p}")).await;
    assert_eq!(m["parameter"], "slice_delay");
    assert!(
        m["error"].as_str().unwrap().contains("orders per second"),
        "{m}"
    );

    // Delete the profile: its strategy goes; the key can go now.
    let v = w.ok("strategy/delete-profile", &format!("id={p}")).await;
    assert_eq!(v["deleted"], true);
    w.refused("strategy/start", &format!("id={p}")).await;
    w.ok("exchange-api-keys/delete", &format!("id={key}")).await;
}

#[tokio::test]
async fn a_key_the_exchange_rejects_is_disabled_and_refused() {
    let w = world("keytest").await;
    // OKEx needs a passphrase; this key has none.
    let bad = w.key("okex", "").await;
    let good = w.key("okex", "&password=pass1").await;
    let v = w.ok("exchange-api-keys/test", &format!("id={good}")).await;
    assert_eq!(
        (v["valid"].as_bool(), v["status"].as_str()),
        (Some(true), Some("active"))
    );
    let v = w.ok("exchange-api-keys/test", &format!("id={bad}")).await;
    assert_eq!(
        (v["valid"].as_bool(), v["status"].as_str()),
        (Some(false), Some("disabled"))
    );
    let list = w.ok("exchange-api-keys/list", "").await;
    assert_eq!(list["records"][1]["status"], "disabled");
    let m = w
        .refused(
            "exchange-query/order-create",
            &format!("apikey={bad}&ordertype=market&code=okex-btcusdt&side=buy&quantity=0.001"),
        )
        .await;
    assert_eq!(m["parameter"], "apikey");
}

fn unbase64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let mut out = Vec::new();
    for chunk in s.as_bytes().chunks(4) {
        let n = chunk
            .iter()
            .take_while(|&&c| c != b'=')
            .fold((0u32, 0), |(acc, k), &c| {
                (acc | (u32::from(val(c)) << (18 - 6 * k)), k + 1)
            });
        for i in 0..(n.1 - 1) {
            out.push((n.0 >> (16 - 8 * i)) as u8);
        }
    }
    out
}

#[tokio::test]
async fn exports_become_ready_on_the_clock() {
    let w = world("export").await;
    let key = w.key("binance", "").await;
    let p = w.ok("strategy/create-profile", "name=Capture").await["id"]
        .as_i64()
        .unwrap();
    w.ok(
        "strategy/edit-profile",
        &profile_body(p, key, "&noconditions=true"),
    )
    .await;
    w.ok("strategy/start", &format!("id={p}")).await;
    w.advance(4_000);
    w.ok("strategy/stop", &format!("id={p}")).await;
    let v = w
        .ok(
            "export/request",
            "system=strategy_transactions&type=.csv&symbol=binance-btcusdt&limit=100",
        )
        .await;
    let id = v["id"].as_i64().unwrap();
    let v = w.ok("export/fetch", &format!("id={id}")).await;
    assert_eq!(v["status"], "preparing");
    w.advance(3_000);
    let v = w.ok("export/fetch", &format!("id={id}")).await;
    assert_eq!(v["encoding"], "base64");
    let text = String::from_utf8(unbase64(v["content"].as_str().unwrap())).unwrap();
    let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert!(lines[0].starts_with("id,time_created,last_updated,c_active"));
    let tx = w
        .ok(
            "strategy/list-strategy-transactions",
            &format!("main_id={p}&limit=100"),
        )
        .await;
    assert_eq!(lines.len() - 1, tx["total"].as_u64().unwrap() as usize);
    let v = w
        .ok(
            "export/request",
            "system=all_strategies&type=.xls&symbol=binance-btcusdt&limit=10",
        )
        .await;
    w.advance(3_000);
    let x = w.ok("export/fetch", &format!("id={}", v["id"])).await;
    let xml = String::from_utf8(unbase64(x["content"].as_str().unwrap())).unwrap();
    assert!(
        xml.contains("urn:schemas-microsoft-com:office:spreadsheet") && xml.contains("Capture")
    );
    let list = w.ok("export/list", "").await;
    assert_eq!(list["total"], 2);
    assert_eq!(list["records"][0]["status"], "ready");
    w.refused("export/fetch", "id=99999").await;
}
