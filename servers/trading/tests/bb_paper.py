#!/usr/bin/env python3
"""Black-box test of paper trading: the full bot scenario of issue #11, twice.

On a server started with `--sandbox-clock --seed 7`: create an API key (CLI), add an
exchange key, create and edit a strategy profile, start it, move the clock and watch
transactions appear, place a limit and a market paper order and cancel the limit one,
force-stop, move the clock, start again (re-check), stop, export the transactions as CSV
and read the file back. Every endpoint of the paper module answers 200 at least once with
checked content, and the refusals answer 422/1440. The same scenario then runs on a second
server with the same seed, and the data that depends only on the seed and the relative
clock must be equal (prices and times depend on the wall clock the sandbox clock starts
from, ids on the order of calls, so those are left out).

usage: bb_paper.py PATH/TO/trading-api
"""

import base64
import csv
import io
import json
import os
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tclient import Client, advance, check, create_key, envelope_ok, finish, start, stop  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CATALOGUE = os.path.join(HERE, "..", "..", "..", "trading-model", "data", "endpoints.json")
METHODS = {e["path"]: e["methods"] for e in json.load(open(CATALOGUE, encoding="utf-8"))["endpoints"]}

TX_FIELDS = (
    "id time_created last_updated c_active c_order c_lookup_status c_lookup_count c_row "
    "c_symbol_code c_exchange c_symbol c_symbolid c_type c_type_orig c_side c_amount c_price "
    "c_price_entry c_price_offset c_payload c_time_requested c_time_orderplaced "
    "c_time_completed c_time_journey c_order_id c_order_slice c_order_success c_order_failed "
    "c_order_status c_order_remaining c_order_filled c_com c_child_id c_cancel c_cancel_time "
    "c_spread_entry c_trace_order c_conditions custom_id c_max_time"
).split()

# Transaction fields that depend only on the seed and the relative clock.
STABLE_TX = ("c_order", "c_row", "c_symbol_code", "c_exchange", "c_symbol", "c_type", "c_side",
             "c_amount", "c_price_offset", "c_order_slice", "c_order_status", "c_order_filled",
             "c_conditions", "c_cancel", "c_max_time", "c_active")


class Api:
    def __init__(self, base, creds):
        self.base = base
        self.client = Client(base, creds["key"], creds["secret"])

    def raw(self, path, params=None):
        method = "POST" if "POST" in METHODS[path] else "GET"
        status, body = self.client.call(method, path, params or {})
        envelope_ok(status, body, path)
        return status, body

    def ok(self, path, params=None):
        status, body = self.raw(path, params)
        check(status == 200, f"{path} answers 200 ({status}: {json.dumps(body.get('data'))[:300]})")
        return body.get("data")

    def refused(self, path, params, what):
        status, body = self.raw(path, params)
        check(status == 422 and body["data"].get("code") == 1440, f"{what}: 422/1440 ({status}, {body.get('data')})")
        return (body.get("missing_information") or [{}])[0]


def scenario(binary, tag):
    """Runs the bot scenario on a fresh server; returns the data that must be reproducible."""
    data_dir = tempfile.mkdtemp(prefix=f"trading-bb-paper-{tag}-")
    sig = {}
    try:
        creds = create_key(binary, data_dir, "bot", plan="Unlimited")
        proc, base = start(binary, data_dir, "--sandbox-clock", "--seed", "7")
        try:
            run(Api(base, creds), base, sig)
        finally:
            stop(proc)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return sig


