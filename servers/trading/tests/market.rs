//! Loopback tests of the market module: simulated books, symbols and exchanges, spreads
//! and market filters, on an injected clock (news, backtesting and the option calculator
//! are in `market_news.rs`).

mod common;

use common::market::*;
use common::*;

#[tokio::test]
async fn books_follow_the_clock_and_the_seed() {
    let a = market(7, None).await;
    let b = market(7, None).await;
    let c = market(8, None).await;
    let q = "code=binance-btcusdt,kraken-ethbtc";
    let (s, pa) = get(a.addr(), "public/fetch-symbol-price", q).await;
    assert_eq!(s, 200);
    let (_, pb) = get(b.addr(), "public/fetch-symbol-price", q).await;
    let (_, pc) = get(c.addr(), "public/fetch-symbol-price", q).await;
    assert_eq!(pa["data"], pb["data"], "same seed, same time, same books");
    assert_ne!(pa["data"], pc["data"], "another seed, other books");
    let bid = &pa["data"]["binance-btcusdt"]["bids"];
    let ask = &pa["data"]["binance-btcusdt"]["asks"];
    assert!(num(&bid["price"]) < num(&ask["price"]));
    assert_eq!(bid["time"], NOW / 1000);
    assert!(pa["data"]["notes"].is_string());

    a.set(NOW + 60_000);
    let (_, later) = get(a.addr(), "public/fetch-symbol-price", q).await;
    assert_ne!(
        later["data"], pa["data"],
        "the book moves when the clock moves"
    );
    assert_eq!(
        later["data"]["binance-btcusdt"]["bids"]["time"],
        NOW / 1000 + 60
    );

    // Unknown codes: noted when some are known, refused when none is.
    let (_, mixed) = get(
        a.addr(),
        "public/fetch-symbol-price",
        "code=binance-btcusdt,nowhere-x",
    )
    .await;
    assert!(
        mixed["data"]["notes"]
            .as_str()
            .unwrap()
            .contains("nowhere-x")
    );
    assert!(mixed["data"].get("nowhere-x").is_none());
    let (s, v) = get(a.addr(), "public/fetch-symbol-price", "code=nowhere-x").await;
    refused(s, &v, "code");
}

#[tokio::test]
async fn at_most_ten_codes_pairs_and_terms() {
    let m = market(7, None).await;
    let codes = ["binance-btcusdt"; 11].join(",");
    let (s, v) = get(
        m.addr(),
        "public/fetch-symbol-price",
        &format!("code={codes}"),
    )
    .await;
    assert_eq!((s, v["data"]["code"].clone()), (422, 1440.into()));
    let ten = ["binance-btcusdt"; 10].join(",");
    assert_eq!(
        get(
            m.addr(),
            "public/fetch-symbol-price",
            &format!("code={ten}")
        )
        .await
        .0,
        200
    );

    let pairs = ["btcusdt"; 11].join(",");
    let (s, _) = get(m.addr(), "public/match-pair", &format!("code={pairs}")).await;
    assert_eq!(s, 422);
    let terms = (0..11)
        .map(|i| format!("t{i}"))
        .collect::<Vec<_>>()
        .join(",");
    for f in ["keyword_contains", "title_contains", "brief_contains"] {
        let (s, _) = post(
            m.addr(),
            "public/trending-news-data",
            &format!("date=2020-06-15&{f}={terms}"),
        )
        .await;
        assert_eq!(s, 422, "{f}");
    }
}

