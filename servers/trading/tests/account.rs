//! Loopback tests of the account area: limits (spacing, weights, bans), plans and custom
//! settings, sub-account keys and permissions, sessions, settings, referrals, servers,
//! wallets and persistence across restarts. All on an injected clock.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use serde_json::Value;
use trading_server::Settings;
use trading_server::store::Store;

struct Env {
    server: Server,
    clock: Arc<AtomicU64>,
    dir: std::path::PathBuf,
}

impl Env {
    async fn new(tag: &str) -> Env {
        let dir = temp_dir(&format!("account-{tag}"));
        Store::open(&dir).unwrap();
        Env::on(dir, Arc::new(AtomicU64::new(NOW))).await
    }

    async fn on(dir: std::path::PathBuf, clock: Arc<AtomicU64>) -> Env {
        Env::with_ip_limit(dir, clock, 0).await
    }

    async fn with_ip_limit(dir: std::path::PathBuf, clock: Arc<AtomicU64>, ip: u32) -> Env {
        Env::with(dir, clock, ip, false).await
    }

    async fn with(
        dir: std::path::PathBuf,
        clock: Arc<AtomicU64>,
        ip: u32,
        plan_spacing: bool,
    ) -> Env {
        let c = clock.clone();
        let server = start(Settings {
            clock: Arc::new(move || c.load(Ordering::SeqCst)),
            plan_spacing,
            ip_per_minute: ip,
            data_dir: Some(dir.clone()),
            ..Settings::default()
        })
        .await;
        Env { server, clock, dir }
    }

    fn key(&self, name: &str, plan: &str) -> Signer {
        let k = Store::open(&self.dir)
            .unwrap()
            .create_key(name, plan, false, NOW)
            .unwrap();
        self.signer(k)
    }

    fn signer(&self, k: trading_server::store::NewKey) -> Signer {
        Signer {
            addr: self.server.addr,
            key: k.key,
            secret: k.secret,
            step: 0.into(),
        }
    }

    fn advance(&self, ms: u64) {
        self.clock.fetch_add(ms, Ordering::SeqCst);
    }

    async fn stop(mut self) -> (std::path::PathBuf, Arc<AtomicU64>) {
        let _ = self.server.stop.take().unwrap().send(());
        let _ = self.server.done.await;
        (self.dir, self.clock)
    }
}

fn data(r: &Reply) -> Value {
    let v = r.json();
    assert_eq!(v["meta"]["status"], r.status, "{v}");
    v["data"].clone()
}

fn ok(r: &Reply) -> Value {
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    data(r)
}

fn refused(r: &Reply, param: &str) {
    assert_eq!(r.status, 422, "{}", String::from_utf8_lossy(&r.body));
    let d = data(r);
    assert_eq!(d["code"], 1440, "{d}");
    assert_eq!(
        r.json()["missing_information"][0]["parameter"],
        param,
        "{}",
        r.json()
    );
}