def run(api, base, sig):
    algs = api.ok("strategy/list-algorithms")
    check([a["name"] for a in algs][:3] == ["Threshold buy", "Threshold sell", "Spread capture"], f"algorithms {algs}")
    check(all(set(a) >= {"id", "group_name", "name"} for a in algs), "algorithm records")
    exchanges = api.ok("strategy/list-exchanges")
    check({e["code"] for e in exchanges} >= {"binance", "okex"}, "list-exchanges")
    options = api.ok("strategy/list-strategy-options")
    check(options["executable_priceoffsettype"][1] == "ob1" and options["slice_delay_seconds"]["minimum"] == 2,
          "strategy options carry the plan's bounds")

    key = api.ok("exchange-api-keys/add", {"exchange": "binance", "label": "paper", "token": "tok12345",
                                           "secret": "sec12345"})["id"]
    spare = api.ok("exchange-api-keys/add", {"exchange": "okex", "label": "nopass", "token": "tok12345",
                                             "secret": "sec12345"})["id"]
    t = api.ok("exchange-api-keys/test", {"id": key})
    check(t["valid"] is True and t["status"] == "active", f"key test passes: {t}")
    t = api.ok("exchange-api-keys/test", {"id": spare})
    check(t["valid"] is False and t["status"] == "disabled", f"okex key without passphrase is disabled: {t}")
    m = api.refused("exchange-query/order-create", {"apikey": spare, "ordertype": "market", "code": "okex-btcusdt",
                                                     "side": "buy", "quantity": "0.001"}, "disabled key refused")
    check(m.get("parameter") == "apikey", "refusal names apikey")

    prof = api.ok("strategy/create-profile", {"name": "Bot"})["id"]
    edit = {
        "id": prof, "algorithm_id": "3", "name": "Bot", "slice_delay": "2",
        "executable_codes[]": ["binance-btcusdt"], "executable_apikeys[]": [str(key)],
        "executable_values[]": ["0.001"], "executable_priceoffset[]": ["5"],
        "executable_maximumtimelive[]": ["0"],
        "condition_codes[]": ["binance-btcusdt"], "condition_values[]": [">0"],
        "condition_orderbooklevel_side1[]": ["ask1"],
    }
    p = api.ok("strategy/edit-profile", edit)
    check(p["executable_codes"] == ["binance-btcusdt"] and p["condition_values"] == [">0"]
          and p["algorithm_id"] == "3", f"edit-profile stores the arrays: {p}")
    api.refused("strategy/edit-profile", dict(edit, algorithm_id="42"), "unknown algorithm refused")
    c = api.ok("strategy/edit-component", {"id": prof, "component": "executable_priceoffset", "row": "0", "value": "5"})
    check(c["executable_priceoffset"] == ["5"], "edit-component changes one entry")

    s = api.ok("strategy/start", {"id": prof})
    check(s["state"] == "running" and s["changed"] is True, f"start: {s}")
    s = api.ok("strategy/start", {"id": prof})
    check(s["changed"] is False and "already running" in s["message"], "start on running does nothing")
    running = api.ok("strategy/list-strategies")
    check([r["id"] for r in running] == [prof], "list-strategies shows the running one")
    advance(base, 6000)
    tx = api.ok("strategy/list-strategy-transactions", {"main_id": prof, "limit": 100})
    check(tx["total"] == 8, f"4 slices x 2 orders after 6 s: {tx['total']}")
    first = tx["transactions"][0] if tx["transactions"] else {}
    check(set(first) == set(TX_FIELDS), f"every field of the transaction record: {sorted(set(TX_FIELDS) ^ set(first))}")
    check(all(isinstance(v, str) for v in first.values()), "all values are strings")
    payload = json.loads(first.get("c_payload", "{}"))
    check(payload.get("status") == "open" and payload.get("side") in ("buy", "sell"), "c_payload is the order")
    check(json.loads(first.get("c_conditions", "[]")) == ["binance-btcusdt"], "c_conditions is a JSON array")
    sig["tx_running"] = [{k: t[k] for k in STABLE_TX} for t in tx["transactions"]]

    m = api.refused("exchange-api-keys/delete", {"id": key}, "key of a running strategy cannot be deleted")
    check(m.get("strategies") == [prof], "refusal names the strategy")
    api.refused("strategy/hard-reset", {"id": prof}, "hard reset refused while running")
    api.refused("strategy/delete-profile", {"id": prof}, "delete-profile refused while running")

    # Manual paper orders: a limit far below the market rests and is cancelled; a market one fills.
    lim = api.ok("exchange-query/order-create", {"apikey": key, "ordertype": "limit", "code": "binance-btcusdt",
                                                 "side": "buy", "quantity": "0.001", "price": "1000"})["orders"][0]
    check(lim["status"] == "open" and lim["type"] == "limit", f"limit order rests: {lim}")
    mkt = api.client.call("GET", "exchange-query/order-create",
                          {"apikey": key, "ordertype": "market", "code": "binance-btcusdt", "side": "sell",
                           "quantity": "0.002"})[1]["data"]["orders"][0]
    check(mkt["status"] == "closed" and abs(mkt["filled"] + mkt["remaining"] - 0.002) < 1e-12,
          f"market order filled (GET works too): {mkt}")
    check(abs(mkt["cost"] - sum(t["cost"] for t in mkt["trades"])) < 1e-6, "cost is the sum of the fills")
    opened = api.ok("exchange-query/list-open-orders", {"apikey": key})
    check(any(o["id"] == lim["id"] for o in opened), "the limit order is listed open")
    chk = api.ok("exchange-query/order-check", {"id": lim["id"]})
    check(chk["id"] == lim["id"] and chk["info"]["checks"] == 1, "order-check looks it up")
    can = api.ok("exchange-query/order-cancel", {"id": lim["id"]})
    check(can["status"] == "canceled", "limit order cancelled")
    api.refused("exchange-query/order-cancel", {"id": lim["id"]}, "second cancel refused")
    closed = api.ok("exchange-query/list-closed-orders", {"code": "binance-btcusdt"})
    check({o["id"] for o in closed} >= {lim["id"], mkt["id"]}, "both are closed orders now")
    sig["manual"] = [(o["type"], o["side"], o["status"], o["amount"], o["filled"]) for o in (can, mkt)]

    # Force stop: orders stay open and flagged; a later start re-checks them.
    fs = api.ok("strategy/stop", {"id": prof, "force": "true"})
    check(fs["force"] is True and fs["orders_left_open"] == 8, f"force stop leaves orders: {fs}")
    dbg = api.ok("strategy/data/debug")
    check(len(dbg[0]["flagged_orders"]) == 8 and dbg[0]["state"] == "stopped", f"debug shows flagged orders: {dbg}")
    advance(base, 4000)
    tx2 = api.ok("strategy/list-strategy-transactions", {"main_id": prof, "limit": 100})
    check(tx2["total"] == 8, "no transactions while stopped")
    s = api.ok("strategy/start", {"id": prof})
    check(len(s["rechecked_orders"]) == 8, f"start re-checks the flagged orders: {s}")
    advance(base, 2000)
    st = api.ok("strategy/stop", {"id": prof})
    check(st["orders_cancelled"] == 12, f"stop cancels the open orders: {st}")
    check(api.ok("exchange-query/list-open-orders") == [], "nothing open after a stop without force")
    tx3 = api.ok("strategy/list-strategy-transactions", {"main_id": prof, "limit": 100, "remove_unfilled": "false"})
    check(tx3["total"] == 12, f"2 more slices after the restart: {tx3['total']}")
    unf = api.ok("strategy/list-strategy-transactions", {"main_id": prof, "remove_unfilled": "true"})
    check(unf["total"] == 0, "none of the resting orders filled, so remove_unfilled leaves none")
    sig["tx_final"] = [{k: t[k] for k in STABLE_TX} for t in tx3["transactions"]]

    # Export the transactions as CSV and read the file back.
    ex = api.ok("export/request", {"system": "strategy_transactions", "type": ".csv", "symbol": "binance-btcusdt",
                                   "limit": "100"})
    wait = api.ok("export/fetch", {"id": ex["id"]})
    check(wait["status"] == "preparing" and "wait" in wait["message"], f"not ready yet: {wait}")
    advance(base, 3000)
    f = api.ok("export/fetch", {"id": ex["id"]})
    check(f["encoding"] == "base64" and f["filename"].endswith(".csv"), f"file metadata: { {k: f[k] for k in f if k != 'content'} }")
    rows = list(csv.DictReader(io.StringIO(base64.b64decode(f["content"]).decode("utf-8"), newline="")))
    listed = {t["id"]: t for t in tx3["transactions"]}
    check(len(rows) == 12 and {r["id"] for r in rows} == set(listed), "CSV rows are the strategy's transactions")
    check(all({k: r[k] for k in TX_FIELDS} == listed.get(r["id"]) for r in rows), "CSV rows match list-strategy-transactions")
    xl = api.ok("export/request", {"system": "all_strategies", "type": ".xls", "symbol": "binance-btcusdt", "limit": "10"})
    advance(base, 3000)
    xf = api.ok("export/fetch", {"id": xl["id"]})
    ns = {"ss": "urn:schemas-microsoft-com:office:spreadsheet"}
    book = ET.fromstring(base64.b64decode(xf["content"]))
    table = [[d.text or "" for d in row.findall("ss:Cell/ss:Data", ns)]
             for row in book.findall("ss:Worksheet/ss:Table/ss:Row", ns)]
    check(book.tag == "{%s}Workbook" % ns["ss"] and table[0][:2] == ["id", "name"]
          and len(table) == 2 and table[1][:2] == [str(prof), "Bot"] and table[1][4] == "stopped",
          f"xls is a SpreadsheetML workbook with the strategy: {table}")
    el = api.ok("export/list")
    check(el["total"] == 2 and el["records"][0]["status"] == "ready", f"export/list: {el}")
    sig["csv_rows"] = len(rows)

    # Reports.
    bal = api.ok("exchange-query/list-balances", {"apikey": key})
    check(bal[0]["apikey"] == key and "BTC" in bal[0]["balances"], "balances per exchange key")
    sig["btc"] = round(bal[0]["balances"]["BTC"]["total"], 8)
    reqs = api.ok("exchange-query/list-exchange-requests")
    kinds = {r["request"] for r in reqs}
    check({"createOrder", "cancelOrder", "fetchOrder"} <= kinds, f"request log: {kinds}")
    q = api.ok("exchange-query/create-query", {"apikey": key, "exchange_query": "closed_orders"})
    check(len(q["result"]) >= 14, "a predefined query runs through the key")
    ql = api.ok("exchange-query/list-exchange-queries")
    check(ql[0]["id"] == q["id"], "queries listed")
    check(api.ok("exchange-query/delete-exchange-query", {"id": q["id"]})["deleted"] is True, "query deleted")
    pnl = api.ok("statistics/account-pnl")
    check(pnl["symbols"][0]["code"] == "binance-btcusdt" and pnl["symbols"][0]["sold"] == 0.002, f"pnl: {pnl}")
    com = api.ok("finance/list-commissions-paid", {"subaccount_id": "0"})
    check(com["total"] == 1 and com["records"][0]["order"] == mkt["id"], f"commissions of the filled order: {com}")
    rec = api.ok("finance/list-recent-transactions")
    check(rec["total"] == len(mkt["trades"]), "recent transactions are the fills")
    top = api.ok("finance/list-top-strategy-pnl")
    check(top["records"][0]["id"] == prof, "top strategy pnl lists the strategy")
    imp = api.ok("finance/import-orders-list")
    check({o["id"] for o in imp} == {lim["id"], mkt["id"]}, "import list: orders placed outside strategies")
    ims = api.ok("finance/import-orders-settings")
    check([s["import_enabled"] for s in ims] == [True, False], "import settings per key")
    books = api.ok("strategy/books")
    check(len(books["binance-btcusdt"]["bids"]) == 5, "books of the strategy's codes")
    ov = api.ok("strategy/high-level-overview")
    check((ov["active"], ov["inactive"], ov["total"]) == (0, 1, 1), f"overview: {ov}")
    dl = api.ok("strategy/data/list")
    check(dl["total"] == 1 and dl["records"][0]["transactions"] == 12, "data/list")

    # Copies, display order, soft stop, stop-all, hard reset, delete.
    dup = api.ok("strategy/duplicate-strategy", {"id": prof})
    check(dup["name"] == "Bot (copy)" and dup["executable_codes"] == ["binance-btcusdt"], "duplicate")
    eo = api.ok("strategy/edit-order", {"ids[]": [str(dup["id"])]})
    check(eo["order"] == [str(dup["id"]), str(prof)], "edit-order")
    api.ok("strategy/start", {"id": dup["id"]})
    soft = api.ok("strategy/soft-stop", {"id": dup["id"]})
    check(soft["state"] == "stopped" and soft["changed"] is True, "soft-stop")
    api.ok("strategy/start", {"id": dup["id"]})
    sa = api.ok("strategy/stop-all-strategies", {"force": "true"})
    check(sa["stopped"] == [dup["id"]] and sa["force"] is True, "stop-all with force")
    hr = api.ok("strategy/hard-reset", {"id": prof})
    check(hr["transactions_deleted"] == 12, "hard reset deletes the transactions")
    check(api.ok("strategy/list-strategy-transactions", {"main_id": prof})["total"] == 0, "none left")
    d = api.ok("strategy/delete-profile", {"id": dup["id"]})
    check(d["deleted"] is True, "delete-profile")
    api.refused("strategy/start", {"id": dup["id"]}, "a deleted strategy is gone")
    d = api.ok("exchange-api-keys/delete", {"id": spare})
    check(d["deleted"] is True, "an unused key can be deleted")


def main():
    binary = os.path.abspath(sys.argv[1])
    one = scenario(binary, "a")
    two = scenario(binary, "b")
    for k in sorted(one):
        check(one[k] == two.get(k), f"same seed, same scenario, same {k}")
    check(len(one) >= 5, "signature collected")
    finish("bb_paper")


if __name__ == "__main__":
    main()
