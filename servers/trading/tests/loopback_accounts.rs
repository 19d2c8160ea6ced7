//! The real server on 127.0.0.1:0 over hand-written HTTP/1.1: what it keeps per account,
//! its rate limits and bans, and connections that outlive refused requests.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use trading_server::Settings;
use trading_server::store::Store;

#[tokio::test]
async fn account_resources_are_stored_per_account() {
    let dir = temp_dir("resources");
    let store = Store::open(&dir).unwrap();
    let ka = store.create_key("alice", "Free", false, NOW).unwrap();
    let kb = store.create_key("bob", "Free", false, NOW).unwrap();
    drop(store);
    let s = start(Settings {
        data_dir: Some(dir.clone()),
        ..fixed_clock()
    })
    .await;
    let alice = Signer {
        addr: s.addr,
        key: ka.key,
        secret: ka.secret,
        step: 0.into(),
    };
    let bob = Signer {
        addr: s.addr,
        key: kb.key,
        secret: kb.secret,
        step: 0.into(),
    };

    // Exchange credentials: validation, storage without secrets, plan maximum.
    let r = alice
        .post(
            "exchange-api-keys/add",
            "exchange=nowhere&label=main&token=tok12&secret=sec12",
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["missing_information"][0]["supported"][0],
        "binance"
    );
    let mut ids = Vec::new();
    for label in ["one", "two", "three"] {
        let r = alice
            .post(
                "exchange-api-keys/add",
                &format!("exchange=binance&label={label}&token=tok12&secret=sup3rsecret"),
            )
            .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let v = envelope(&r, "exchange-api-keys/add");
        assert_eq!(v["data"]["label"], label);
        assert_eq!(v["data"]["status"], "active");
        assert!(v["data"].get("secret").is_none() && v["data"].get("token").is_none());
        ids.push(v["data"]["id"].as_i64().unwrap());
    }
    let r = alice
        .post(
            "exchange-api-keys/add",
            "exchange=binance&label=four&token=tok12&secret=sup3rsecret",
        )
        .await;
    assert_eq!(r.status, 422, "maximum_stored is 3");
    let r = alice.post("exchange-api-keys/list", "limit=2").await;
    let v = envelope(&r, "exchange-api-keys/list");
    assert_eq!(v["data"]["total"], 3);
    assert_eq!(v["data"]["showing"], 2);
    assert_eq!(v["data"]["records"][0]["id"], ids[2], "newest first");
    assert!(!String::from_utf8_lossy(&r.body).contains("sup3rsecret"));
    let r = alice
        .post("exchange-api-keys/list", "limit=2&pagenumber=2")
        .await;
    assert_eq!(r.json()["data"]["records"][0]["id"], ids[0]);

    // Bob sees and touches none of it.
    let r = bob.post("exchange-api-keys/list", "").await;
    assert_eq!(r.json()["data"]["total"], 0);
    let r = bob
        .post("exchange-api-keys/delete", &format!("id={}", ids[0]))
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["missing_information"][0]["parameter"], "id");

    let r = alice
        .post(
            "exchange-api-keys/edit",
            &format!("id={}&label=renamed", ids[0]),
        )
        .await;
    assert_eq!(r.json()["data"]["label"], "renamed");
    let r = alice
        .post("exchange-api-keys/test", &format!("id={}", ids[0]))
        .await;
    assert_eq!(r.json()["data"]["status"], "active");
    let r = alice
        .post("exchange-api-keys/delete", &format!("id={}", ids[1]))
        .await;
    assert_eq!(r.json()["data"]["deleted"], true);
    let r = alice
        .post("exchange-api-keys/delete", &format!("id={}", ids[1]))
        .await;
    assert_eq!(r.status, 422, "already deleted");

    // Watchlist (unpaged GET list) and exchange queries that must name a stored key.
    let r = alice
        .post("strategy/add-watchlist-item", "code=binance-btcusdt")
        .await;
    let item = r.json()["data"]["id"].as_i64().unwrap();
    let r = alice.get("strategy/list-watchlist").await;
    assert_eq!(r.json()["data"][0]["code"], "binance-btcusdt");
    let r = alice
        .post(
            "exchange-query/create-query",
            "apikey=99999&exchange_query=balance",
        )
        .await;
    assert_eq!(r.status, 422);
    let r = alice
        .post(
            "exchange-query/create-query",
            &format!("apikey={}&exchange_query=balance", ids[0]),
        )
        .await;
    assert_eq!(r.status, 200);
    let r = alice
        .post("strategy/delete-watchlist-item", &format!("id={item}"))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        alice.get("strategy/list-watchlist").await.json()["data"],
        serde_json::json!([])
    );

    // Sub-accounts: unique usernames, password never shown, active not editable here.
    let sub = "name=Carol&email=carol@example.com&username=carol1&password=longenough1&active=1&allow_api_key_usage=0";
    let r = alice.post("subaccounts/subaccount-create", sub).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let sid = r.json()["data"]["id"].as_i64().unwrap();
    assert!(!String::from_utf8_lossy(&r.body).contains("longenough1"));
    assert_eq!(
        alice
            .post("subaccounts/subaccount-create", sub)
            .await
            .status,
        422
    );
    let r = alice
        .post(
            "subaccounts/subaccount-edit",
            &format!("id={sid}&email=c2@example.com&name=Carol2&active=0&allow_api_key_usage=1"),
        )
        .await;
    let v = r.json();
    assert_eq!(v["data"]["email"], "c2@example.com");
    assert_eq!(
        v["data"]["active"], true,
        "active cannot be changed by subaccount-edit"
    );
    assert_eq!(v["data"]["allow_api_key_usage"], true);

    // Templates copy a profile; a blank label falls back to the profile's name.
    let r = alice
        .post("strategy/save-template", "copy_strategy_id=5")
        .await;
    assert_eq!(r.status, 422);
    let r = alice.post("strategy/create-profile", "name=Momentum").await;
    let profile = r.json()["data"]["id"].as_i64().unwrap();
    let r = alice
        .post(
            "strategy/save-template",
            &format!("copy_strategy_id={profile}&label="),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["data"]["label"], "Momentum");
    let r = alice.get("strategy/list-templates").await;
    assert_eq!(r.json()["data"][0]["copy_strategy_id"], profile.to_string());

    // Access history: every authenticated call, newest first.
    let r = alice.post("user/access-history", "limit=2").await;
    let v = envelope(&r, "user/access-history");
    assert_eq!(v["data"]["records"][0]["endpoint"], "user/access-history");
    assert_eq!(v["data"]["records"][0]["address"], "127.0.0.1");
    assert!(v["data"]["total"].as_u64().unwrap() > 10);
    let r = bob.post("user/access-history", "").await;
    assert_eq!(r.json()["data"]["total"], 3, "bob's own calls only");
    let r = alice.get("user/account-details").await;
    assert_eq!(r.json()["data"]["name"], "alice");
    assert_eq!(r.json()["data"]["subscription"]["name"], "Free");

    // Everything survives a restart.
    s.stop.unwrap().send(()).unwrap();
    s.done.await.unwrap().unwrap();
    let s2 = start(Settings {
        data_dir: Some(dir.clone()),
        ..fixed_clock()
    })
    .await;
    let alice = Signer {
        addr: s2.addr,
        step: 100.into(),
        ..alice
    };
    let r = alice.post("exchange-api-keys/list", "").await;
    assert_eq!(r.json()["data"]["total"], 2);
    let r = alice.get("subaccounts/subaccount-list").await;
    assert_eq!(r.json()["data"][0]["username"], "carol1");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn limits_answer_429_then_a_growing_418() {
    let clock = Arc::new(std::sync::atomic::AtomicU64::new(NOW));
    let c = clock.clone();
    let dir = temp_dir("limits");
    let k = Store::open(&dir)
        .unwrap()
        .create_key("dora", "Free", false, NOW)
        .unwrap();
    let s = start(Settings {
        clock: Arc::new(move || c.load(std::sync::atomic::Ordering::SeqCst)),
        ip_per_minute: 3,
        data_dir: Some(dir.clone()),
        ..Settings::default()
    })
    .await;
    let anon = || call(s.addr, "GET", "/api/v2/system/timestamp", &[], b"");
    for i in 0..3 {
        let r = anon().await;
        assert_eq!(r.status, 200, "request {i}");
        assert_eq!(r.header("ratelimit-policy"), Some("\"minute\";q=3;w=60"));
    }
    let r = anon().await;
    assert_eq!(r.status, 429);
    let v = envelope(&r, "system/timestamp");
    assert_eq!(v["data"]["code"], 1508);
    let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait));
    assert!(r.header("ratelimit").unwrap().contains("r=0"));
    // Keyless calls to key-only endpoints count for the address too.
    let r = call(s.addr, "GET", "/api/v2/subscriptions/details", &[], b"").await;
    assert_eq!(r.status, 418, "continuing after 429 earns a ban");
    assert_eq!(r.json()["data"]["code"], 1509);
    assert_eq!(r.header("retry-after"), Some("120"));
    clock.fetch_add(60_000, std::sync::atomic::Ordering::SeqCst);
    let r = anon().await;
    assert_eq!(r.status, 418, "still banned");
    assert_eq!(r.header("retry-after"), Some("60"));
    // A call that presents a key with the wrong secret is told so, ban or not (#29).
    for path in [
        "/api/v2/subscriptions/details",
        "/api/v2/system/information",
    ] {
        let token = legacy_token("not-the-secret", nonce(1));
        let r = call(
            s.addr,
            "GET",
            path,
            &[("Key", &k.key), ("Authorization", &token)],
            b"",
        )
        .await;
        assert_eq!(
            (r.status, r.json()["data"]["code"].clone()),
            (401, 2000.into()),
            "{path}"
        );
    }
    assert_eq!(anon().await.status, 418, "the address is still banned");

    // The address's ban does not touch a valid key, which has its plan's 60 a minute.
    let mut step = 0;
    let mut signed = || {
        step += 1;
        let token = legacy_token(
            &k.secret,
            u128::from(clock.load(std::sync::atomic::Ordering::SeqCst)) * 10_000 + step,
        );
        let key = k.key.clone();
        async move {
            call(
                s.addr,
                "GET",
                "/api/v2/system/information",
                &[("Key", &key), ("Authorization", &token)],
                b"",
            )
            .await
        }
    };
    for _ in 0..60 {
        assert_ne!(signed().await.status, 429);
    }
    let r = signed().await;
    assert_eq!(r.status, 429);
    assert_eq!(r.json()["data"]["code"], 1507);
    assert!(
        r.json()["data"]["error"]
            .as_str()
            .unwrap()
            .contains("60 requests per minute")
    );
    assert_eq!(signed().await.status, 418);

    // After the ban, the address starts a new window; repeating the offence doubles the ban.
    clock.fetch_add(61_000, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..3 {
        assert_eq!(anon().await.status, 200);
    }
    assert_eq!(anon().await.status, 429);
    let r = anon().await;
    assert_eq!(r.status, 418);
    assert_eq!(r.header("retry-after"), Some("240"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads one response with a Content-Length body from a kept-alive connection.
async fn read_one(c: &mut TcpStream) -> (u16, Vec<u8>) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut byte))
            .await
            .expect("response in time")
            .unwrap();
        assert_eq!(
            n,
            1,
            "connection closed early: {}",
            String::from_utf8_lossy(&buf)
        );
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap();
    let mut body = vec![0u8; len];
    c.read_exact(&mut body).await.unwrap();
    (status, body)
}

#[tokio::test]
async fn refused_requests_keep_the_connection_usable() {
    let s = start(fixed_clock()).await;
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    let body = "x".repeat(5000);
    for (method, target, want) in [
        ("POST", "/api/v2/user/close-account", 401),
        ("POST", "/api/v2/no/such", 404),
        ("POST", "/elsewhere", 404),
        ("PUT", "/api/v2/system/timestamp", 405),
        ("POST", "/api/v2/system/ping", 422),
    ] {
        // Headers first, body a moment later, as http.client and many SDKs send them.
        let head = format!(
            "{method} {target} HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
            body.len() + 13
        );
        c.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        c.write_all(format!("milliseconds={body}").as_bytes())
            .await
            .unwrap();
        let (status, _) = read_one(&mut c).await;
        assert_eq!(status, want, "{target}");
    }
    c.write_all(b"GET /api/v2/system/timestamp HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_one(&mut c).await.0, 200);
}