#[tokio::test]
async fn spacing_refuses_close_calls_and_keeps_the_ban_growth() {
    let env = Env::new("spacing").await;
    let a = env.key("alice", "Free");
    // Below the plan's floor of 1000 ms is refused; 0 turns spacing off.
    refused(
        &a.get("user/settings?ratelimit_ms=500").await,
        "ratelimit_ms",
    );
    let s = ok(&a.get("user/settings?ratelimit_ms=1000").await);
    assert_eq!(s["ratelimit"]["ms"], 1000);
    assert_eq!(s["ratelimit"]["plan_ms"], 1000);
    env.advance(1000);
    assert_eq!(a.get("subscriptions/details").await.status, 200);
    env.advance(400);
    let r = a.get("subscriptions/details").await;
    assert_eq!(r.status, 429);
    let d = data(&r);
    assert_eq!(d["code"], 1507);
    // The refusal is about a caller whose signature checked out, and says so.
    let meta = &r.json()["meta"];
    assert_eq!(meta["auth_success"], true, "{meta}");
    assert_eq!(meta["subscription"]["name"], "Free", "{meta}");
    assert!(meta["uid"].as_i64().unwrap() > 0, "{meta}");
    let next = NOW + 2000;
    assert_eq!(
        d["error"],
        format!("Ratelimit. Next access allowable at {next}. Limit set to 1 request per 1000ms")
    );
    assert_eq!(r.header("retry-after"), Some("1"));
    // Continuing during the wait earns the doubling ban.
    let r = a.get("subscriptions/details").await;
    assert_eq!(r.status, 418);
    assert_eq!(data(&r)["code"], 1509);
    assert_eq!(r.header("retry-after"), Some("120"));
    env.advance(120_000);
    assert_eq!(a.get("subscriptions/details").await.status, 200);
    env.advance(10);
    assert_eq!(a.get("subscriptions/details").await.status, 429);
    let r = a.get("subscriptions/details").await;
    assert_eq!(r.status, 418);
    assert_eq!(
        r.header("retry-after"),
        Some("240"),
        "second ban twice as long"
    );
    // Calls that keep the spacing are served; another account is not affected.
    env.advance(240_000);
    for _ in 0..3 {
        assert_eq!(a.get("subscriptions/details").await.status, 200);
        env.advance(1000);
    }
    let b = env.key("bob", "Free");
    assert_eq!(b.get("subscriptions/details").await.status, 200);
    assert_eq!(b.get("subscriptions/details").await.status, 200);
    env.stop().await;
}

#[tokio::test]
async fn plan_spacing_applies_every_plan_floor() {
    let dir = temp_dir("account-plan-spacing");
    Store::open(&dir).unwrap();
    let env = Env::with(dir, Arc::new(AtomicU64::new(NOW)), 0, true).await;
    let f = env.key("fred", "Free");
    let p = env.key("paula", "Pro");
    let u = env.key("ursula", "Unlimited");
    assert_eq!(f.get("subscriptions/details").await.status, 200);
    let r = f.get("subscriptions/details").await;
    assert_eq!(r.status, 429);
    assert_eq!(
        data(&r)["error"],
        format!(
            "Ratelimit. Next access allowable at {}. Limit set to 1 request per 1000ms",
            NOW + 1000
        )
    );
    assert_eq!(p.get("subscriptions/details").await.status, 200);
    env.advance(250);
    assert_eq!(p.get("subscriptions/details").await.status, 200);
    env.advance(100);
    let r = p.get("subscriptions/details").await;
    assert_eq!(r.status, 429);
    assert!(
        data(&r)["error"]
            .as_str()
            .unwrap()
            .ends_with("1 request per 250ms")
    );
    for _ in 0..5 {
        assert_eq!(u.get("subscriptions/details").await.status, 200);
    }
    // Choosing 0 does not undo the plan's floor; a longer spacing is kept.
    env.advance(300_000);
    ok(&p.get("user/settings?ratelimit_ms=0").await);
    env.advance(200);
    assert_eq!(p.get("subscriptions/details").await.status, 429);
    env.advance(300_000);
    ok(&f.get("user/settings?ratelimit_ms=3000").await);
    env.advance(2000);
    assert_eq!(f.get("subscriptions/details").await.status, 429);
    env.stop().await;
}

