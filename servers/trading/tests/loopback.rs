//! The real server on 127.0.0.1:0, driven over TCP with hand-written HTTP/1.1 requests.

mod common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use trading_model::Catalogue;
use trading_model::auth::{sha256_hex, sign};
use trading_server::Settings;
use trading_server::store::Store;

#[tokio::test]
async fn system_endpoints_answer_with_the_envelope() {
    let s = start(fixed_clock()).await;
    let r = call(s.addr, "GET", "/api/v2/system/timestamp", &[], b"").await;
    assert_eq!(r.status, 200);
    let v = envelope(&r, "system/timestamp");
    assert_eq!(v["data"]["milliseconds"], NOW);
    assert_eq!(v["data"]["seconds"], NOW / 1000);
    assert_eq!(v["meta"]["ms"], NOW);
    assert_eq!(v["meta"]["uid"], -1);
    assert!(r.header("x-request-id").is_some());

    let r = call(
        s.addr,
        "POST",
        "/api/v2/system/ping",
        &[FORM],
        b"milliseconds=1592207324000",
    )
    .await;
    let v = envelope(&r, "system/ping");
    assert_eq!(v["data"]["difference"], 28);

    for path in ["system/endpoints", "system/ep"] {
        let r = call(s.addr, "GET", &format!("/api/v2/{path}"), &[], b"").await;
        let v = envelope(&r, path);
        assert_eq!(v["data"].as_array().unwrap().len(), 180);
    }
    let r = call(
        s.addr,
        "GET",
        "/api/v2/system/list-validation-functions",
        &[],
        b"",
    )
    .await;
    assert_eq!(
        envelope(&r, "system/list-validation-functions")["data"][0],
        "js_millisecond_update"
    );
}

#[tokio::test]
async fn unknown_paths_and_methods() {
    let s = start(fixed_clock()).await;
    let r = call(s.addr, "GET", "/api/v2/no/such", &[], b"").await;
    assert_eq!(r.status, 404);
    assert_eq!(envelope(&r, "no/such")["data"]["code"], 2500);
    let r = call(s.addr, "GET", "/elsewhere", &[], b"").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["data"]["code"], 2500);
    // Documented as POST; an SDK without input sends GET, and that is served (#29).
    let r = call(s.addr, "GET", "/api/v2/system/ping", &[], b"").await;
    assert_eq!(r.status, 200);
    let r = call(s.addr, "DELETE", "/api/v2/system/symbols", &[], b"").await;
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, POST"));
    let v = envelope(&r, "system/symbols");
    assert_eq!(v["data"]["code"], 2500);
    assert_eq!(v["meta"]["auth_required"], false);
    // The 405 of an endpoint that needs a key says so (#29).
    let r = call(s.addr, "PUT", "/api/v2/subscriptions/details", &[], b"").await;
    assert_eq!(r.status, 405);
    assert_eq!(
        envelope(&r, "subscriptions/details")["meta"]["auth_required"],
        true
    );
    // A domain configured with a trailing slash gives `//api/v2/...` (#29).
    let r = call(s.addr, "GET", "//api/v2/system/timestamp", &[], b"").await;
    assert_eq!(r.status, 200);
    envelope(&r, "system/timestamp");
}

