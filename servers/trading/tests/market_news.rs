//! Loopback tests of the market module's news archive, backtesting and option calculator,
//! on an injected clock.

mod common;

use common::market::*;
use common::*;
use trading_server::store::Store;

#[tokio::test]
async fn news_archive_filters_and_impact() {
    let m = market(7, None).await;
    let today = "2020-06-15";
    let (s, v) = post(
        m.addr(),
        "public/trending-news-data",
        &format!("date={today}"),
    )
    .await;
    assert_eq!(s, 200);
    let list = v["data"].as_array().unwrap().clone();
    assert!(!list.is_empty());
    let a = list.last().unwrap().clone();
    assert_eq!(a["date"]["format1"], today);
    for k in [
        "id", "title", "brief", "keywords", "url", "source", "image", "domain", "author", "tone",
    ] {
        assert!(a.get(k).is_some(), "{k}");
    }
    assert_eq!(a["price_impact_120s"]["status"], "Subscription required.");

    // The 3600 s impact is pending right after publication, compiled an hour later.
    let published = a["date"]["time_published"].as_u64().unwrap();
    m.set((published + 5) * 1000);
    let (_, v) = post(
        m.addr(),
        "public/trending-news-data",
        &format!("date={today}"),
    )
    .await;
    let early = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == a["id"])
        .unwrap()
        .clone();
    assert_eq!(early["price_impact_3600s"]["status"], "7 pending");
    assert_eq!(
        early["price_impact_3600s"]["data"]["btcusdt"]["status"],
        "pending"
    );
    m.set((published + 3600) * 1000);
    let (_, v) = post(
        m.addr(),
        "public/trending-news-data",
        &format!("date={today}"),
    )
    .await;
    let late = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == a["id"])
        .unwrap()
        .clone();
    let imp = &late["price_impact_3600s"]["data"]["btcusdt"];
    assert_eq!(imp["status"], "compiled");
    assert!((num(&imp["after"]) - num(&imp["before"]) - num(&imp["difference"])).abs() < 1e-6);
    m.set(NOW);

    // Filters: each narrows to matching articles.
    let kw = a["keywords"]
        .as_str()
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .to_owned();
    let (_, v) = post(
        m.addr(),
        "public/trending-news-data",
        &format!("date={today}&keyword_contains={kw}"),
    )
    .await;
    assert!(
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["keywords"].as_str().unwrap().contains(&kw))
    );
    let (_, v) = post(
        m.addr(),
        "public/trending-news-data",
        &format!("date={today}&exclude_keywords={kw}"),
    )
    .await;
    assert!(
        v["data"].as_array().unwrap().iter().all(|x| !x["keywords"]
            .as_str()
            .unwrap()
            .split(',')
            .any(|k| k == kw))
    );
    let word = a["title"]
        .as_str()
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_lowercase();
    let (_, v) = post(
        m.addr(),
        "public/trending-news-data",
        &format!("date={today}&title_contains={word},zzzz"),
    )
    .await;
    let hits = v["data"].as_array().unwrap();
    assert!(
        !hits.is_empty()
            && hits
                .iter()
                .all(|x| x["title"].as_str().unwrap().to_lowercase().contains(&word))
    );
    let (_, v) = post(
        m.addr(),
        "public/trending-news-data",
        &format!("date={today}&brief_contains=zzzzqq"),
    )
    .await;
    assert_eq!(v["data"].as_array().unwrap().len(), 0);
    let (s, v) = post(m.addr(), "public/trending-news-data", "date=2021-01-01").await;
    refused(s, &v, "date");
    let (s, v) = post(m.addr(), "public/trending-news-data", "date=2019-01-01").await;
    refused(s, &v, "date");

    let (_, src) = get(m.addr(), "public/trending-news-sources", "").await;
    let sources = src["data"].as_array().unwrap();
    assert_eq!(sources.len(), 10);
    let (_, st) = get(m.addr(), "public/trending-news-statistics", "").await;
    let st = &st["data"];
    assert!(st["total_articles_found"].as_u64().unwrap() >= 200);
    assert!(st["history"]["last_7_days"].as_u64() <= st["history"]["last_30_days"].as_u64());
    assert!(st["last_update"].as_u64().unwrap() <= NOW / 1000);

    let name = a["source"].as_str().unwrap();
    let (s, si) = post(
        m.addr(),
        "public/trending-news-source-impact",
        &format!("source_contains={name}"),
    )
    .await;
    assert_eq!(s, 200);
    let per = &si["data"]["btcusdt"][name];
    assert!(per["total_articles"].as_u64().unwrap() > 0);
    for b in per["top_ranking_bull"].as_array().unwrap() {
        assert!(num(&b["diff_btcusdt"]) > 0.0);
    }
    for b in per["top_ranking_bear"].as_array().unwrap() {
        assert!(num(&b["impact"]) < 0.0);
    }
    // Part of the name, in another case, finds the same publication (#29); a part
    // several names share answers each of them.
    let part = name.rsplit(' ').next().unwrap().to_uppercase();
    let (s, by_part) = post(
        m.addr(),
        "public/trending-news-source-impact",
        &format!("source_contains=+{part}+"),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(by_part["data"], si["data"]);
    let (s, several) = post(
        m.addr(),
        "public/trending-news-source-impact",
        "source_contains=e",
    )
    .await;
    assert_eq!(s, 200);
    assert!(several["data"]["btcusdt"].as_object().unwrap().len() > 1);
    let (s, v) = post(
        m.addr(),
        "public/trending-news-source-impact",
        "source_contains=Nobody",
    )
    .await;
    refused(s, &v, "source_contains");

    let (_, w) = post(
        m.addr(),
        "public/trending-news-watchlist",
        "keyword_contains=btc",
    )
    .await;
    let w = w["data"].as_array().unwrap();
    assert!(
        w.iter()
            .all(|i| i["keywords"].as_str().unwrap().contains("btc"))
    );
    assert!(w.iter().any(|i| i["keywords"] == "btcusdt"));

    let (_, rn) = post(
        m.addr(),
        "exchangeindex/relevant-news",
        "symbol=kraken-ethbtc",
    )
    .await;
    let arts = rn["data"]["articles"].as_array().unwrap();
    assert!(!arts.is_empty());
    assert!(arts.iter().all(|x| {
        let k = x["keywords"].as_str().unwrap();
        k.contains("eth") || k.contains("btc") || k.contains("bitcoin")
    }));
}

