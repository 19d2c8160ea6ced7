#!/usr/bin/env python3
"""Black-box test of the account area of trading-api (standard library only).

Drives the real binary: plans and packages, custom settings, invoices, servers and speed
tests, drive time, wallets (deposits credited with `trading-api deposit`), sessions,
settings, referrals (`create-key --referred-by`), sub-account keys end to end
(`create-key --subaccount`), broadcasts, and a restart on the same data directory.

usage: bb_account.py PATH/TO/trading-api
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tclient import Client, advance, check, create_key, envelope_ok, finish, start, stop  # noqa: E402


def cli(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True)


def sub_key(binary, data_dir, parent, username):
    out = cli(binary, "create-key", "--data-dir", data_dir, "--name", parent, "--subaccount", username)
    check(out.returncode == 0, f"create-key --subaccount {username}: {out.stderr}")
    return json.loads(out.stdout) if out.returncode == 0 else {"key": "", "secret": ""}


def ok(client, method, path, params=None, what=None):
    status, body = client.call(method, path, params)
    check(status == 200, f"{what or path}: 200 expected, got {status} {body.get('data')}")
    envelope_ok(status, body, path)
    return body.get("data") if status == 200 else {}


def refused(client, method, path, params, status, code, what):
    got, body = client.call(method, path, params)
    data = body.get("data") or {}
    check((got, data.get("code")) == (status, code), f"{what}: want {status}/{code}, got {got} {data}")
    return data


def next_minute(base):
    """Moves the clock past the minute window, so the Free plan's 60 a minute never
    interferes between sections."""
    advance(base, 61_000)


def main():
    binary = os.path.abspath(sys.argv[1])
    data_dir = tempfile.mkdtemp(prefix="trading-bb-account-")
    try:
        alice_k = create_key(binary, data_dir, "alice")
        pro_k = create_key(binary, data_dir, "paula", plan="Pro")
        ref = cli(binary, "create-key", "--data-dir", data_dir, "--name", "rita", "--referred-by", "alice")
        check(ref.returncode == 0, f"create-key --referred-by: {ref.stderr}")
        bad = cli(binary, "create-key", "--data-dir", data_dir, "--name", "paula", "--subaccount", "ghost1")
        check(bad.returncode != 0 and "ghost1" in bad.stderr, "unknown sub-account is refused by the CLI")
        dep = cli(binary, "deposit", "--data-dir", data_dir, "--name", "alice", "--wallet", "BTC", "--amount", "0.25")
        check(dep.returncode == 0 and json.loads(dep.stdout or "{}").get("amount") == "0.25000000",
              f"deposit credits the wallet: {dep.stdout} {dep.stderr}")
        bad = cli(binary, "deposit", "--data-dir", data_dir, "--name", "alice", "--wallet", "DOGE", "--amount", "1")
        check(bad.returncode != 0, "deposit to an unknown wallet is refused")

        proc, base = start(binary, data_dir, "--sandbox-clock", "--seed", "7")
        try:
            alice = Client(base, alice_k["key"], alice_k["secret"])
            paula = Client(base, pro_k["key"], pro_k["secret"])

            # Plans and packages.
            d = ok(paula, "GET", "subscriptions/details")
            check(d.get("subscription", {}).get("name") == "Pro" and d["user_settings"]["ratelimit"]["ms"] == 250,
                  f"Pro details: {d.get('subscription')}")
            pk = ok(alice, "GET", "subscriptions/list-packages")
            check([p["name"] for p in pk.get("packages", [])] == ["Free", "Pro", "Enterprise"], f"packages {pk}")
            rec = ok(alice, "GET", "subscriptions/php-sdk-recommendation")
            check(rec.get("recommended", {}).get("name") == "Free", f"recommendation {rec}")
            ch = ok(alice, "POST", "subscriptions/change-php-sdk", {"id": "1"})
            check(ch.get("subscription", {}).get("name") == "Pro", f"change-php-sdk {ch}")
            ch = ok(alice, "GET", "subscriptions/change-package", {"id": "0"})
            check(ch.get("subscription", {}).get("name") == "Free" and ch["previous"]["name"] == "Pro",
                  f"change-package {ch}")
            refused(alice, "GET", "subscriptions/cancel", None, 403, 2750, "cancel is for the website")
            req = ok(alice, "GET", "subscriptions/change-setting-request",
                     {"setting": "maximum_templates", "value": "8"})
            check(req.get("price_month") == "5.00" and req.get("status") == "pending", f"setting request {req}")
            conf = ok(alice, "GET", "subscriptions/change-setting-confirm", {"id": str(req.get("price_adjustment_id"))})
            check(conf.get("subscription", {}).get("status") == "custom", f"confirm {conf}")
            d = ok(alice, "GET", "subscriptions/details")
            check(d["strategies"]["maximum"]["templates"] == 8, "custom setting applied to the details")
            inv = ok(alice, "GET", "subscriptions/invoices")
            check(inv.get("total") == 3 and inv["records"][0]["amount"] == "5.00", f"invoices {inv}")

            next_minute(base)
            # Servers and speed tests.
            t = ok(alice, "POST", "subscriptions/server-types", {"type": "shared", "duration": "36000"})
            check(t.get("packages", [{}])[0].get("price") == "0.20", f"server-types {t}")
            refused(alice, "POST", "subscriptions/server-types", {"type": "shared", "duration": "60"}, 422, 1440,
                    "duration below 7200")
            refused(alice, "POST", "subscriptions/enable-shared-server", {"region": "London"}, 422, 1440,
                    "Free shares Singapore only")
            sh = ok(alice, "POST", "subscriptions/enable-shared-server", {"region": "Singapore"})
            check(sh.get("status") == "active", f"shared server {sh}")
            pv = ok(paula, "POST", "subscriptions/enable-private-server",
                    {"region": "Tokyo", "server_package": "private-small"})
            check(pv.get("status") == "active" and pv.get("server_package") == "private-small", f"private {pv}")
            ls = ok(alice, "POST", "subscriptions/list-shared-servers")
            check(ls.get("total") == 1 and ls["records"][0]["region"] == "Singapore", f"shared list {ls}")
            lp = ok(paula, "POST", "subscriptions/list-private-servers")
            check(lp.get("total") == 1, f"private list {lp}")
            sp = ok(paula, "POST", "tests/server-location-speed-to-exchange",
                    {"server_id": str(pv.get("id")), "exchange1": "binance", "exchange2": "kraken"})
            check(sp.get("fastest") == "binance" and sp.get("previous") == [], f"speed test {sp}")
            sp2 = ok(paula, "POST", "tests/server-location-speed-to-exchange",
                     {"server_id": str(pv.get("id")), "exchange1": "binance", "exchange2": "kraken"})
            check(len(sp2.get("previous", [])) == 1, "previous tests kept")
            off = ok(paula, "POST", "subscriptions/disable-private-server", {"id": str(pv.get("id"))})
            check(off.get("status") == "disabled", f"disable private {off}")
            refused(paula, "POST", "subscriptions/disable-private-server", {"id": str(pv.get("id"))}, 422, 1440,
                    "disabling twice")
            dt = ok(alice, "GET", "subscriptions/add-drivetime", {"hours": "4"})
            check(dt.get("total_hours") == 4 and dt.get("amount") == "0.20", f"drivetime {dt}")
            hist = ok(alice, "GET", "subscriptions/list-history")
            check([r["type"] for r in hist.get("records", [])] == ["drivetime", "deposit"], f"history {hist}")

            next_minute(base)
            # Wallets and finance.
            addr = ok(alice, "GET", "wallets/fetch-deposit-address")
            check(addr.get("wallet") == "BTC" and addr.get("address", "").startswith("bc1q"), f"address {addr}")
            bal = ok(alice, "POST", "wallets/list-balances")
            btc = [r for r in bal.get("records", []) if r["wallet"] == "BTC"]
            check(btc and btc[0]["balance"] == "0.25000000", f"balances {bal}")
            w = ok(alice, "GET", "wallets/withdraw",
                   {"wallet": "BTC", "address": "bc1qexampledestination000000", "amount": "0.1"})
            check(w.get("status") == "manual_review" and w.get("fee") == "0.00050000", f"withdraw {w}")
            refused(alice, "GET", "wallets/withdraw",
                    {"wallet": "BTC", "address": "bc1qexampledestination000000", "amount": "1"}, 422, 1440,
                    "withdrawal above the balance")
            ab = ok(alice, "GET", "user/account-balance")
            btc = [r for r in ab.get("wallets", []) if r["wallet"] == "BTC"]
            check(btc and btc[0]["balance"] == "0.14950000" and ab.get("total_usd", 0) > 0, f"account balance {ab}")
            deps = ok(alice, "POST", "finance/list-depoists")
            check(deps.get("total") == 1 and deps["records"][0]["amount"] == "0.25000000", f"deposits {deps}")
            wds = ok(alice, "GET", "finance/list-withdraws")
            check(wds.get("total") == 1 and wds["records"][0]["status"] == "manual_review", f"withdraws {wds}")

            next_minute(base)
            # Settings, security, referrals, sessions.
            st = ok(alice, "GET", "user/settings", {"timezone": "Europe/Dublin", "language": "fr"})
            check(st.get("timezone") == "Europe/Dublin" and st.get("language") == "fr", f"settings {st}")
            sec = ok(alice, "GET", "user/security-settings")
            check(sec.get("api_keys", {}).get("active") == 1, f"security {sec}")
            refs = ok(alice, "POST", "user/list-referrals")
            check(refs.get("total") == 1 and refs["records"][0]["name"] == "rita", f"referrals {refs}")
            ok(alice, "GET", "user/account-details")

            next_minute(base)
            # Sub-accounts end to end (Pro: the documented Free plan gives sub-accounts no API).
            bad = cli(binary, "create-key", "--data-dir", data_dir, "--name", "alice", "--subaccount", "kidone")
            check(bad.returncode != 0 and "Free" in bad.stderr, f"Free has no sub-account keys: {bad.stderr}")
            sub = ok(paula, "POST", "subaccounts/subaccount-create", {
                "name": "Kid One", "email": "kid@example.com", "username": "kidone",
                "password": "longpassword", "active": "true", "allow_api_key_usage": "false"})
            ok(paula, "POST", "exchange-api-keys/add",
               {"exchange": "binance", "label": "main", "token": "tttttt", "secret": "ssssss"})
            bc = ok(paula, "POST", "subaccounts/broadcast-create", {"title": "Hello", "body": "Welcome all"})
            ed = ok(paula, "GET", "subaccounts/broadcast-edit",
                    {"id": str(bc.get("id")), "title": "Changed", "body": "New body"})
            check(ed.get("title") == "Changed", f"broadcast edit {ed}")
            kid_k = sub_key(binary, data_dir, "paula", "kidone")
            kid = Client(base, kid_k["key"], kid_k["secret"])
            kl = ok(kid, "POST", "exchange-api-keys/list", what="sub-account key list")
            check(kl.get("total") == 0, f"sub-account without permission sees no keys: {kl}")
            bl = ok(kid, "POST", "subaccounts/broadcast-list", what="sub-account broadcasts")
            check(bl.get("records", [{}])[0].get("title") == "Changed", "sub-account sees the parent's broadcasts")
            refused(kid, "GET", "subaccounts/subaccount-list", None, 403, 1820, "sub-account cannot list sub-accounts")
            refused(kid, "GET", "subscriptions/list-packages", None, 403, 1820, "sub-account cannot manage the plan")
            ah = ok(paula, "GET", "subaccounts/subaccount-access-history")
            check(ah.get("total", 0) >= 2 and ah["records"][0]["username"] == "kidone", f"sub access history {ah}")
            sl = ok(paula, "GET", "subaccounts/subaccount-list")
            check(any(r.get("username") == "kidone" for r in (sl if isinstance(sl, list) else sl.get("records", []))),
                  f"subaccount-list {sl}")
            ed = ok(paula, "POST", "subaccounts/subaccount-edit", {
                "id": str(sub.get("id")), "email": "kid@example.com", "name": "Kid Renamed",
                "active": "true", "allow_api_key_usage": "true"})
            check(ed.get("name") == "Kid Renamed", f"subaccount-edit {ed}")
            kl = ok(kid, "POST", "exchange-api-keys/list", what="sub-account key list with permission")
            check(kl.get("total") == 1, f"permission granted: the parent's keys are listed: {kl}")
            extra = ok(paula, "POST", "subaccounts/broadcast-create", {"title": "Second", "body": "To be deleted"})
            ok(paula, "POST", "subaccounts/broadcast-delete", {"id": str(extra.get("id"))})
            bl = ok(kid, "POST", "subaccounts/broadcast-list", what="broadcasts after a delete")
            check([b["title"] for b in bl.get("records", [])] == ["Changed"], f"broadcast deleted {bl}")
            hist = ok(paula, "POST", "user/access-history", {"limit": "3"})
            check(hist.get("showing") == 3 and hist["records"][0]["endpoint"] in (
                "subaccounts/broadcast-list", "user/access-history"), f"access history {hist}")
            ses = ok(paula, "POST", "user/active-sessions", {"request": "list"})
            check(any(s.get("subaccount_id") == sub.get("id") for s in ses.get("sessions", [])),
                  f"sub-account session listed {ses}")
            ok(paula, "POST", "subaccounts/subaccount-delete", {"id": str(sub.get("id"))})
            refused(kid, "GET", "subscriptions/details", None, 401, 2000, "deleted sub-account's key")

            next_minute(base)
            # A second key of alice, then revoking it as a session.
            second = create_key(binary, data_dir, "alice")
            alice2 = Client(base, second["key"], second["secret"])
            ok(alice2, "GET", "subscriptions/details")
            rv = ok(alice, "POST", "user/active-sessions", {"request": "revoke-others"})
            check(rv.get("revoked") == 1, f"revoke-others revokes the second key (the sub's already was): {rv}")
            refused(alice2, "GET", "subscriptions/details", None, 401, 2000, "revoked session")
            refused(alice, "POST", "user/active-sessions", {"request": "dance"}, 422, 1440, "unknown request")

            # Spacing: opt in, then two calls closer than 1000 ms answer 1507.
            next_minute(base)
            ok(alice, "GET", "user/settings", {"ratelimit_ms": "1000"})
            advance(base, 1000)
            ok(alice, "GET", "subscriptions/details")
            status, body = alice.call("GET", "subscriptions/details")
            err = body.get("data", {}).get("error", "")
            check(status == 429 and body["data"]["code"] == 1507 and err.endswith("Limit set to 1 request per 1000ms"),
                  f"spacing refusal {status} {body.get('data')}")
            advance(base, 200_000)
            ok(alice, "GET", "user/settings", {"ratelimit_ms": "0"})
        finally:
            stop(proc)

        # Restart on the same data directory.
        proc, base = start(binary, data_dir, "--sandbox-clock", "--seed", "7")
        try:
            alice = Client(base, alice_k["key"], alice_k["secret"])
            paula = Client(base, pro_k["key"], pro_k["secret"])
            check(ok(alice, "GET", "user/settings").get("timezone") == "Europe/Dublin", "settings kept")
            d = ok(alice, "GET", "subscriptions/details")
            check(d["strategies"]["maximum"]["templates"] == 8, "custom plan kept")
            check(ok(paula, "GET", "subscriptions/details")["subscription"]["name"] == "Pro", "plan kept")
            check(ok(alice, "GET", "subscriptions/invoices").get("total") == 5, "invoices kept")
            check(ok(alice, "POST", "subscriptions/list-shared-servers").get("total") == 1, "servers kept")
            check(ok(paula, "POST", "subscriptions/list-private-servers")["records"][0]["status"] == "disabled",
                  "server state kept")
            bal = ok(alice, "POST", "wallets/list-balances")
            btc = [r for r in bal.get("records", []) if r["wallet"] == "BTC"]
            check(btc and btc[0]["balance"] == "0.14950000", "wallets kept")
            ses = ok(alice, "POST", "user/active-sessions", {"request": "list"})
            check(sum(1 for s in ses.get("sessions", []) if s["status"] == "revoked") == 1, f"sessions kept {ses}")
            sh = ok(alice, "POST", "subscriptions/list-shared-servers")["records"][0]
            off = ok(alice, "POST", "subscriptions/disable-shared-server", {"id": str(sh["id"])})
            check(off.get("status") == "disabled", "shared server disabled after restart")
        finally:
            stop(proc)

        # --plan-spacing: every account gets its plan's spacing (Free: 1 call per 1000 ms).
        proc, base = start(binary, data_dir, "--sandbox-clock", "--seed", "7", "--plan-spacing")
        try:
            paula = Client(base, pro_k["key"], pro_k["secret"])
            ok(paula, "GET", "subscriptions/details")
            status, body = paula.call("GET", "subscriptions/details")
            err = (body.get("data") or {}).get("error", "")
            check(status == 429 and err.endswith("Limit set to 1 request per 250ms"),
                  f"--plan-spacing spaces Pro calls by 250 ms: {status} {err}")
            advance(base, 1000)
            ok(paula, "GET", "subscriptions/details", what="a spaced call is served")
        finally:
            stop(proc)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    finish("bb_account")


if __name__ == "__main__":
    main()