#[tokio::test]
async fn heavy_endpoints_weigh_more() {
    let dir = temp_dir("account-weights");
    Store::open(&dir).unwrap();
    let env = Env::with_ip_limit(dir, Arc::new(AtomicU64::new(NOW)), 12).await;
    let a = env.key("alice", "Free");
    // export/request weighs 5: twelve fit in the Free 60 a minute.
    for i in 0..12 {
        let r = a.post("export/request", "").await;
        assert_ne!(r.status, 429, "call {i}");
        let rl = r.header("ratelimit").unwrap();
        assert!(rl.contains(&format!("r={};", 60 - 5 * (i + 1))), "{rl}");
    }
    let r = a.post("export/request", "").await;
    assert_eq!(r.status, 429);
    assert_eq!(data(&r)["code"], 1507);
    assert_eq!(a.get("subscriptions/details").await.status, 418);
    // Anonymous heavy calls weigh the same against the address's allowance (12 here).
    let anon = || {
        call(
            env.server.addr,
            "POST",
            "/api/v2/backtesting/orderbook-data",
            &[FORM],
            b"",
        )
    };
    assert_ne!(anon().await.status, 429);
    assert_ne!(anon().await.status, 429);
    let r = anon().await;
    assert_eq!((r.status, data(&r)["code"].as_i64()), (429, Some(1508)));
    env.stop().await;
}

#[tokio::test]
async fn plans_packages_custom_settings_and_invoices() {
    let env = Env::new("plans").await;
    let a = env.key("alice", "Free");
    let p = env.key("paula", "Pro");
    let d = ok(&p.get("subscriptions/details").await);
    assert_eq!(d["subscription"]["name"], "Pro");
    assert_eq!(d["user_settings"]["ratelimit"]["ms"], 250);
    assert_eq!(d["strategies"]["maximum"]["strategies"], 50);
    let r = p.get("subscriptions/details").await;
    assert_eq!(r.json()["meta"]["rateLimits"]["minute"], 300);

    let pk = ok(&a.get("subscriptions/list-packages").await);
    let names: Vec<&str> = pk["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Free", "Pro", "Enterprise"]);
    assert_eq!(pk["current"]["name"], "Free");
    let rec = ok(&a.get("subscriptions/php-sdk-recommendation").await);
    assert_eq!(rec["recommended"]["name"], "Free");
    refused(&a.post("subscriptions/change-php-sdk", "id=0").await, "id");
    refused(&a.post("subscriptions/change-php-sdk", "id=77").await, "id");
    let ch = ok(&a.post("subscriptions/change-php-sdk", "id=1").await);
    assert_eq!(ch["subscription"]["name"], "Pro");
    let d = ok(&a.get("subscriptions/details").await);
    assert_eq!(d["subscription"]["price"], 49);
    let ch = ok(&a.get("subscriptions/change-package?id=2").await);
    assert_eq!(ch["previous"]["name"], "Pro");
    let inv = ok(&a.get("subscriptions/invoices").await);
    assert_eq!(inv["total"], 2);
    assert_eq!(inv["records"][0]["amount"], "249.00");
    assert_eq!(inv["records"][1]["amount"], "49.00");

    let req = ok(&a
        .get("subscriptions/change-setting-request?setting=maximum_strategies&value=600")
        .await);
    assert_eq!(req["status"], "pending");
    assert_eq!(req["current"], 500);
    assert_eq!(req["price_month"], "200.00");
    let id = req["price_adjustment_id"].as_i64().unwrap();
    refused(
        &a.get("subscriptions/change-setting-confirm?id=99999").await,
        "id",
    );
    let conf = ok(&a
        .get(&format!("subscriptions/change-setting-confirm?id={id}"))
        .await);
    assert_eq!(conf["subscription"]["status"], "custom");
    refused(
        &a.get(&format!("subscriptions/change-setting-confirm?id={id}"))
            .await,
        "id",
    );
    let d = ok(&a.get("subscriptions/details").await);
    assert_eq!(d["strategies"]["maximum"]["strategies"], 600);
    let acc = ok(&a.get("user/account-details").await);
    assert_eq!(acc["subscription"]["status"], "custom");
    assert_eq!(ok(&a.get("subscriptions/invoices").await)["total"], 3);

    // Plan allowances come from the details: Free stores 3 exchange keys, a custom
    // setting raises that.
    let f = env.key("fred", "Free");
    for i in 0..3 {
        ok(&f
            .post(
                "exchange-api-keys/add",
                &format!("exchange=binance&label=k{i}&token=tttttt&secret=ssssss"),
            )
            .await);
    }
    let add4 = "exchange=binance&label=k4&token=tttttt&secret=ssssss";
    refused(&f.post("exchange-api-keys/add", add4).await, "exchange");
    let req = ok(&f
        .get("subscriptions/change-setting-request?setting=maximum_stored_keys&value=4")
        .await);
    assert_eq!(req["price_month"], "3.00");
    ok(&f
        .get(&format!(
            "subscriptions/change-setting-confirm?id={}",
            req["id"]
        ))
        .await);
    ok(&f.post("exchange-api-keys/add", add4).await);

    // The test plan keeps its (absent) limits.
    let u = env.key("ursula", "Unlimited");
    refused(&u.get("subscriptions/change-package?id=0").await, "id");
    ok(&u.get("user/settings?ratelimit_ms=5000").await);
    assert_eq!(u.get("subscriptions/details").await.status, 200);
    assert_eq!(u.get("subscriptions/details").await.status, 200);

    let r = a.get("subscriptions/cancel").await;
    assert_eq!((r.status, data(&r)["code"].as_i64()), (403, Some(2750)));
    env.stop().await;
}