#[tokio::test]
async fn backtesting_is_reproducible_and_bounded() {
    let a = market(7, None).await;
    let b = market(7, None).await;
    let c = market(9, None).await;
    let from = NOW / 1000 - 7200;
    let q = format!(
        "exchange=binance&symbol=BTC/USDT&type=spot&timefrom={from}&timeto={}",
        from + 59
    );
    let (s, da) = post(a.addr(), "backtesting/orderbook-data", &q).await;
    assert_eq!(s, 200);
    assert_eq!(da["data"]["rows"], 60);
    let (_, db) = post(b.addr(), "backtesting/orderbook-data", &q).await;
    let (_, dc) = post(c.addr(), "backtesting/orderbook-data", &q).await;
    assert_eq!(da["data"], db["data"]);
    assert_ne!(da["data"], dc["data"]);
    let snap = &da["data"]["snapshots"][0];
    assert_eq!(snap["time"], from);
    assert_eq!(snap["bids"].as_array().unwrap().len(), 5);

    let too_big = format!(
        "exchange=binance&symbol=BTC/USDT&timefrom={from}&timeto={}",
        from + 3600
    );
    let (s, v) = post(a.addr(), "backtesting/orderbook-data", &too_big).await;
    refused(s, &v, "timeto");
    let future = format!(
        "exchange=binance&symbol=BTC/USDT&timefrom={from}&timeto={}",
        NOW / 1000 + 10
    );
    let (s, v) = post(a.addr(), "backtesting/orderbook-data", &future).await;
    refused(s, &v, "timeto");
    let (s, v) = post(
        a.addr(),
        "backtesting/orderbook-data",
        &q.replace("type=spot", "type=futures"),
    )
    .await;
    refused(s, &v, "type");
    let (s, v) = post(
        a.addr(),
        "backtesting/orderbook-data",
        &q.replace("BTC/USDT", "BTC/EUR"),
    )
    .await;
    refused(s, &v, "symbol");

    let ti = format!(
        "exchange=kraken&symbol=ETH/USD&interval=15m&timefrom={from}&timeto={}",
        from + 7000
    );
    let (s, v) = post(a.addr(), "backtesting/technical-indicators", &ti).await;
    assert_eq!(s, 200);
    let candles = v["data"]["candles"].as_array().unwrap();
    assert!(candles.len() >= 7);
    assert!(
        candles
            .windows(2)
            .all(|w| w[1]["time"].as_u64().unwrap() - w[0]["time"].as_u64().unwrap() == 900)
    );
    for k in candles {
        let (o, h, l, cl) = (
            num(&k["open"]),
            num(&k["high"]),
            num(&k["low"]),
            num(&k["close"]),
        );
        assert!(l <= o && o <= h && l <= cl && cl <= h);
        let rsi = num(&k["rsi"]);
        assert!((0.0..=100.0).contains(&rsi));
        assert!(num(&k["sma"]) > 0.0 && num(&k["ema"]) > 0.0, "warmed up");
    }
    let many = format!(
        "exchange=kraken&symbol=ETH/USD&interval=1m&timefrom={}&timeto={from}",
        from - 86_400
    );
    let (s, v) = post(a.addr(), "backtesting/technical-indicators", &many).await;
    refused(s, &v, "timeto");

    let (_, av) = get(a.addr(), "backtesting/availability", "").await;
    let av = av["data"].as_array().unwrap();
    assert_eq!(av.len(), 45);
    assert_eq!(av[0]["to"], NOW / 1000);
}

