#!/usr/bin/env python3
"""Black-box test of the marketplace, competitions, algorithm creator, support, calendar
and article-earnings endpoints (standard library only).

Starts the real binary with --sandbox-clock --seed 7, drives every endpoint of those areas
to a checked 200 answer and through its refusals, moves the clock with /sandbox/advance
instead of sleeping, then restarts on the same data directory and checks that signals,
algorithms, tickets and reminders survived.

usage: bb_extras.py PATH/TO/trading-api
"""

import base64
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tclient import Client, advance, check, create_key, envelope_ok, finish, start, stop  # noqa: E402

CODE = "binance-btcusdt"
HOUR = 3_600_000


def ok(who, method, path, params=None):
    status, body = who.call(method, path, params)
    envelope_ok(status, body, path)
    check(status == 200, f"{path} answers 200 ({status}: {json.dumps(body.get('data'))[:300]})")
    return body.get("data")


def refused(who, method, path, params, param, code=1440, status=422):
    st, body = who.call(method, path, params)
    envelope_ok(st, body, path)
    got = body.get("data", {}).get("code")
    check((st, got) == (status, code), f"{path} {params}: refused {status}/{code}, got {st}/{got}")
    if code == 1440:
        info = body.get("missing_information") or [{}]
        check(info[0].get("parameter") == param, f"{path}: refusal names {param}: {info}")
    return body


def payload(name, code=CODE, side="both"):
    doc = {"name": name, "code": code, "side": side,
           "description": "Black-box signal: opens and closes when the test says so."}
    return base64.b64encode(json.dumps(doc).encode()).decode()


def now(who):
    return ok(who, "GET", "system/timestamp")["milliseconds"]