#[tokio::test]
async fn validation_over_the_wire() {
    let s = start(fixed_clock()).await;
    let r = call(s.addr, "POST", "/api/v2/public/match-pair", &[FORM], b"").await;
    assert_eq!(r.status, 422);
    let v = envelope(&r, "public/match-pair");
    assert_eq!(v["data"]["code"], 1440);
    assert_eq!(v["missing_parameters"], serde_json::json!(["code"]));
    assert_eq!(v["incorrect_value_lengths"], serde_json::json!([]));

    // The query string wins over the body.
    let r = call(
        s.addr,
        "POST",
        "/api/v2/system/ping?milliseconds=1592207324020",
        &[FORM],
        b"milliseconds=5",
    )
    .await;
    assert_eq!(
        envelope(&r, "system/ping")["data"]["your_sent_ms"],
        1_592_207_324_020i64
    );
    let r = call(
        s.addr,
        "POST",
        "/api/v2/system/ping?milliseconds=x",
        &[FORM],
        b"milliseconds=5",
    )
    .await;
    assert_eq!(r.status, 422);

    // JSON bodies.
    let r = call(
        s.addr,
        "POST",
        "/api/v2/system/ping",
        &[("Content-Type", "application/json")],
        br#"{"milliseconds": 1592207324000}"#,
    )
    .await;
    assert_eq!(envelope(&r, "system/ping")["data"]["difference"], 28);
    let r = call(
        s.addr,
        "POST",
        "/api/v2/system/ping",
        &[("Content-Type", "application/json")],
        b"{nope",
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(envelope(&r, "system/ping")["data"]["code"], 2300);

    // Multipart forms, as browsers send them.
    let mp = b"--zz\r\nContent-Disposition: form-data; name=\"milliseconds\"\r\n\r\n1592207324000\r\n--zz--\r\n";
    let r = call(
        s.addr,
        "POST",
        "/api/v2/system/ping",
        &[("Content-Type", "multipart/form-data; boundary=zz")],
        mp,
    )
    .await;
    assert_eq!(envelope(&r, "system/ping")["data"]["difference"], 28);
    let r = call(
        s.addr,
        "POST",
        "/api/v2/system/ping",
        &[("Content-Type", "multipart/form-data")],
        mp,
    )
    .await;
    assert_eq!(r.status, 400);

    // public/match-pair now has a handler (the market module): it answers the match.
    let r = call(
        s.addr,
        "GET",
        "/api/v2/public/match-pair?code=btcusdt",
        &[],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        envelope(&r, "public/match-pair")["data"]["BTCUSDT"]["count"],
        4
    );
}

#[tokio::test]
async fn endpoints_that_need_a_key() {
    let s = start(fixed_clock()).await;
    let r = call(s.addr, "GET", "/api/v2/subscriptions/details", &[], b"").await;
    assert_eq!(r.status, 401);
    let v = envelope(&r, "subscriptions/details");
    assert_eq!(v["data"]["code"], 2001);
    assert_eq!(v["data"]["error"], "Missing Key");
    assert_eq!(v["meta"]["auth_required"], true);
    let r = call(
        s.addr,
        "POST",
        "/api/v2/user/close-account",
        &[("Key", "abc")],
        b"",
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(envelope(&r, "user/close-account")["data"]["code"], 2100);
    let token = sign(b"whatever", r#"{"nonce":15922073240280000}"#);
    let r = call(
        s.addr,
        "POST",
        "/api/v2/user/close-account",
        &[("Key", "abc"), ("Authorization", &token)],
        b"",
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(envelope(&r, "user/close-account")["data"]["code"], 2000);
}

#[tokio::test]
async fn sdk_tokens_against_the_key_store() {
    let dir = temp_dir("auth");
    let k = Store::open(&dir)
        .unwrap()
        .create_key("alice", "Free", false, NOW)
        .unwrap();
    let s = start(Settings {
        data_dir: Some(dir.clone()),
        ..fixed_clock()
    })
    .await;
    let addr = s.addr;
    let get = |token: String| {
        let key = k.key.clone();
        async move {
            call(
                addr,
                "GET",
                "/api/v2/subscriptions/details",
                &[("Key", &key), ("Authorization", &token)],
                b"",
            )
            .await
        }
    };

    let r = get(legacy_token(&k.secret, nonce(1))).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let v = envelope(&r, "subscriptions/details");
    assert_eq!(v["meta"]["auth_success"], true);
    assert_eq!(v["meta"]["rateLimits"]["minute"], 60);
    assert_eq!(v["meta"]["subscription"]["name"], "Free");
    assert!(v["meta"]["uid"].as_i64().unwrap() > 0);
    assert_eq!(v["data"]["exchange_api_keys"]["maximum_stored"], 3);

    // A replayed nonce; one older than the replay window.
    let r = get(legacy_token(&k.secret, nonce(1))).await;
    assert_eq!(r.status, 401);
    assert_eq!(envelope(&r, "subscriptions/details")["data"]["code"], 2011);
    let r = get(legacy_token(&k.secret, nonce(0) - 61 * 10_000_000)).await;
    assert_eq!(r.json()["data"]["code"], 2011);
    // An older one inside the window (another caller's request that arrived late) is
    // accepted, once.
    assert_eq!(get(legacy_token(&k.secret, nonce(0))).await.status, 200);
    assert_eq!(get(legacy_token(&k.secret, nonce(0))).await.status, 401);
    // Too far ahead, badly formed, missing.
    let r = get(legacy_token(&k.secret, nonce(0) + 61 * 10_000_000)).await;
    assert_eq!(r.json()["data"]["code"], 2014);
    let r = get(sign(k.secret.as_bytes(), r#"{"nonce":"12345"}"#)).await;
    assert_eq!(r.json()["data"]["code"], 2012);
    let r = get(sign(k.secret.as_bytes(), r#"{"n":1}"#)).await;
    assert_eq!(r.json()["data"]["code"], 2010);
    // Wrong secret; unreadable token.
    let r = get(legacy_token("not-the-secret", nonce(5))).await;
    assert_eq!(r.json()["data"]["code"], 2000);
    let r = get("garbage".into()).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["data"]["code"], 1820);
    // Bytes beyond ASCII make a header unreadable, not absent: on a private endpoint and
    // on a public one, which checks credentials it is sent.
    let r = get("tökén.x.y".into()).await;
    assert_eq!(r.json()["data"]["code"], 1820, "{}", r.text());
    for path in [
        "/api/v2/subscriptions/details",
        "/api/v2/system/information",
    ] {
        let r = call(
            addr,
            "GET",
            path,
            &[("Key", &k.key), ("Authorization", "tökén")],
            b"",
        )
        .await;
        assert_eq!(r.json()["data"]["code"], 1820, "{path}: {}", r.text());
        let token = legacy_token(&k.secret, nonce(6));
        let r = call(
            addr,
            "GET",
            path,
            &[("Key", "këy"), ("Authorization", &token)],
            b"",
        )
        .await;
        assert_eq!(r.json()["data"]["code"], 2000, "{path}: {}", r.text());
    }
    // Forged requests did not consume nonces: the next honest one still works.
    let r = get(legacy_token(&k.secret, nonce(2))).await;
    assert_eq!(r.status, 200);

    // close-account: validation first, then the documented refusal.
    let post = |body: &'static [u8], n: u128| {
        let (key, token) = (k.key.clone(), legacy_token(&k.secret, n));
        async move {
            call(
                addr,
                "POST",
                "/api/v2/user/close-account",
                &[FORM, ("Key", &key), ("Authorization", &token)],
                body,
            )
            .await
        }
    };
    let r = post(b"reason=short", nonce(3)).await;
    assert_eq!(r.status, 422);
    let v = envelope(&r, "user/close-account");
    assert_eq!(v["missing_parameters"], serde_json::json!(["password"]));
    assert_eq!(
        v["incorrect_value_lengths"],
        serde_json::json!(["reason minimum length 10"])
    );
    let r = post(b"reason=moving+elsewhere&password=hunter22", nonce(4)).await;
    assert_eq!(r.status, 403);
    assert_eq!(envelope(&r, "user/close-account")["data"]["code"], 2750);

    // Nonce memory survives a restart.
    s.stop.unwrap().send(()).unwrap();
    s.done.await.unwrap().unwrap();
    let s2 = start(Settings {
        data_dir: Some(dir.clone()),
        ..fixed_clock()
    })
    .await;
    let hdr = |n| legacy_token(&k.secret, n);
    let r = call(
        s2.addr,
        "GET",
        "/api/v2/subscriptions/details",
        &[("Key", &k.key), ("Authorization", &hdr(nonce(4)))],
        b"",
    )
    .await;
    assert_eq!(r.json()["data"]["code"], 2011);
    let r = call(
        s2.addr,
        "GET",
        "/api/v2/subscriptions/details",
        &[("Key", &k.key), ("Authorization", &hdr(nonce(9)))],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn strict_keys_sign_the_whole_request() {
    let dir = temp_dir("strict");
    let k = Store::open(&dir)
        .unwrap()
        .create_key("bob", "Free", true, NOW)
        .unwrap();
    let s = start(Settings {
        data_dir: Some(dir.clone()),
        ..fixed_clock()
    })
    .await;
    let strict = |n: u128, body: &[u8], path: &str| {
        let claims = serde_json::json!({
            "nonce": n, "m": "POST", "p": path, "q": sha256_hex(b""), "b": sha256_hex(body), "ts": NOW,
        });
        sign(k.secret.as_bytes(), &claims.to_string())
    };
    let path = "/api/v2/user/close-account";
    let body: &[u8] = b"reason=moving+elsewhere&password=hunter22";
    let r = call(
        s.addr,
        "POST",
        path,
        &[
            FORM,
            ("Key", &k.key),
            (
                "Authorization",
                &strict(nonce(1), body, "user/close-account"),
            ),
        ],
        body,
    )
    .await;
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.body));
    // Same token shape, body changed in flight.
    let tampered: &[u8] = b"reason=moving+elsewhere&password=hunter23";
    let r = call(
        s.addr,
        "POST",
        path,
        &[
            FORM,
            ("Key", &k.key),
            (
                "Authorization",
                &strict(nonce(2), body, "user/close-account"),
            ),
        ],
        tampered,
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["data"]["code"], 1820);
    // Token minted for another path.
    let r = call(
        s.addr,
        "POST",
        path,
        &[
            FORM,
            ("Key", &k.key),
            (
                "Authorization",
                &strict(nonce(3), body, "user/active-sessions"),
            ),
        ],
        body,
    )
    .await;
    assert_eq!(r.status, 401);
    // A legacy token is not enough for a strict key.
    let r = call(
        s.addr,
        "POST",
        path,
        &[
            FORM,
            ("Key", &k.key),
            ("Authorization", &legacy_token(&k.secret, nonce(4))),
        ],
        body,
    )
    .await;
    assert_eq!(r.status, 401);
    // The refused attempts consumed nothing: nonce 2 is still usable.
    let r = call(
        s.addr,
        "POST",
        path,
        &[
            FORM,
            ("Key", &k.key),
            (
                "Authorization",
                &strict(nonce(2), body, "user/close-account"),
            ),
        ],
        body,
    )
    .await;
    assert_eq!(r.status, 403);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn every_catalogue_path_is_routed() {
    let s = start(fixed_clock()).await;
    let r = call(s.addr, "GET", "/api/v2/openapi.json", &[], b"").await;
    assert_eq!(r.status, 200);
    let doc = r.json();
    let paths = doc["paths"].as_object().unwrap();
    assert_eq!(paths.len(), Catalogue::builtin().len());
    for ep in Catalogue::builtin().endpoints() {
        let target = format!("/api/v2/{}", ep.path);
        assert!(paths.contains_key(&target));
        for m in &ep.methods {
            let r = call(s.addr, m.as_str(), &target, &[FORM], b"").await;
            assert!(
                r.status != 404 && r.status != 405 && r.status < 600,
                "{target}: {}",
                r.status
            );
            envelope(&r, &ep.path);
            let op = &paths[&target][m.as_str().to_ascii_lowercase()];
            let implemented = op["x-implemented"].as_bool().unwrap();
            if r.status == 501 {
                assert!(!implemented, "{target} answered 501 but claims a handler");
            }
        }
    }
}

#[tokio::test]
async fn hostile_input_gets_an_answer_not_a_hang() {
    let settings = Settings {
        max_body_bytes: 64,
        read_timeout: Duration::from_millis(300),
        ..fixed_clock()
    };
    let s = start(settings).await;
    let big = vec![b'a'; 100];
    let r = call(s.addr, "POST", "/api/v2/system/ping", &[FORM], &big).await;
    assert_eq!(r.status, 413);
    assert_eq!(envelope(&r, "system/ping")["data"]["code"], 2300);

    // A body that never arrives.
    let r = raw(s.addr, b"POST /api/v2/system/ping HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\nConnection: close\r\n\r\nabc").await;
    assert_eq!(r.status, 408);

    // Not HTTP at all.
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(b"\x00\x01garbage\r\n\r\n").await.unwrap();
    let mut buf = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut buf))
        .await
        .expect("closed in time");
    assert!(n.is_ok());

    // Headers that never finish.
    let mut c = TcpStream::connect(s.addr).await.unwrap();
    c.write_all(b"GET /api/v2/system/timestamp HTTP/1.1\r\nHost:")
        .await
        .unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut buf))
        .await
        .expect("closed in time")
        .ok();

    // Percent-garbage in the query string is just a bad value.
    let r = call(
        s.addr,
        "POST",
        "/api/v2/system/ping?milliseconds=%ff%00",
        &[FORM],
        b"",
    )
    .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn shutdown_ends_serve() {
    let mut s = start(fixed_clock()).await;
    assert_eq!(
        call(s.addr, "GET", "/api/v2/system/timestamp", &[], b"")
            .await
            .status,
        200
    );
    s.stop.take().unwrap().send(()).unwrap();
    let res = tokio::time::timeout(Duration::from_secs(5), &mut s.done)
        .await
        .expect("serve returned");
    res.unwrap().unwrap();
    assert!(TcpStream::connect(s.addr).await.is_err(), "listener closed");
}