#[tokio::test]
async fn sub_accounts_sign_with_their_own_keys_inside_the_parent_account() {
    let env = Env::new("subaccounts").await;
    let a = env.key("alice", "Pro");
    // The documented Free plan has no API access for sub-accounts.
    let f = env.key("fred", "Free");
    ok(&f
        .post(
            "subaccounts/subaccount-create",
            "name=Kid%20Free&email=kid@example.com&username=kidfree&password=longpassword&active=true&allow_api_key_usage=true",
        )
        .await);
    assert!(
        Store::open(&env.dir)
            .unwrap()
            .create_subaccount_key("fred", "kidfree", false, NOW)
            .is_err()
    );
    let mk = |user: &str, allow: bool, active: bool| {
        format!(
            "name=Kid%20One&email=kid@example.com&username={user}&password=longpassword&active={active}&allow_api_key_usage={allow}"
        )
    };
    let k1 = ok(&a
        .post("subaccounts/subaccount-create", &mk("kidone", false, true))
        .await);
    ok(&a
        .post("subaccounts/subaccount-create", &mk("kidtwo", true, true))
        .await);
    ok(&a
        .post("subaccounts/subaccount-create", &mk("sleepy", true, false))
        .await);
    ok(&a
        .post(
            "exchange-api-keys/add",
            "exchange=binance&label=main&token=tttttt&secret=ssssss",
        )
        .await);
    ok(&a
        .post(
            "subaccounts/broadcast-create",
            "title=Hello&body=Welcome%20all",
        )
        .await);

    let store = Store::open(&env.dir).unwrap();
    assert!(
        store
            .create_subaccount_key("alice", "sleepy", false, NOW)
            .is_err(),
        "inactive"
    );
    assert!(
        store
            .create_subaccount_key("alice", "nobody", false, NOW)
            .is_err()
    );
    assert!(
        store
            .create_subaccount_key("zed", "kidone", false, NOW)
            .is_err()
    );
    let one = env.signer(
        store
            .create_subaccount_key("alice", "KidOne", false, NOW)
            .unwrap(),
    );
    let two = env.signer(
        store
            .create_subaccount_key("alice", "kidtwo", false, NOW)
            .unwrap(),
    );
    drop(store);

    // Acting inside the parent's account: same uid, same plan, parent's broadcasts.
    let r = one.get("subscriptions/details").await;
    assert_eq!(r.status, 200);
    let parent_uid = a.get("subscriptions/details").await.json()["meta"]["uid"].clone();
    assert_eq!(r.json()["meta"]["uid"], parent_uid);
    let b = ok(&one.post("subaccounts/broadcast-list", "").await);
    assert_eq!(b["records"][0]["title"], "Hello");
    let acc = ok(&one.get("user/account-details").await);
    assert_eq!(acc["subaccount"]["username"], "kidone");
    // Exchange keys: none without permission, the parent's with it.
    assert_eq!(
        ok(&one.post("exchange-api-keys/list", "").await)["total"],
        0
    );
    assert_eq!(
        ok(&two.post("exchange-api-keys/list", "").await)["total"],
        1
    );
    // Primary-only endpoints.
    for (m, path, body) in [
        (
            "POST",
            "subaccounts/subaccount-create",
            mk("kidthree", true, true),
        ),
        ("GET", "subaccounts/subaccount-list", String::new()),
        (
            "POST",
            "subaccounts/broadcast-create",
            "title=Hello&body=Welcome".into(),
        ),
        ("GET", "subscriptions/list-packages", String::new()),
        (
            "POST",
            "user/close-account",
            "reason=because%20I%20can&password=secret".into(),
        ),
        (
            "POST",
            "exchange-api-keys/add",
            "exchange=binance&label=mine&token=tttttt&secret=ssssss".into(),
        ),
    ] {
        let r = if m == "GET" {
            one.get(path).await
        } else {
            one.post(path, &body).await
        };
        assert_eq!(r.status, 403, "{path}");
        assert_eq!(data(&r)["code"], 1820, "{path}");
    }
    assert_eq!(
        one.post("exchange-api-keys/test", "id=1001").await.status,
        403
    );

    let h = ok(&a.get("subaccounts/subaccount-access-history").await);
    assert!(h["total"].as_u64().unwrap() >= 5, "{h}");
    assert_eq!(h["records"][0]["username"], "kidone");
    assert_eq!(h["records"][0]["endpoint"], "exchange-api-keys/test");
    assert_eq!(h["records"][0]["allowed"], false);
    assert!(
        h["records"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["endpoint"] == "exchange-api-keys/list" && r["username"] == "kidtwo")
    );

    // The primary account grants the permission: it applies from the next call.
    let kid1 = k1["id"].as_i64().unwrap();
    let edit = |allow: bool| {
        format!(
            "id={kid1}&email=kid@example.com&name=Kid%20One&active=true&allow_api_key_usage={allow}"
        )
    };
    ok(&a.post("subaccounts/subaccount-edit", &edit(true)).await);
    assert_eq!(
        ok(&one.post("exchange-api-keys/list", "").await)["total"],
        1
    );
    ok(&a.post("subaccounts/subaccount-edit", &edit(false)).await);
    assert_eq!(
        ok(&one.post("exchange-api-keys/list", "").await)["total"],
        0
    );

    // Moving the parent to Free takes API access from its sub-accounts' keys.
    ok(&a.get("subscriptions/change-package?id=0").await);
    let r = one.get("subscriptions/details").await;
    assert_eq!((r.status, data(&r)["code"].as_i64()), (403, Some(1820)));
    ok(&a.get("subscriptions/change-package?id=1").await);
    ok(&one.get("subscriptions/details").await);

    // Deleting the sub-account revokes its keys.
    let id = k1["id"].as_i64().unwrap();
    ok(&a
        .post("subaccounts/subaccount-delete", &format!("id={id}"))
        .await);
    let r = one.get("subscriptions/details").await;
    assert_eq!((r.status, data(&r)["code"].as_i64()), (401, Some(2000)));
    assert_eq!(two.get("subscriptions/details").await.status, 200);
    env.stop().await;
}