def marketplace(alice, bob, base):
    sig = ok(alice, "POST", "marketplace/signals-add", {"key": "alice-dev", "payload": payload("BB momentum")})
    check(sig["name"] == "BB momentum" and sig["code"] == CODE and sig["id"] > 1000, f"signal stored: {sig}")
    sid = sig["id"]
    refused(alice, "POST", "marketplace/signals-add", {"key": "alice-dev", "payload": "?" * 120}, "payload")
    refused(alice, "POST", "marketplace/signals-add",
            {"key": "alice-dev", "payload": payload("Unknown coin", "binance-nosuchcoin")}, "payload")
    refused(alice, "POST", "marketplace/signals-add", {"key": "k", "payload": payload("x")}, None)
    other = ok(bob, "POST", "marketplace/signals-add", {"key": "bob-dev", "payload": payload("Bob short ETH", "kraken-ethusd", "sell")})

    edited = ok(alice, "POST", "marketplace/signals-edit", {"id": sid, "name": "BB momentum v2", "custom_1": "hourly"})
    check(edited["name"] == "BB momentum v2" and edited["custom_1"] == "hourly", f"signals-edit: {edited}")
    refused(bob, "POST", "marketplace/signals-edit", {"id": sid, "name": "stolen"}, "id")

    opened = ok(alice, "GET", "marketplace/signals-trigger", {"id": sid, "signal": "buy", "action": "open"})
    check(opened["status"] == "open" and opened["side"] == "buy" and opened["open_price"] > 0, f"trigger open: {opened}")
    refused(alice, "GET", "marketplace/signals-trigger", {"id": sid, "signal": "buy", "action": "open"}, "action")
    refused(alice, "GET", "marketplace/signals-trigger", {"id": sid, "signal": "buy"}, None)
    refused(bob, "GET", "marketplace/signals-trigger", {"id": other["id"], "signal": "buy", "action": "open"}, "signal")
    pos = ok(alice, "GET", "marketplace/signals-position", {"id": sid})
    check(pos[0]["position"] == "long" and pos[0]["iteration"]["id"] == opened["id"], f"signals-position: {pos}")

    feed = ok(bob, "POST", "marketplace/signals-feed", {"id": sid})
    check(feed["delay_ms"] == 60000 and feed["records"][0]["iteration_children"] == [], f"feed delayed: {feed}")
    advance(base, 61_000)
    feed = ok(bob, "POST", "marketplace/signals-feed", {"code": CODE, "min_iterations": 1})
    check([r["id"] for r in feed["records"]] == [sid], f"feed filters by code and iterations: {feed}")
    check(feed["records"][0]["iteration_children"][0]["id"] == opened["id"], "feed shows the iteration after the delay")

    mv = ok(bob, "POST", "marketplace/signals-iteration-price-movement", {"id": sid, "iteration": opened["id"]})
    check(mv["open_price"] == opened["open_price"] and len(mv["points"]) >= 2, f"price movement: {mv}")
    refused(bob, "POST", "marketplace/signals-iteration-price-movement", {"id": sid, "iteration": 999999}, "iteration")

    closed = ok(alice, "GET", "marketplace/signals-trigger", {"id": sid, "signal": "sell", "action": "close"})
    check(closed["status"] == "closed" and closed["result_pct"] is not None, f"trigger close: {closed}")
    refused(alice, "GET", "marketplace/signals-trigger", {"id": sid, "signal": "sell", "action": "close"}, "action")
    # A second iteration, so that more/limit paging of iteration_children can be seen.
    ok(alice, "GET", "marketplace/signals-trigger", {"id": sid, "signal": "sell", "action": "open"})
    advance(base, 120_000)
    feed = ok(bob, "POST", "marketplace/signals-feed", {"id": sid, "more": "true", "limit": 1, "pagenumber": 2})
    kids = feed["records"][0]["iteration_children"]
    check(len(kids) == 1 and kids[0]["number"] == 1 and kids[0]["status"] == "closed", f"feed paging: {kids}")
    feed = ok(bob, "POST", "marketplace/signals-feed", {"id": sid})
    check(feed["records"][0]["iteration_children"][0]["number"] == 2, "feed default: newest iteration only")

    dev = ok(bob, "POST", "marketplace/signal-developer", {"id": sig["developer"]})
    check(dev["name"] == "alice" and dev["signals"][0]["id"] == sid and dev["statistics"]["closed"] == 1, f"developer: {dev}")
    refused(bob, "POST", "marketplace/signal-developer", {"id": 999999}, "id")

    sub = ok(bob, "GET", "marketplace/subscription-manage", {"id": sid, "action": "subscribe"})
    check(sub["subscribed"] is True and sub["subscribers"] == 1, f"subscribe: {sub}")
    refused(bob, "GET", "marketplace/subscription-manage", {"id": sid, "action": "subscribe"}, "action")
    refused(alice, "GET", "marketplace/subscription-manage", {"id": sid, "action": "subscribe"}, "id")
    info = ok(bob, "GET", "marketplace/subscription-information")
    check(len(info) == 1 and info[0]["signal_id"] == sid, f"subscription-information: {info}")
    bt = ok(bob, "GET", "marketplace/backtested-subscriptions")
    check(len(bt) == 1 and len(bt[0]["trades"]) == 1 and bt[0]["starting_balance"] == 1000, f"backtest: {bt}")
    r = bt[0]["trades"][0]["result_pct"]
    check(abs(bt[0]["final_balance"] - 1000 * (1 + r / 100)) < 0.02, "backtest compounds the result")
    feat = ok(bob, "GET", "marketplace/featured")
    check(feat[0]["id"] == sid and feat[0]["rank"] == 1 and feat[0]["subscribers"] == 1, f"featured: {feat[:1]}")

    ok(bob, "GET", "marketplace/subscription-manage", {"id": sid, "action": "unsubscribe"})
    refused(bob, "GET", "marketplace/subscription-manage", {"id": sid, "action": "unsubscribe"}, "action")
    refused(bob, "GET", "marketplace/subscription-information", {"id": sid}, "id")

    refused(bob, "POST", "marketplace/signal-reset", {"id": sid}, "id")
    reset = ok(bob, "POST", "marketplace/signal-reset", {"id": other["id"]})
    check(reset["iterations_deleted"] == 0, f"signal-reset: {reset}")
    refused(alice, "POST", "marketplace/signal-delete", {"id": other["id"]}, "id")
    gone = ok(bob, "POST", "marketplace/signal-delete", {"id": other["id"]})
    check(gone == {"id": other["id"], "deleted": True}, f"signal-delete: {gone}")
    refused(bob, "POST", "marketplace/signal-delete", {"id": other["id"]}, "id")
    return sid


