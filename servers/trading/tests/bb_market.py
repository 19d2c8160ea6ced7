#!/usr/bin/env python3
"""Black-box test of the market endpoints of trading-api (standard library only).

Starts the real binary with a sandbox clock and a fixed seed, calls every market, news,
exchange-index, backtesting and calculator endpoint, and checks the content against what
the simulated market must give (books with bid below ask, candles in order, price spread
equal to ask minus bid, limits of ten, refusals with 1440/422). A second server with the
same seed must answer the same book history, a third with another seed a different one.

usage: bb_market.py PATH/TO/trading-api
"""

import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tclient import Client, advance, check, create_key, envelope_ok, finish, start, stop  # noqa: E402

# A fixed past hour (2024-01-01T00:00:00Z) for reproducibility checks.
FIXED = 1704067200


def refused(status, body, param, what):
    ok = status == 422 and body["data"].get("code") == 1440 and any(
        i.get("parameter") == param for i in body.get("missing_information", []))
    check(ok, f"{what}: refused with 1440/422 naming {param} ({status} {body.get('data')})")


def book_history(binary, seed):
    data_dir = tempfile.mkdtemp(prefix="trading-bb-market-seed-")
    proc, base = start(binary, data_dir, "--seed", str(seed), "--ip-per-minute", "0")
    try:
        status, body = Client(base).call("POST", "backtesting/orderbook-data", {
            "exchange": "kraken", "symbol": "BTC/USD", "type": "spot",
            "timefrom": FIXED, "timeto": FIXED + 29,
        })
        check(status == 200, f"orderbook-data for a fixed range answers 200 (seed {seed})")
        return body["data"]
    finally:
        stop(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


def system_checks(c, alice):
    status, body = c.call("GET", "system/rates")
    envelope_ok(status, body, "system/rates")
    rates = body["data"]["rates"]
    check(status == 200 and rates["USD"] == 1.0 and rates["BTC"] > 1000, "rates in USD from the feed")

    status, body = c.call("GET", "system/exchange-health")
    d = body["data"]
    check(status == 200 and d["last_issue"] <= d["time_now"], "exchange-health: last issue in the past")

    status, body = alice.call("GET", "system/information")
    check(status == 200 and len(body["data"]["supported"]["exchanges"]) == 8
          and "binance-btcusdt" in body["data"]["supported"]["symbols"], "information lists exchanges and symbols")
    status, body = c.call("GET", "system/information")
    check(status == 401, "information needs a key")

    status, body = c.call("POST", "system/symbols", {"exchange": "bitstamp"})
    recs = body["data"].get("bitstamp", [])
    check(status == 200 and list(body["data"]) == ["bitstamp"] and recs
          and set(recs[0]) == {"id", "symbol", "quote", "base", "min", "pp", "pa"}, "symbols filtered by exchange")
    status, body = c.call("GET", "system/symbols")
    check(status == 200 and len(body["data"]) == 8, "symbols of every exchange")
    status, body = c.call("GET", "system/symbols", {"exchange": "nowhere"})
    refused(status, body, "exchange", "symbols of an unknown exchange")

    status, body = c.call("GET", "system/status")
    names = [x["name"] for x in body["data"]]
    check(status == 200 and "api" in names and "exchange:kraken" in names
          and any(x["status"] == "running" for x in body["data"]), "status lists api, feed and exchanges")

    status, body = c.call("POST", "system/list-announcements", {"limit": 4})
    recs = body["data"]["records"]
    check(status == 200 and len(recs) == 4 and recs[0]["id"] > recs[1]["id"]
          and body["data"]["total"] >= 4, "announcements paged newest first")

    status, body = c.call("GET", "system/exchanges")
    check(status == 200 and {"code": "okex", "name": "OKEx"} in body["data"], "exchanges from the market")

    status, body = c.call("GET", "system/unique-symbols")
    eth = [x for x in body["data"] if x["symbol"] == "ETH/BTC"]
    check(status == 200 and eth and len(eth[0]["exchanges"]) == 5, "unique symbols with their exchanges")


def public_checks(c, base):
    status, body = c.call("GET", "public/spreads/data")
    rows = body["data"]
    check(status == 200 and rows and all(r["bid"] < r["ask"] and abs(r["spread"] - (r["ask"] - r["bid"])) < 1e-6
                                         for r in rows), "spreads data: bid below ask, spread = ask - bid")

    status, body = c.call("POST", "public/fetch-symbol-price", {"code": "binance-btcusdt,coinbasepro-ethusd"})
    d = body["data"]
    check(status == 200 and d["binance-btcusdt"]["bids"]["price"] < d["binance-btcusdt"]["asks"]["price"]
          and "notes" in d, "fetch-symbol-price: best bid and ask plus notes")
    before = d["binance-btcusdt"]
    advance(base, 120_000)
    status, body = c.call("GET", "public/fetch-symbol-price", {"code": "binance-btcusdt"})
    check(body["data"]["binance-btcusdt"] != before, "the book moves when the clock moves")
    status, body = c.call("GET", "public/fetch-symbol-price", {"code": ",".join(["binance-btcusdt"] * 11)})
    check(status == 422 and body["data"]["code"] == 1440, "more than ten codes refused")
    status, body = c.call("GET", "public/fetch-symbol-price", {"code": "nowhere-x"})
    refused(status, body, "code", "only unknown codes")

    status, body = c.call("POST", "public/bitcoin-price-tracker", {"interval": 500, "symbol_filter": "bitstamp"})
    d = body["data"]
    check(status == 200 and set(d["bids"]) == {"bitstamp-btcusd", "bitstamp-ethbtc"}
          and d["lastupdated"] % 500 == 0 and len(d["asks"]["bitstamp-btcusd"]) == 3, "price tracker filtered, on the interval grid")

    status, body = c.call("POST", "public/fetch-symbol-trades", {"symbol": "okex-btcusdt", "side": "asks"})
    check(status == 200 and body["data"] and all(t["side"] == "buy" for t in body["data"]), "trades filtered by side")
    status, body = c.call("POST", "public/fetch-symbol-trades", {})
    check(status == 200 and body["data"], "trades of every BTC market")

    found = False
    for _ in range(24):
        status, body = c.call("POST", "public/realtime-bitcoin-profit", {"limit": 3})
        check(status == 200, "realtime-bitcoin-profit answers")
        for r in body["data"]["records"]:
            found = True
            cost = r["buy"]["price"] * (1 + r["buy"]["fee"])
            got = r["sell"]["price"] * (1 - r["sell"]["fee"])
            check(got > cost and r["return_percent"] > 0, f"arbitrage row returns after fees: {r}")
        if found:
            break
        advance(base, 3_600_000)
    check(found, "an arbitrage opportunity within a day")

    status, body = c.call("GET", "public/exchange-information")
    check(status == 200 and len(body["data"]) == 8 and all(set(x) >= {"exchange", "status", "rating"} for x in body["data"]),
          "exchange information records")

    status, body = c.call("POST", "public/tradingview-charts", {"symbol": "binance-ethusdt"})
    check(status == 200 and "<script>" in body["data"]["include"], "chart include snippet")
    status, body = c.call("POST", "public/tradingview-charts", {"symbol": "nowhere-x"})
    refused(status, body, "symbol", "chart of an unknown code")

    status, body = c.call("POST", "public/match-pair", {"code": "btcusd,solusdt"})
    d = body["data"]
    check(status == 200 and d["BTCUSD"]["count"] == 4 and "Kraken" in d["BTCUSD"]["active"]
          and len(d["BTCUSD"]["possible_combinations"]) == 12 and d["SOLUSDT"]["detail"]["okex"]["symbol"] == "SOL/USDT",
          "match-pair")
    status, body = c.call("POST", "public/match-pair", {"code": ",".join(["btcusd"] * 11)})
    check(status == 422, "more than ten pairs refused")

    combo = "kraken-btcusd+bitstamp-btcusd"
    status, body = c.call("POST", "public/fetch-spread-data", {"combination": combo})
    rows = body["data"]
    times = [r["price"]["time"] for r in rows]
    check(status == 200 and rows and times == sorted(times) and len(set(times)) == len(times), "spread candles ascending")
    check(all(r[k]["low"] <= r[k]["open"] <= r[k]["high"] and r[k]["low"] <= r[k]["close"] <= r[k]["high"]
              for r in rows for k in ("price", "ratio")), "spread candles bounded by high and low")
    status, body = c.call("POST", "public/fetch-spread-data", {"combination": combo, "latestonly": "true"})
    check(status == 200 and len(body["data"]) == 1 and body["data"][0]["price"]["time"] == times[-1], "latestonly gives the newest")
    status, body = c.call("POST", "public/fetch-spread-data", {"combination": combo, "date": "2024-01-01"})
    check(status == 200 and len(body["data"]) == 1440, "a past day has 1440 minutes")

    status, body = c.call("POST", "public/spreads-list", {"spread_includes": "coinbasepro-ethbtc", "limit": 2})
    d = body["data"]
    check(status == 200 and d["total"] == 8 and d["showing"] == 2
          and all("coinbasepro-ethbtc" in x for x in d["combinations"]), "spreads-list filter and paging")

    status, body = c.call("GET", "public/bitcoin-information")
    d = body["data"]
    check(status == 200 and d["low_24h"] <= d["price_usd"] <= d["high_24h"] and d["markets"], "bitcoin information")

    status, body = c.call("GET", "public/supported-wallets")
    check(status == 200 and {"symbol": "ETH", "name": "Ethereum", "decimals": 18} in body["data"]["supported"],
          "supported wallets from the assets")


def impact_checks(arts, before, after):
    """An impact is compiled once its horizon has passed: the newest articles are still
    pending within their hour (yesterday's too, in the first hour of a UTC day). `before`
    and `after`: the server's clock (seconds; it runs on) around the call that got `arts`."""
    for art in arts:
        imp = art["price_impact_3600s"]
        published = art["date"]["time_published"]
        if after - published >= 3600 > before - published:
            continue  # the horizon passed during the call: either answer is right
        if before - published >= 3600:
            btc = imp.get("data", {}).get("btcusdt", {})
            check(imp["status"] == "compiled"
                  and abs(float(btc["after"]) - float(btc["before"]) - float(btc["difference"])) < 1e-6,
                  f"3600 s impact compiled: difference = after - before ({imp})")
        else:
            check(imp["status"].endswith("pending"), f"3600 s impact pending within its hour ({imp})")


def young_impact_checks(c, base):
    """Moves the sandbox clock on until an article is less than an hour old, then checks
    that day's impacts on both sides of the horizon."""
    for _ in range(96):
        now = advance(base, 1_800_000) // 1000
        day = time.strftime("%Y-%m-%d", time.gmtime(now))
        status, body = c.call("POST", "public/trending-news-data", {"date": day})
        arts = body["data"] if status == 200 else []
        if any(now - a["date"]["time_published"] < 3600 for a in arts):
            impact_checks(arts, now, advance(base, 0) // 1000)
            return
    check(False, "an article less than an hour old within two days")


def news_checks(c, alice, base):
    now = advance(base, 0) // 1000
    today = time.strftime("%Y-%m-%d", time.gmtime(now))
    yesterday = time.strftime("%Y-%m-%d", time.gmtime(now - 86400))
    status, body = c.call("POST", "public/trending-news-data", {"date": yesterday})
    arts = body["data"]
    check(status == 200 and arts, "news of yesterday")
    a = arts[0]
    check(a["date"]["format1"] == yesterday and a["url"].startswith("https://") and a["domain"].endswith(".example"),
          "article record")
    impact_checks(arts, now, advance(base, 0) // 1000)
    check(a["price_impact_600s"]["status"] == "Subscription required.", "other horizons need a subscription")
    kw = a["keywords"].split(",")[0]
    status, body = c.call("POST", "public/trending-news-data", {"date": yesterday, "keyword_contains": kw,
                                                               "exclude_keywords": "mining"})
    check(status == 200 and body["data"] and all(kw in x["keywords"] and "mining" not in x["keywords"].split(",")
                                                 for x in body["data"]), "keyword and exclude filters")
    status, body = c.call("POST", "public/trending-news-data", {"date": yesterday, "title_contains": "zzzz", "brief_contains": "a"})
    check(status == 200 and body["data"] == [], "title filter excludes everything")
    status, body = c.call("POST", "public/trending-news-data", {"date": today, "brief_contains": ",".join("abcdefghijk")})
    check(status == 422, "more than ten terms refused")
    status, body = c.call("POST", "public/trending-news-data", {"date": "2099-01-01"})
    refused(status, body, "date", "news of a future day")

    status, body = alice.call("POST", "public/trending-news-add-keyword", {"name": "orbital"})
    check(status == 200, "keyword added")
    status, body = c.call("POST", "public/trending-news-watchlist", {"keyword_contains": "orbit"})
    check(status == 200 and [x["keywords"] for x in body["data"]] == ["orbital"], "watchlist holds user keywords")
    status, body = c.call("POST", "public/trending-news-watchlist", {})
    check(status == 200 and any(x["keywords"] == "btcusdt" and x["article_count"] > 0 for x in body["data"]),
          "watchlist counts articles")

    status, body = c.call("GET", "public/trending-news-sources")
    sources = body["data"]
    check(status == 200 and len(sources) == 10 and a["source"] in sources, "sources")
    status, body = c.call("GET", "public/trending-news-statistics")
    d = body["data"]
    check(status == 200 and d["total_articles_found"] >= 200 and d["sources"] == 10
          and d["history"]["last_24_hours"] <= d["history"]["last_48_hours"], "statistics")
    status, body = c.call("POST", "public/trending-news-source-impact", {"source_contains": a["source"]})
    per = body["data"]["ethusdt"][a["source"]]
    check(status == 200 and per["total_articles"] > 0
          and all(float(x["diff_ethusdt"]) > 0 for x in per["top_ranking_bull"])
          and all(float(x["impact"]) < 0 for x in per["top_ranking_bear"]), "source impact rankings")
    status, body = c.call("POST", "public/trending-news-source-impact", {"source_contains": "Nobody Weekly"})
    refused(status, body, "source_contains", "unknown source")

    status, body = c.call("POST", "exchangeindex/relevant-news", {"symbol": "binance-dogeusdt"})
    check(status == 200 and body["data"]["articles"]
          and all("doge" in x["keywords"] for x in body["data"]["articles"]), "relevant news mention the asset")


def index_and_backtest_checks(c, alice, base):
    status, body = c.call("GET", "exchangeindex/announcements")
    check(status == 200 and isinstance(body["data"], list), "exchange index announcements")
    status, body = c.call("GET", "exchangeindex/exchanges")
    check(status == 200 and len(body["data"]) == 8 and all(1 <= x["rating"] <= 10 for x in body["data"]), "index exchanges")
    status, body = c.call("POST", "exchangeindex/symbols", {"exchange": "binance", "limit": 4, "pagenumber": 2})
    d = body["data"]
    check(status == 200 and d["total"] == 9 and d["showing"] == 4 and all(r["bid"] < r["ask"] for r in d["records"]),
          "index symbols paged")
    status, body = c.call("POST", "exchangeindex/symbols", {"exchange": "nowhere"})
    refused(status, body, "exchange", "index symbols of an unknown exchange")

    now = advance(base, 0) // 1000
    status, body = c.call("POST", "backtesting/technical-indicators", {
        "exchange": "binance", "symbol": "ETH/USDT", "type": "spot", "interval": "1h",
        "timefrom": now - 48 * 3600, "timeto": now})
    k = body["data"]["candles"]
    check(status == 200 and len(k) >= 48 and all(b["time"] - a["time"] == 3600 for a, b in zip(k, k[1:]))
          and all(0 <= x["rsi"] <= 100 and x["sma"] and x["ema"] for x in k), "hourly candles with indicators")
    status, body = c.call("POST", "backtesting/orderbook-data", {
        "exchange": "binance", "symbol": "ETH/USDT", "timefrom": now - 7200, "timeto": now})
    refused(status, body, "timeto", "orderbook range over an hour")
    status, body = c.call("POST", "backtesting/orderbook-data", {
        "exchange": "binance", "symbol": "ETH/USDT", "timefrom": now - 10, "timeto": now})
    snaps = body["data"]["snapshots"]
    check(status == 200 and len(snaps) == 11 and all(s["bids"][0][0] < s["asks"][0][0] for s in snaps), "recent snapshots")
    status, body = c.call("GET", "backtesting/availability")
    check(status == 200 and any(x["code"] == "kraken-solusd" and x["to"] >= now for x in body["data"]), "availability")

    bs = "tests/black-scholes-implied-volatility-calculator"
    status, body = alice.call("GET", bs, {"price": 42, "strike": 40, "time": 0.5, "rate": 0.1,
                                          "option_price": 0.8086, "type": "put"})
    check(status == 200 and abs(body["data"]["implied_volatility"] - 0.2) < 1e-3
          and body["data"]["greeks"]["delta"] < 0, f"implied volatility of a put ({body.get('data')})")
    status, body = alice.call("GET", bs, {"option_price": 200})
    refused(status, body, "option_price", "option price above the underlying")


def main():
    binary = os.path.abspath(sys.argv[1])
    data_dir = tempfile.mkdtemp(prefix="trading-bb-market-")
    try:
        creds = create_key(binary, data_dir, "alice")
        pro_creds = create_key(binary, data_dir, "paula", plan="Pro")
        proc, base = start(binary, data_dir, "--sandbox-clock", "--seed", "7", "--ip-per-minute", "0")
        try:
            anon = Client(base)
            alice = Client(base, creds["key"], creds["secret"])
            system_checks(anon, alice)
            public_checks(anon, base)
            news_checks(anon, alice, base)
            index_and_backtest_checks(anon, alice, base)

            # A signed call on a paid plan sees every impact horizon; Free sees the public one.
            pro = Client(base, pro_creds["key"], pro_creds["secret"])
            now = advance(base, 0) // 1000
            yesterday = time.strftime("%Y-%m-%d", time.gmtime(now - 86400))
            status, body = pro.call("POST", "public/trending-news-data", {"date": yesterday})
            # Past its 600 s horizon, which yesterday's newest article may not be yet.
            a = next((x for x in body["data"] if now - x["date"]["time_published"] >= 600), {}) \
                if status == 200 else {}
            check(a.get("price_impact_600s", {}).get("status") == "compiled"
                  and body["meta"].get("auth_success") is True, f"Pro sees every horizon ({a.get('price_impact_600s')})")
            status, body = alice.call("POST", "public/trending-news-data", {"date": yesterday})
            check(status == 200 and body["data"][0]["price_impact_600s"]["status"] == "Subscription required.",
                  "Free sees only the public horizon")
            wrong = Client(base, creds["key"], "not-the-secret")
            status, body = wrong.call("POST", "public/trending-news-data", {"date": yesterday})
            check((status, body["data"]["code"]) == (401, 2000), "a wrong secret on a public endpoint is refused")

            # Published articles of every user, visible without a key.
            article = {"title": "Sandbox market notes for today", "brief": "What the simulated books did this morning.",
                       "body": "b" * 320, "publishdate": advance(base, 0) // 1000 - 10}
            status, body = alice.call("POST", "articles/create", article)
            check(status == 200, "article created")
            status, body = anon.call("POST", "public/fetch-articles", {"title_contains": "market notes"})
            check(status == 200 and body["data"]["total"] == 1
                  and body["data"]["records"][0]["title"] == article["title"], "published article listed")

            # Last: it moves the sandbox clock on by up to two days.
            young_impact_checks(anon, base)
        finally:
            stop(proc)

        first = book_history(binary, 7)
        check(first == book_history(binary, 7), "same seed, same book history")
        check(first != book_history(binary, 8), "another seed, another book history")
        check(first["rows"] == 30 and first["snapshots"][0]["time"] == FIXED, "fixed range rows")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    finish("bb_market")


if __name__ == "__main__":
    main()