#[tokio::test]
async fn sessions_settings_security_and_referrals() {
    let env = Env::new("sessions").await;
    let a = env.key("alice", "Free");
    let a2 = env.key("alice", "Free");
    let a3 = env.key("alice", "Free");
    ok(&a2.get("subscriptions/details").await);
    ok(&a3.get("subscriptions/details").await);
    let s = ok(&a.post("user/active-sessions", "request=list").await);
    let rows = s["sessions"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows.iter().filter(|r| r["current"] == true).count(), 1);
    assert!(rows.iter().all(|r| r["last_address"] == "127.0.0.1"));
    assert!(rows.iter().all(|r| r["last_seen_ms"] == NOW));
    refused(
        &a.post("user/active-sessions", "request=dance").await,
        "request",
    );
    refused(
        &a.post("user/active-sessions", "request=revoke:424242")
            .await,
        "request",
    );
    let a3_id = rows
        .iter()
        .find(|r| r["current"] == false && r["id"].as_i64().unwrap() == 3)
        .map(|r| r["id"].clone())
        .unwrap();
    let s = ok(&a
        .post("user/active-sessions", &format!("request=revoke:{a3_id}"))
        .await);
    assert_eq!(s["revoked"], 1);
    assert_eq!(a3.get("subscriptions/details").await.status, 401);
    let s = ok(&a
        .post("user/active-sessions", "request=revoke-others")
        .await);
    assert_eq!(s["revoked"], 1);
    let r = a2.get("subscriptions/details").await;
    assert_eq!((r.status, data(&r)["code"].as_i64()), (401, Some(2000)));
    assert_eq!(a.get("subscriptions/details").await.status, 200);

    let sec = ok(&a.get("user/security-settings").await);
    assert_eq!(sec["api_keys"]["total"], 3);
    assert_eq!(sec["api_keys"]["active"], 1);
    assert_eq!(sec["api_keys"]["revoked"], 2);
    assert_eq!(sec["twofactor"]["enabled"], false);

    let st = ok(&a.get("user/settings").await);
    assert_eq!(
        (&st["timezone"], &st["language"]),
        (&Value::from("UTC"), &Value::from("en"))
    );
    let st = ok(&a
        .get("user/settings?timezone=Europe/Dublin&language=de&notification_email=a@example.com")
        .await);
    assert_eq!(st["timezone"], "Europe/Dublin");
    let r = a.get("user/settings?notification_email=nonsense").await;
    assert_eq!(r.status, 422);
    assert_eq!(ok(&a.get("user/settings").await)["language"], "de");

    // Referrals: accounts created with --referred-by (Store::set_referrer).
    let store = Store::open(&env.dir).unwrap();
    for n in ["r1", "r2", "r3"] {
        store.create_key(n, "Free", false, NOW).unwrap();
        store.set_referrer(n, "alice").unwrap();
    }
    assert!(store.set_referrer("r1", "nobody").is_err());
    drop(store);
    let r = ok(&a.post("user/list-referrals", "limit=2").await);
    assert_eq!(
        (r["total"].as_u64(), r["showing"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(r["records"][0]["name"], "r3");
    assert!(r["referral_code"].as_str().unwrap().starts_with("ex-"));
    env.stop().await;
}

#[tokio::test]
async fn servers_speed_tests_and_drive_time() {
    let env = Env::new("servers").await;
    let a = env.key("alice", "Free");
    let t = ok(&a
        .post("subscriptions/server-types", "type=private&duration=7200")
        .await);
    assert_eq!(t["packages"][0]["id"], "private-small");
    assert_eq!(t["packages"][0]["price"], "0.16");
    let t2 = ok(&a
        .post("subscriptions/server-types", "type=private&duration=72000")
        .await);
    assert_eq!(t2["packages"][0]["price"], "1.60");
    assert_eq!(
        a.post("subscriptions/server-types", "type=private&duration=7199")
            .await
            .status,
        422
    );
    // Free has no private servers.
    refused(
        &a.post(
            "subscriptions/enable-private-server",
            "region=Tokyo&server_package=private-small",
        )
        .await,
        "server_package",
    );
    refused(
        &a.post("subscriptions/enable-shared-server", "region=Mars")
            .await,
        "region",
    );
    refused(
        &a.post("subscriptions/enable-shared-server", "region=Tokyo")
            .await,
        "region",
    );
    let sh = ok(&a
        .post("subscriptions/enable-shared-server", "region=singapore")
        .await);
    assert_eq!(
        (&sh["status"], &sh["region"]),
        (&Value::from("active"), &Value::from("Singapore"))
    );
    let p = env.key("paula", "Pro");
    let pv = ok(&p
        .post(
            "subscriptions/enable-private-server",
            "region=Frankfurt&server_package=private-medium",
        )
        .await);
    let pid = pv["id"].as_i64().unwrap();
    let list = ok(&p.post("subscriptions/list-private-servers", "").await);
    assert_eq!(list["total"], 1);
    assert_eq!(
        ok(&a.post("subscriptions/list-shared-servers", "").await)["total"],
        1
    );
    assert_eq!(
        ok(&p.get("subscriptions/invoices").await)["records"][0]["amount"],
        "108.00"
    );

    let body = format!("server_id={pid}&exchange1=kraken&exchange2=binance");
    let t1 = ok(&p
        .post("tests/server-location-speed-to-exchange", &body)
        .await);
    assert_eq!(t1["fastest"], "kraken");
    assert_eq!(t1["previous"].as_array().unwrap().len(), 0);
    let k = t1["results"][0]["ms"].as_u64().unwrap();
    assert!((2..=10).contains(&k), "{k}");
    let t2 = ok(&p
        .post("tests/server-location-speed-to-exchange", &body)
        .await);
    assert_eq!(
        t2["results"], t1["results"],
        "deterministic within a minute"
    );
    assert_eq!(t2["previous"][0]["id"], t1["id"]);
    refused(
        &p.post(
            "tests/server-location-speed-to-exchange",
            "server_id=5&exchange1=kraken&exchange2=binance",
        )
        .await,
        "server_id",
    );
    refused(
        &p.post(
            "tests/server-location-speed-to-exchange",
            &format!("server_id={pid}&exchange1=nowhere&exchange2=binance"),
        )
        .await,
        "exchange1",
    );
    // Another account cannot touch it.
    refused(
        &a.post("subscriptions/disable-private-server", &format!("id={pid}"))
            .await,
        "id",
    );
    let off = ok(&p
        .post("subscriptions/disable-private-server", &format!("id={pid}"))
        .await);
    assert_eq!(off["status"], "disabled");
    refused(
        &p.post("subscriptions/disable-private-server", &format!("id={pid}"))
            .await,
        "id",
    );
    let sid = sh["id"].as_i64().unwrap();
    ok(&a
        .post("subscriptions/disable-shared-server", &format!("id={sid}"))
        .await);

    let dt = ok(&a.get("subscriptions/add-drivetime?hours=10").await);
    assert_eq!(
        (dt["total_hours"].as_u64(), dt["amount"].as_str()),
        (Some(10), Some("0.50"))
    );
    let dt = ok(&a.get("subscriptions/add-drivetime?hours=5").await);
    assert_eq!(dt["total_hours"], 15);
    let h = ok(&a.get("subscriptions/list-history").await);
    assert_eq!(h["total"], 2);
    assert_eq!(h["records"][0]["hours"], 5);
    env.stop().await;
}

#[tokio::test]
async fn wallets_deposits_withdrawals_and_restart() {
    let env = Env::new("wallets").await;
    let a = env.key("alice", "Free");
    let addr = ok(&a.get("wallets/fetch-deposit-address").await);
    assert_eq!(addr["wallet"], "BTC");
    assert!(addr["address"].as_str().unwrap().starts_with("bc1q"));
    assert_eq!(ok(&a.get("wallets/fetch-deposit-address").await), addr);
    let eth = ok(&a.get("wallets/fetch-deposit-address?wallet=ETH").await);
    assert!(eth["address"].as_str().unwrap().starts_with("0x"));

    let store = Store::open(&env.dir).unwrap();
    store.credit_deposit("alice", "btc", "0.5", NOW).unwrap();
    store.credit_deposit("alice", "USDT", "100", NOW).unwrap();
    assert!(store.credit_deposit("alice", "DOGE", "1", NOW).is_err());
    assert!(store.credit_deposit("alice", "BTC", "-1", NOW).is_err());
    assert!(store.credit_deposit("nobody", "BTC", "1", NOW).is_err());
    drop(store);

    let b = ok(&a.post("wallets/list-balances", "").await);
    assert_eq!(b["total"], 3);
    let btc = b["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["wallet"] == "BTC")
        .unwrap()
        .clone();
    assert_eq!(btc["balance"], "0.50000000");
    let dst = "bc1qdestinationaddressxxxxxxxxxxxx";
    refused(
        &a.get(&format!(
            "wallets/withdraw?wallet=BTC&address={dst}&amount=0.5"
        ))
        .await,
        "amount",
    );
    let w = ok(&a
        .get(&format!(
            "wallets/withdraw?wallet=BTC&address={dst}&amount=0.1"
        ))
        .await);
    assert_eq!(
        (&w["status"], &w["fee"]),
        (&Value::from("manual_review"), &Value::from("0.00050000"))
    );
    let bal = ok(&a.get("user/account-balance").await);
    let btc = bal["wallets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["wallet"] == "BTC")
        .unwrap()
        .clone();
    assert_eq!(btc["balance"], "0.39950000");
    assert_eq!(btc["pending_withdrawal"], "0.10050000");
    assert!(bal["total_usd"].as_f64().unwrap() > 100.0, "{bal}");
    let d = ok(&a.post("finance/list-depoists", "limit=1").await);
    assert_eq!(
        (d["total"].as_u64(), d["showing"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(d["records"][0]["wallet"], "USDT");
    let wd = ok(&a.get("finance/list-withdraws").await);
    assert_eq!(wd["records"][0]["amount"], "0.10000000");

    // Broadcast edit, settings and sessions survive a restart with everything else.
    let bc = ok(&a
        .post(
            "subaccounts/broadcast-create",
            "title=Hello&body=Welcome%20all",
        )
        .await);
    let e = ok(&a
        .get(&format!(
            "subaccounts/broadcast-edit?id={}&title=Changed&body=New%20body",
            bc["id"]
        ))
        .await);
    assert_eq!(e["title"], "Changed");
    refused(
        &a.get("subaccounts/broadcast-edit?id=5&title=Changed&body=New%20body")
            .await,
        "id",
    );
    ok(&a.get("user/settings?timezone=Asia/Tokyo").await);
    ok(&a
        .post("subscriptions/enable-shared-server", "region=Singapore")
        .await);
    ok(&a.get("subscriptions/change-package?id=1").await);

    let (dir, clock) = env.stop().await;
    let env = Env::on(dir, clock).await;
    let a = Signer {
        addr: env.server.addr,
        step: 1000.into(),
        ..a
    };
    assert_eq!(ok(&a.get("user/settings").await)["timezone"], "Asia/Tokyo");
    assert_eq!(
        ok(&a.get("subscriptions/details").await)["subscription"]["name"],
        "Pro"
    );
    assert_eq!(
        ok(&a.post("subscriptions/list-shared-servers", "").await)["total"],
        1
    );
    assert_eq!(ok(&a.get("subscriptions/invoices").await)["total"], 2);
    assert_eq!(ok(&a.get("finance/list-withdraws").await)["total"], 1);
    let s = ok(&a.post("user/active-sessions", "request=list").await);
    assert_eq!(s["sessions"][0]["status"], "active");
    assert_eq!(
        ok(&a.post("subaccounts/broadcast-list", "").await)["records"][0]["title"],
        "Changed"
    );
    env.stop().await;
}