#[tokio::test]
async fn option_calculator_and_published_articles() {
    let dir = temp_dir("market-keys");
    let store = Store::open(&dir).unwrap();
    let k = store.create_key("alice", "Free", false, NOW).unwrap();
    drop(store);
    let m = market(7, Some(dir.clone())).await;
    let alice = Signer {
        addr: m.addr(),
        key: k.key,
        secret: k.secret,
        step: 0.into(),
    };
    let bs = "tests/black-scholes-implied-volatility-calculator";
    let r = alice
        .get(&format!(
            "{bs}?price=42&strike=40&time=0.5&rate=0.1&option_price=4.7594&type=call"
        ))
        .await;
    let v = envelope(&r, bs);
    assert_eq!(r.status, 200, "{v}");
    assert!(
        (num(&v["data"]["implied_volatility"]) - 0.2).abs() < 1e-3,
        "{v}"
    );
    assert!(num(&v["data"]["greeks"]["delta"]) > 0.5);
    let r = alice
        .get(&format!(
            "{bs}?option_price=10&type=call&price=100&strike=50"
        ))
        .await;
    let v = envelope(&r, bs);
    assert_eq!(r.status, 422, "{v}");
    assert_eq!(v["missing_information"][0]["parameter"], "option_price");
    let r = alice.get(bs).await;
    assert_eq!(r.status, 200, "defaults make a worked example");
    let (s, _) = get(m.addr(), bs, "").await;
    assert_eq!(s, 401);

    // system/information needs a key.
    let r = alice.get("system/information").await;
    let v = envelope(&r, "system/information");
    assert_eq!(
        v["data"]["supported"]["exchanges"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    assert_eq!(v["data"]["time"], NOW / 1000);

    // Articles: published ones (publishdate reached) are public, future ones are not.
    let body = "x".repeat(300);
    for (title, when) in [
        ("A published sandbox article", NOW / 1000 - 60),
        ("A scheduled sandbox article", NOW / 1000 + 3600),
    ] {
        let r = alice
            .post(
                "articles/create",
                &format!("title={title}&brief=A brief that is long enough to pass.&body={body}&publishdate={when}"),
            )
            .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    let (_, v) = post(m.addr(), "public/fetch-articles", "").await;
    let recs = v["data"]["records"].as_array().unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["title"], "A published sandbox article");
    let id = recs[0]["id"].as_i64().unwrap();
    let (_, v) = post(
        m.addr(),
        "public/fetch-articles",
        &format!("article_id={id}"),
    )
    .await;
    assert_eq!(v["data"]["total"], 1);
    let (_, v) = post(
        m.addr(),
        "public/fetch-articles",
        "title_contains=scheduled",
    )
    .await;
    assert_eq!(v["data"]["total"], 0);
    m.set(NOW + 7_200_000);
    let (_, v) = post(
        m.addr(),
        "public/fetch-articles",
        "title_contains=SCHEDULED",
    )
    .await;
    assert_eq!(v["data"]["total"], 1);
    let (s, v) = post(m.addr(), "public/fetch-articles", "article_id=99999").await;
    refused(s, &v, "article_id");

    // Keywords a user adds join the public watchlist.
    let r = alice
        .post("public/trending-news-add-keyword", "name=Sandbox Coin")
        .await;
    assert_eq!(r.status, 200);
    let (_, w) = post(
        m.addr(),
        "public/trending-news-watchlist",
        "keyword_contains=sandbox",
    )
    .await;
    assert_eq!(w["data"][0]["keywords"], "sandbox coin");
    assert_eq!(w["data"][0]["recategory"], "user");
    let _ = std::fs::remove_dir_all(&dir);
}