#[tokio::test]
async fn symbols_exchanges_and_status() {
    let m = market(7, None).await;
    let (_, all) = get(m.addr(), "system/symbols", "").await;
    assert_eq!(all["data"].as_object().unwrap().len(), 8);
    let (_, one) = post(m.addr(), "system/symbols", "exchange=kraken").await;
    let one = one["data"].as_object().unwrap();
    assert_eq!(one.keys().collect::<Vec<_>>(), ["kraken"]);
    let rec = &one["kraken"][0];
    for k in ["id", "symbol", "quote", "base", "min", "pp", "pa"] {
        assert!(rec.get(k).is_some(), "{k} in {rec}");
    }
    let (s, v) = post(m.addr(), "system/symbols", "exchange=nowhere").await;
    refused(s, &v, "exchange");

    let (_, ex) = get(m.addr(), "system/exchanges", "").await;
    assert_eq!(ex["data"][0]["code"], "binance");
    let (_, st) = get(m.addr(), "system/status", "").await;
    let st = st["data"].as_array().unwrap();
    assert_eq!(st.len(), 10);
    assert!(st.iter().any(|c| c["status"] == "running"));
    assert!(st.iter().all(|c| c["last_checked"] == NOW));

    let (_, h) = get(m.addr(), "system/exchange-health", "").await;
    assert_eq!(h["data"]["time_now"], NOW / 1000);
    let last = h["data"]["last_issue"].as_u64().unwrap();
    assert!(last <= NOW / 1000 && last + 6 * 86_400 > NOW / 1000);

    let (_, r) = get(m.addr(), "system/rates", "").await;
    assert_eq!(r["data"]["rates"]["USD"], 1.0);
    assert!(num(&r["data"]["rates"]["BTC"]) > 1000.0);

    let (_, u) = get(m.addr(), "system/unique-symbols", "").await;
    let btc = u["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["symbol"] == "BTC/USDT")
        .unwrap()
        .clone();
    assert_eq!(btc["exchanges"].as_array().unwrap().len(), 4);

    let (_, a) = post(
        m.addr(),
        "system/list-announcements",
        "limit=3&pagenumber=2",
    )
    .await;
    assert_eq!(a["data"]["showing"], 3);
    let recs = a["data"]["records"].as_array().unwrap();
    assert!(
        recs[0]["id"].as_u64() > recs[1]["id"].as_u64(),
        "newest first"
    );
    assert!(
        recs.iter()
            .all(|r| r["time"].as_u64().unwrap() <= NOW / 1000)
    );

    let (_, xs) = post(m.addr(), "exchangeindex/symbols", "exchange=okex&limit=2").await;
    assert_eq!(xs["data"]["total"], 5);
    assert_eq!(xs["data"]["showing"], 2);
    let (s, v) = post(m.addr(), "exchangeindex/symbols", "exchange=nowhere").await;
    refused(s, &v, "exchange");
    let (_, ie) = get(m.addr(), "public/exchange-information", "").await;
    assert!(
        ie["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| num(&e["rating"]) >= 1.0)
    );
}

#[tokio::test]
async fn spread_candles_are_ascending_and_price_is_ask_minus_bid() {
    let m = market(7, None).await;
    // On a minute boundary the newest candle has one sample: the books of that second.
    let t = NOW - NOW % 60_000;
    m.set(t);
    let combo = "combination=binance-btcusdt%2Bokex-btcusdt";
    let (s, latest) = post(
        m.addr(),
        "public/fetch-spread-data",
        &format!("{combo}&latestonly=true"),
    )
    .await;
    assert_eq!(s, 200);
    let latest = latest["data"].as_array().unwrap().clone();
    assert_eq!(latest.len(), 1);
    let (_, p) = get(
        m.addr(),
        "public/fetch-symbol-price",
        "code=binance-btcusdt,okex-btcusdt",
    )
    .await;
    let ask = num(&p["data"]["binance-btcusdt"]["asks"]["price"]);
    let bid = num(&p["data"]["okex-btcusdt"]["bids"]["price"]);
    let c = &latest[0];
    assert!((num(&c["price"]["open"]) - (ask - bid)).abs() < 1e-6, "{c}");
    assert!((num(&c["ratio"]["close"]) - ask / bid).abs() < 1e-6, "{c}");
    assert_eq!(c["price"]["time"], t / 1000);

    m.set(t + 600_000);
    let (_, day) = post(m.addr(), "public/fetch-spread-data", combo).await;
    let day = day["data"].as_array().unwrap();
    let day_start = t / 1000 - (t / 1000) % 86_400;
    assert_eq!(day[0]["price"]["time"], day_start);
    assert_eq!(day.len() as u64, (t / 1000 + 600 - day_start) / 60 + 1);
    for w in day.windows(2) {
        assert!(w[0]["price"]["time"].as_u64() < w[1]["price"]["time"].as_u64());
    }
    for c in day {
        for k in ["price", "ratio"] {
            let (o, cl, h, l) = (
                num(&c[k]["open"]),
                num(&c[k]["close"]),
                num(&c[k]["high"]),
                num(&c[k]["low"]),
            );
            assert!(l <= o && o <= h && l <= cl && cl <= h, "{c}");
        }
    }
    // A past date gives the whole day; a future one is refused.
    let (_, past) = post(
        m.addr(),
        "public/fetch-spread-data",
        &format!("{combo}&date=2020-06-01"),
    )
    .await;
    assert_eq!(past["data"].as_array().unwrap().len(), 1440);
    let (s, v) = post(
        m.addr(),
        "public/fetch-spread-data",
        &format!("{combo}&date=2030-01-01"),
    )
    .await;
    refused(s, &v, "date");
    // So is a day before the simulated history (2015-01-01), also one before 1970.
    for date in ["2014-12-31", "1970-01-01", "1969-12-31"] {
        let (s, v) = post(
            m.addr(),
            "public/fetch-spread-data",
            &format!("{combo}&date={date}"),
        )
        .await;
        refused(s, &v, "date");
        let error = v["missing_information"][0]["error"]
            .as_str()
            .unwrap_or_default();
        assert!(
            error.contains("History starts at 2015-01-01"),
            "{date}: {v}"
        );
    }
    let (s, v) = post(
        m.addr(),
        "public/fetch-spread-data",
        "combination=binance-btcusdt%2Bnowhere-x",
    )
    .await;
    refused(s, &v, "combination");
}

#[tokio::test]
async fn market_filters() {
    let m = market(7, None).await;
    let (_, t) = post(
        m.addr(),
        "public/bitcoin-price-tracker",
        "interval=250&symbol_filter=kraken",
    )
    .await;
    let bids = t["data"]["bids"].as_object().unwrap();
    assert_eq!(
        bids.keys().collect::<Vec<_>>(),
        ["kraken-btcusd", "kraken-ethbtc"]
    );
    assert_eq!(t["data"]["lastupdated"], NOW - NOW % 250);
    assert_eq!(bids["kraken-btcusd"].as_array().unwrap().len(), 3);
    let (_, all) = post(m.addr(), "public/bitcoin-price-tracker", "").await;
    assert!(all["data"]["asks"].as_object().unwrap().len() > 8);
    let (s, _) = post(m.addr(), "public/bitcoin-price-tracker", "interval=333").await;
    assert_eq!(s, 422);

    let (_, tr) = post(
        m.addr(),
        "public/fetch-symbol-trades",
        "symbol=binance-btcusdt&side=bids",
    )
    .await;
    let tr = tr["data"].as_array().unwrap();
    assert!(!tr.is_empty());
    assert!(
        tr.iter()
            .all(|x| x["side"] == "sell" && x["code"] == "binance-btcusdt")
    );
    assert!(
        tr.windows(2)
            .all(|w| w[0]["time_ms"].as_u64() >= w[1]["time_ms"].as_u64())
    );
    let (_, both) = post(
        m.addr(),
        "public/fetch-symbol-trades",
        "symbol=binance-btcusdt",
    )
    .await;
    assert!(both["data"].as_array().unwrap().len() > tr.len());
    let (s, v) = post(m.addr(), "public/fetch-symbol-trades", "symbol=nowhere-x").await;
    refused(s, &v, "symbol");

    let (_, sl) = post(
        m.addr(),
        "public/spreads-list",
        "spread_includes=kraken-btcusd",
    )
    .await;
    let combos = sl["data"]["combinations"].as_array().unwrap();
    assert_eq!(sl["data"]["total"], 6);
    assert!(
        combos
            .iter()
            .all(|c| c.as_str().unwrap().contains("kraken-btcusd"))
    );
    let (_, full) = post(m.addr(), "public/spreads-list", "").await;
    assert!(full["data"]["total"].as_u64().unwrap() > 50);
    assert_eq!(
        full["data"]["showing"],
        100.min(full["data"]["total"].as_u64().unwrap())
    );

    let (_, mp) = post(m.addr(), "public/match-pair", "code=ethbtc,dogeusdt,zzz").await;
    assert_eq!(mp["data"]["ETHBTC"]["count"], 5);
    assert_eq!(
        mp["data"]["ETHBTC"]["possible_combinations"]
            .as_array()
            .unwrap()
            .len(),
        20
    );
    assert_eq!(mp["data"]["ZZZ"]["count"], 0);
    assert_eq!(
        mp["data"]["DOGEUSDT"]["detail"]["binance"]["symbol"],
        "DOGE/USDT"
    );

    // Arbitrage rows are positive after fees and consistent with the books.
    let mut found = false;
    for step in 0..30u64 {
        m.set(NOW + step * 3_600_000);
        let (_, a) = post(m.addr(), "public/realtime-bitcoin-profit", "limit=5").await;
        for r in a["data"]["records"].as_array().unwrap() {
            found = true;
            let cost = num(&r["buy"]["price"]) * (1.0 + num(&r["buy"]["fee"]));
            let got = num(&r["sell"]["price"]) * (1.0 - num(&r["sell"]["fee"]));
            assert!(got > cost && num(&r["return_percent"]) > 0.0, "{r}");
            assert_ne!(r["buy"]["exchange"], r["sell"]["exchange"]);
        }
    }
    assert!(found, "some hour of the day has an opportunity");

    let (s, chart) = post(
        m.addr(),
        "public/tradingview-charts",
        "symbol=kraken-btcusd",
    )
    .await;
    assert_eq!(s, 200);
    assert!(
        chart["data"]["include"]
            .as_str()
            .unwrap()
            .contains("<script>")
    );
    let (_, w) = get(m.addr(), "public/supported-wallets", "").await;
    assert!(
        w["data"]["supported"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["symbol"] == "BTC" && x["decimals"] == 8)
    );
}