def competitions(alice, bob):
    comps = ok(alice, "GET", "competitions/list")
    check([c["status"] for c in comps] == ["finished", "running", "upcoming", "upcoming"], f"competitions: {comps}")
    running, ahead = comps[1]["id"], comps[2]["id"]
    j = ok(alice, "GET", "competitions/join", {"id": running})
    check(j["enrolled"] is True and j["participants"] == 1, f"join: {j}")
    refused(alice, "GET", "competitions/join", {"id": running}, "id")
    refused(alice, "GET", "competitions/join", {"id": comps[0]["id"]}, "id")
    refused(alice, "GET", "competitions/join", {"id": ahead + 5}, "id")
    refused(alice, "GET", "competitions/leave", {"id": ahead}, "id")
    ok(alice, "GET", "competitions/join", {"id": ahead})
    left = ok(alice, "GET", "competitions/leave", {"id": ahead})
    check(left["enrolled"] is False and left["participants"] == 0, f"leave: {left}")
    refused(alice, "GET", "competitions/join", {}, None)
    comps = ok(bob, "GET", "competitions/list")
    check(comps[1]["enrolled"] is False and comps[1]["leaderboard"][0]["name"] == "alice", f"leaderboard: {comps[1]}")


def algorithms(alice, bob):
    a = ok(alice, "POST", "algorithm-creator/algorithm-add",
           {"name": "Breakout", "group_name": "Trend", "maximum_transactions_successful": "5"})
    aid = a["id"]
    check(a["published"] is False and a["conditions"] == 0, f"algorithm-add: {a}")
    u = ok(alice, "POST", "algorithm-creator/algorithm-update", {"id": aid, "name": "Breakout v2", "group_name": "Trend"})
    check(u["name"] == "Breakout v2", f"algorithm-update: {u}")
    refused(bob, "POST", "algorithm-creator/algorithm-update", {"id": aid, "name": "x", "group_name": "y"}, "id")
    v = ok(alice, "GET", "algorithm-creator/validate-algorithm", {"id": aid})
    check(v["valid"] is False and len(v["problems"]) == 2, f"validate empty: {v}")
    refused(alice, "GET", "algorithm-creator/publish-algorithm", {"id": aid}, "id")

    ops = ok(alice, "GET", "algorithm-creator/list-condition-operators")
    check("crosses_above" in [o["operator"] for o in ops], f"operators: {ops}")
    types = ok(alice, "GET", "algorithm-creator/list-order-types")
    check({"market", "limit"} <= {t["order_type"] for t in types}, f"order types: {types}")

    c = ok(alice, "GET", "algorithm-creator/condition-add", {"algorithm_id": aid, "code": CODE, "operator": ">", "value": "10000"})
    refused(alice, "GET", "algorithm-creator/condition-add", {"algorithm_id": aid, "code": CODE, "operator": "~", "value": "1"}, "operator")
    refused(bob, "GET", "algorithm-creator/condition-add", {"algorithm_id": aid, "code": CODE, "operator": ">", "value": "1"}, "algorithm_id")
    cu = ok(alice, "GET", "algorithm-creator/condition-update", {"id": c["id"], "operator": "crosses_above"})
    check(cu["operator"] == "crosses_above" and cu["value"] == "10000", f"condition-update: {cu}")
    c2 = ok(alice, "GET", "algorithm-creator/condition-add", {"algorithm_id": aid, "code": CODE, "operator": "<", "value": "90000"})
    conds = ok(alice, "GET", "algorithm-creator/list-conditions", {"algorithm_id": aid})
    check([x["id"] for x in conds] == [c["id"], c2["id"]], f"list-conditions: {conds}")
    rm = ok(alice, "GET", "algorithm-creator/condition-remove", {"id": c2["id"]})
    check(rm["deleted"] is True, "condition-remove")
    refused(alice, "GET", "algorithm-creator/condition-remove", {"id": c2["id"]}, "id")

    x = ok(alice, "GET", "algorithm-creator/execution-add",
           {"algorithm_id": aid, "order_type": "limit", "side": "buy", "quantity": "0.01", "code": CODE})
    refused(alice, "GET", "algorithm-creator/execution-add",
            {"algorithm_id": aid, "order_type": "iceberg", "side": "buy", "quantity": "1", "code": CODE}, "order_type")
    v = ok(alice, "GET", "algorithm-creator/validate-algorithm", {"id": aid})
    check(v["valid"] is False and "price" in json.dumps(v["problems"]), f"limit without price flagged: {v}")
    xu = ok(alice, "GET", "algorithm-creator/execution-update", {"id": x["id"], "price": "9500"})
    check(xu["price"] == "9500", f"execution-update: {xu}")
    x2 = ok(alice, "GET", "algorithm-creator/execution-add",
            {"algorithm_id": aid, "order_type": "market", "side": "sell", "quantity": "0.01", "code": CODE})
    ok(alice, "GET", "algorithm-creator/execution-remove", {"id": x2["id"]})
    ex = ok(alice, "GET", "algorithm-creator/list-executions")
    check([e["id"] for e in ex] == [x["id"]], f"list-executions: {ex}")

    v = ok(alice, "GET", "algorithm-creator/validate-algorithm", {"id": aid})
    check(v == {"id": aid, "valid": True, "problems": []}, f"validate complete: {v}")
    p = ok(alice, "GET", "algorithm-creator/publish-algorithm", {"id": aid})
    check(p["published"] is True, f"publish: {p}")
    refused(alice, "GET", "algorithm-creator/publish-algorithm", {"id": aid}, "id")
    st = ok(alice, "GET", "algorithm-creator/algorithm-statistics", {"id": aid})
    check(st["conditions"] == 1 and st["executions"] == 1 and st["published"] is True
          and st["maximum_transactions_successful"] == 5 and st["codes"] == [CODE], f"statistics: {st}")
    p = ok(alice, "GET", "algorithm-creator/unpublish-algorithm", {"id": aid})
    check(p["published"] is False, "unpublish")
    refused(alice, "GET", "algorithm-creator/unpublish-algorithm", {"id": aid}, "id")

    spare = ok(alice, "POST", "algorithm-creator/algorithm-add", {"name": "Spare algo", "group_name": "Misc"})
    ok(alice, "GET", "algorithm-creator/condition-add", {"algorithm_id": spare["id"], "code": CODE, "operator": ">", "value": "1"})
    gone = ok(alice, "GET", "algorithm-creator/algorithm-remove", {"id": spare["id"]})
    check(gone["deleted"] is True and gone["conditions_removed"] == 1, f"algorithm-remove: {gone}")
    refused(alice, "GET", "algorithm-creator/algorithm-remove", {"id": spare["id"]}, "id")
    algs = ok(alice, "GET", "algorithm-creator/list-algorithms")
    check([a["id"] for a in algs] == [aid] and algs[0]["executions"] == 1, f"list-algorithms: {algs}")
    check(ok(bob, "GET", "algorithm-creator/list-algorithms") == [], "algorithms are per account")
    return aid


