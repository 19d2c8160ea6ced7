#!/usr/bin/env python3
"""Writes the data directory fixture `datadir-v1/` with the trading-api of commit 7bc9492
(before issue #29 changed the nonce memory and restructured the server).

It runs the paper-trading and extras black-box scenarios against one data directory, so
that every table of that version holds rows, then records what a later version must read
back from it in `datadir-v1/expect.json`. Kept for the record: rerunning it with a newer
binary would write a fixture of that newer version, which is not what the test needs.

usage: make_datadir_v1.py PATH/TO/old/trading-api OUT_DIR
"""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bb_extras  # noqa: E402
import bb_paper  # noqa: E402
from tclient import FAILURES, Client, create_key, start, stop  # noqa: E402

# Read-only calls whose answers depend on stored data only (not on the clock).
READS = [
    "exchange-api-keys/list",
    "strategy/list-profiles",
    "marketplace/signals-position",
    "algorithm-creator/list-algorithms",
    "support/list-tickets",
    "calendar/list-schedule",
    "support/settings",
    "user/account-details",
]


def main():
    binary, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    shutil.rmtree(out, ignore_errors=True)
    data_dir = os.path.join(out)
    bot = create_key(binary, data_dir, "bot", plan="Unlimited")
    alice = create_key(binary, data_dir, "alice")
    bob = create_key(binary, data_dir, "bob")
    proc, base = start(binary, data_dir, "--sandbox-clock", "--seed", "7")
    expect = {"keys": {"bot": bot, "alice": alice, "bob": bob}, "reads": {}}
    try:
        bb_paper.run(bb_paper.Api(base, bot), base, {})
        a, b = Client(base, alice["key"], alice["secret"]), Client(base, bob["key"], bob["secret"])
        bb_extras.marketplace(a, b, base)
        bb_extras.competitions(a, b)
        bb_extras.algorithms(a, b)
        bb_extras.desk(a, b, base)
        who = {"bot": Client(base, bot["key"], bot["secret"]), "alice": a}
        for name, client in who.items():
            for path in READS:
                # That version answered only the documented method.
                method = "POST" if "POST" in bb_paper.METHODS[path] else "GET"
                status, body = client.call(method, path)
                expect["reads"].setdefault(name, {})[path] = {"status": status, "data": body.get("data")}
            # The newest nonce each key used: a later version must still refuse it.
            expect["keys"][name]["last_nonce"] = client.last_nonce
    finally:
        stop(proc)
    if FAILURES:
        raise SystemExit(f"scenario failed: {FAILURES}")
    for name in ("trading.sqlite-wal", "trading.sqlite-shm"):
        if os.path.exists(os.path.join(data_dir, name)):
            raise SystemExit(f"{name} left behind; the fixture must be one file")
    with open(os.path.join(out, "expect.json"), "w", encoding="utf-8") as f:
        json.dump(expect, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
