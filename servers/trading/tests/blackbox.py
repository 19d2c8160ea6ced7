#!/usr/bin/env python3
"""Black-box test of trading-api with an independent client (standard library only).

The client signs requests the way the executium SDKs do: header `Key`, header
`Authorization` = HS256 token over {"nonce": N} with N = round(time * 10^7). It starts the
real binary on 127.0.0.1 (port 0), drives it through the public and account endpoints,
restarts it on the same data directory and checks that keys and nonce memory survived.

usage: blackbox.py PATH/TO/trading-api
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tclient import FAILURES, Client, check, envelope_ok, start, stop  # noqa: E402


def main():
    binary = os.path.abspath(sys.argv[1])
    data_dir = tempfile.mkdtemp(prefix="trading-blackbox-")
    try:
        out = subprocess.run(
            [binary, "create-key", "--data-dir", data_dir, "--name", "alice"],
            check=True, capture_output=True, text=True,
        ).stdout
        creds = json.loads(out)
        check(set(creds) == {"key", "secret"}, "create-key prints key and secret")
        bad_plan = subprocess.run(
            [binary, "create-key", "--data-dir", data_dir, "--name", "bob", "--plan", "Gold"],
            capture_output=True, text=True,
        )
        check(bad_plan.returncode != 0 and "Free" in bad_plan.stderr, "unknown plan is refused, known plans listed")

        proc, base = start(binary, data_dir)
        try:
            anon = Client(base)
            alice = Client(base, creds["key"], creds["secret"])

            status, body = anon.call("GET", "system/timestamp")
            check(status == 200, "timestamp answers 200")
            envelope_ok(status, body, "system/timestamp")
            check(abs(body["data"]["milliseconds"] - time.time() * 1000) < 60_000, "server clock is sane")

            status, body = anon.call("GET", "system/ep")
            check(status == 200 and len(body["data"]) == 180, "system/ep lists the catalogue")

            status, body = anon.call("GET", "subscriptions/details")
            check((status, body["data"]["code"]) == (401, 2001), "keyless call answers 2001")

            status, body = alice.call("GET", "subscriptions/details")
            check(status == 200, f"signed call answers 200 ({body.get('data')})")
            envelope_ok(status, body, "subscriptions/details")
            check(body["meta"].get("auth_success") is True, "meta.auth_success")
            check(body["meta"].get("rateLimits", {}).get("minute") == 60, "meta.rateLimits.minute")

            used = alice.last_nonce
            status, body = alice.call("GET", "subscriptions/details", nonce=used)
            check((status, body["data"]["code"]) == (401, 2011), "replayed nonce answers 2011")

            wrong = Client(base, creds["key"], "not-the-secret")
            status, body = wrong.call("GET", "subscriptions/details")
            check(body["data"]["code"] == 2000, "wrong secret answers 2000")

            status, body = alice.call("POST", "user/close-account", {"reason": "short"})
            check(status == 422 and body["data"]["code"] == 1440, "close-account validates first")
            check(body.get("missing_parameters") == ["password"], "missing password named")
            check(body.get("incorrect_value_lengths") == ["reason minimum length 10"], "short reason named")

            status, body = alice.call("POST", "user/close-account", {"reason": "moving elsewhere", "password": "hunter22"})
            check((status, body["data"]["code"]) == (403, 2750), "close-account answers 2750/403")

            # Query string beats body.
            url_params = {"milliseconds": "1000"}
            req = urllib.request.Request(
                f"{base}/api/v2/system/ping?" + urllib.parse.urlencode(url_params),
                data=b"milliseconds=5", method="POST",
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
            with urllib.request.urlopen(req, timeout=10) as resp:
                check(json.loads(resp.read())["data"]["your_sent_ms"] == 1000, "query string wins")

            # Account resources, end to end.
            status, body = alice.call("POST", "exchange-api-keys/add", {
                "exchange": "binance", "label": "main", "token": "tok-12345", "secret": "very-secret-value"})
            check(status == 200 and body["data"]["label"] == "main", f"exchange key stored ({body.get('data')})")
            check("very-secret-value" not in json.dumps(body), "exchange secret is not echoed")
            status, body = alice.call("POST", "exchange-api-keys/add", {"exchange": "binance", "label": "x"})
            check(body.get("missing_parameters") == ["token", "secret"], "missing exchange-key fields named")
            check(body.get("incorrect_value_lengths") == ["label minimum length 2"], f"short label named ({body})")
            status, body = alice.call("POST", "public/trending-news-add-keyword", {"name": "halving"})
            keyword_id = body["data"]["id"]
            check(status == 200, "news keyword stored")
            status, body = alice.call("POST", "public/trending-news-add-keyword", {"name": "HALVING"})
            check(status == 422, "duplicate keyword refused")
            article = {"title": "A title of eighteen+", "brief": "b" * 30, "body": "x" * 300, "publishdate": "1599615673"}
            status, body = alice.call("POST", "articles/create", article)
            check(status == 200, f"article stored ({body.get('data')})")
            status, body = alice.call("POST", "articles/create", dict(article, body="too short"))
            check(body.get("incorrect_value_lengths") == ["body minimum length 300"], "article body minimum")
            for i in range(3):
                alice.call("POST", "subaccounts/broadcast-create", {"title": f"notice {i}", "body": "hello all"})
            status, body = alice.call("POST", "subaccounts/broadcast-list", {"limit": 2})
            titles = [r["title"] for r in body["data"]["records"]]
            check(titles == ["notice 2", "notice 1"] and body["data"]["total"] == 3, f"broadcasts newest first ({titles})")
            status, body = alice.call("POST", "subaccounts/broadcast-list", {"limit": 2, "pagenumber": 2})
            check([r["title"] for r in body["data"]["records"]] == ["notice 0"], "second page")

            # The generic resources nobody else's test drives.
            status, body = alice.call("POST", "exchange-api-keys/list")
            key_id = body["data"]["records"][0]["id"]
            status, body = alice.call("POST", "exchange-api-keys/edit", {"id": key_id, "label": "renamed"})
            check(status == 200 and body["data"]["label"] == "renamed", f"exchange key renamed ({body.get('data')})")
            status, body = alice.call("POST", "exchange-api-keys/edit", {"id": 999999, "label": "renamed"})
            check((status, body["data"]["code"]) == (422, 1440), "editing someone else's key is refused")
            status, body = alice.call("POST", "exchange-api-keys/list")
            check(body["data"]["records"][0]["label"] == "renamed", "the new label is listed")
            status, body = alice.call("POST", "strategy/create-tab", {"name": "scalping"})
            check(status == 200 and body["data"]["name"] == "scalping", "strategy tab stored")
            status, body = alice.call("POST", "strategy/create-profile", {"name": "breakout", "description": "first"})
            profile_id = body["data"]["id"]
            status, body = alice.call("GET", "strategy/list-profiles")
            names = [r["name"] for r in (body["data"] if isinstance(body["data"], list) else body["data"].get("records", []))]
            check(status == 200 and "breakout" in names, f"profile listed ({body.get('data')})")
            status, body = alice.call("POST", "strategy/save-template", {"copy_strategy_id": profile_id, "label": ""})
            check(status == 200 and body["data"].get("label") == "breakout", f"blank template label takes the profile name ({body.get('data')})")
            status, body = alice.call("GET", "strategy/list-templates")
            check(status == 200 and any(t.get("label") == "breakout" for t in body["data"]), "template listed")
            status, body = alice.call("POST", "strategy/add-watchlist-item", {"code": "binance-btcusdt"})
            check(status == 200 and body["data"]["code"] == "binance-btcusdt", "watchlist item stored")
            item_id = body["data"]["id"]
            status, body = alice.call("GET", "strategy/list-watchlist")
            check(status == 200 and [w["code"] for w in body["data"]] == ["binance-btcusdt"], "watchlist listed")
            status, body = alice.call("POST", "strategy/delete-watchlist-item", {"id": item_id})
            check(status == 200, "watchlist item deleted")
            status, body = alice.call("GET", "strategy/list-watchlist")
            check(body["data"] == [], "watchlist empty after the delete")
            status, body = alice.call("POST", "articles/list")
            article_id = body["data"]["records"][0]["id"]
            status, body = alice.call("POST", "articles/edit", dict(article, id=article_id, title="An edited title, 18+"))
            check(status == 200 and body["data"]["title"] == "An edited title, 18+", "article edited")
            status, body = alice.call("POST", "articles/create", dict(article, title="A second article here"))
            second_article = body["data"]["id"]
            status, body = alice.call("POST", "articles/delete", {"id": second_article})
            check(status == 200, "article deleted")
            status, body = alice.call("POST", "articles/delete", {"id": second_article})
            check((status, body["data"]["code"]) == (422, 1440), "deleting it twice is refused")
            status, body = anon.call("GET", "system/endpoints")
            check(status == 200 and len(body["data"]) == 180 and body["data"][0]["path"] == "system/timestamp", "system/endpoints lists the catalogue")
            status, body = anon.call("POST", "system/ping", {"milliseconds": 1000})
            check(status == 200 and body["data"]["your_sent_ms"] == 1000 and body["data"]["difference"] > 0, "ping measures the difference")
            status, body = anon.call("GET", "system/list-validation-functions")
            check(status == 200 and "is_valid_symbol" in body["data"] and "is_email" in body["data"], "validation functions listed")

            status, body = anon.call("GET", "no/such/endpoint")
            check((status, body["data"]["code"]) == (404, 2500), "unknown endpoint answers 404/2500")
            status, body = anon.call("GET", "system/ping")
            check(status == 200, "a POST endpoint called without input by GET answers (as the SDKs call it)")
            status, body = anon.call("DELETE", "system/ping")
            check(status == 405 and body["meta"]["status"] == 405, "a method neither GET nor POST answers 405")

            status, body = anon.call("GET", "openapi.json")
            check(len(body.get("paths", {})) == 180, "openapi.json lists every path")
        finally:
            stop(proc)

        # A restart keeps the key and its nonce memory.
        proc, base = start(binary, data_dir)
        try:
            alice = Client(base, creds["key"], creds["secret"])
            status, body = alice.call("GET", "subscriptions/details", nonce=used)
            check(body["data"]["code"] == 2011, "nonce memory survives a restart")
            status, body = alice.call("GET", "subscriptions/details")
            check(status == 200, "key survives a restart")
            status, body = alice.call("POST", "exchange-api-keys/list")
            check(body["data"]["total"] == 1 and body["data"]["records"][0]["label"] == "renamed", "exchange keys survive a restart")
            status, body = alice.call("POST", "public/trending-news-list-my-keywords")
            check([r["name"] for r in body["data"]["records"]] == ["halving"], "keywords survive a restart")
            status, body = alice.call("POST", "public/trending-news-remove-keyword", {"keywordid": keyword_id})
            check(status == 200, "keyword removed")
            status, body = alice.call("POST", "articles/list")
            check(body["data"]["total"] == 1, "articles survive a restart")
        finally:
            stop(proc)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)

    if FAILURES:
        print(f"{len(FAILURES)} black-box check(s) failed")
        sys.exit(1)
    print("trading-api black-box: all checks passed")


if __name__ == "__main__":
    main()