def desk(alice, bob, base):
    t = ok(alice, "GET", "support/add-ticket",
           {"subject": "Feed is late", "message": "The signals feed shows iterations a minute late.", "category": "marketplace"})
    check(t["status"] == "open" and t["replies"] == [], f"add-ticket: {t}")
    refused(alice, "GET", "support/add-ticket", {"subject": "Hi", "message": "short"}, None)
    ok(alice, "POST", "user/create-support-ticket",
       {"name": "Alice", "email": "alice@example.com", "subject": "Second ticket", "message": "Created through the user endpoint."})
    tickets = ok(alice, "GET", "support/list-tickets")
    check([x["subject"] for x in tickets] == ["Second ticket", "Feed is late"], f"list-tickets: {tickets}")
    up = ok(alice, "GET", "support/update-ticket", {"id": t["id"], "message": "Understood, thanks."})
    check(len(up["replies"]) == 1 and up["replies"][0]["message"] == "Understood, thanks.", f"reply: {up}")
    up = ok(alice, "GET", "support/update-ticket", {"id": t["id"], "status": "closed"})
    check(up["status"] == "closed", "close ticket")
    refused(alice, "GET", "support/update-ticket", {"id": t["id"], "status": "closed"}, "status")
    refused(alice, "GET", "support/update-ticket", {"id": t["id"]}, "message")
    refused(bob, "GET", "support/update-ticket", {"id": t["id"], "status": "open"}, "id")
    second = tickets[0]["id"]
    up = ok(alice, "GET", "support/update-ticket", {"id": second, "message": "Any news on this?"})
    check(up["status"] == "open" and len(up["replies"]) == 1, f"reply on a create-support-ticket ticket: {up}")

    s = ok(alice, "GET", "support/settings")
    check(s["email_on_reply"] is True and s["email_on_close"] is True, f"default settings: {s}")
    s = ok(alice, "GET", "support/settings", {"email_on_close": "false"})
    check(s["email_on_close"] is False and s["email_on_reply"] is True, f"settings stored: {s}")
    refused(alice, "GET", "support/settings", {"email_on_close": "maybe"}, "email_on_close")

    t0 = now(alice)
    r1 = ok(alice, "GET", "calendar/add-reminder", {"time": t0 + HOUR, "text": "rebalance"})
    # The sandbox clock also runs in real time between calls.
    check(r1["past"] is False and HOUR - 5000 <= r1["in_ms"] <= HOUR, f"add-reminder: {r1}")
    ok(alice, "GET", "calendar/add-reminder", {"time": t0 + 2 * HOUR, "text": "weekly review", "repeat": "weekly"})
    refused(alice, "GET", "calendar/add-reminder", {"time": t0 - 1, "text": "too late"}, "time")
    refused(alice, "GET", "calendar/add-reminder", {"time": "soon", "text": "bad time"}, "time")
    advance(base, 3 * HOUR)
    sched = ok(alice, "GET", "calendar/list-schedule")
    check([(e["text"], e["past"]) for e in sched] == [("weekly review", False), ("rebalance", True)], f"schedule: {sched}")
    check(sched[0]["next_ms"] == t0 + 2 * HOUR + 7 * 24 * HOUR, "weekly reminder moves on a week")

    body = "Article body. " * 30
    pub = (now(alice) // 1000) - 3 * 86400 - 10
    ok(alice, "POST", "articles/create",
       {"title": "Signals and their delays", "brief": "Why a marketplace feed is delayed.", "body": body, "publishdate": str(pub)})
    ok(alice, "POST", "articles/create",
       {"title": "Next week's article draft", "brief": "Scheduled for publication later.", "body": body, "publishdate": str(pub + 30 * 86400)})
    e = ok(alice, "GET", "articles/check-earnings")
    check([(a["status"], a["days_published"]) for a in e["articles"]] == [("published", 3), ("scheduled", 0)], f"earnings: {e}")
    check(e["total"] == 3 * e["rate_per_day"] and e["currency"] == "USD", f"earnings total: {e}")
    check(ok(bob, "GET", "articles/check-earnings")["total"] == 0, "earnings are per account")


def main():
    binary = os.path.abspath(sys.argv[1])
    data_dir = tempfile.mkdtemp(prefix="trading-bb-extras-")
    try:
        ka = create_key(binary, data_dir, "alice")
        kb = create_key(binary, data_dir, "bob")
        proc, base = start(binary, data_dir, "--sandbox-clock", "--seed", "7")
        try:
            alice = Client(base, ka["key"], ka["secret"])
            bob = Client(base, kb["key"], kb["secret"])
            sid = marketplace(alice, bob, base)
            competitions(alice, bob)
            aid = algorithms(alice, bob)
            desk(alice, bob, base)
        finally:
            stop(proc)

        proc, base = start(binary, data_dir, "--sandbox-clock", "--seed", "7")
        try:
            alice = Client(base, ka["key"], ka["secret"])
            pos = ok(alice, "GET", "marketplace/signals-position")
            check([p["id"] for p in pos] == [sid] and pos[0]["statistics"]["iterations"] == 2, f"signals survive: {pos}")
            algs = ok(alice, "GET", "algorithm-creator/list-algorithms")
            check([a["id"] for a in algs] == [aid] and algs[0]["conditions"] == 1, f"algorithms survive: {algs}")
            tickets = ok(alice, "GET", "support/list-tickets")
            check(len(tickets) == 2, f"tickets survive: {tickets}")
            sched = ok(alice, "GET", "calendar/list-schedule")
            check({e["text"] for e in sched} == {"rebalance", "weekly review"}, f"reminders survive: {sched}")
            check(ok(alice, "GET", "support/settings")["email_on_close"] is False, "settings survive")
        finally:
            stop(proc)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    finish("bb_extras")


if __name__ == "__main__":
    main()
