#!/usr/bin/env python3
"""Fails unless every catalogue endpoint answered 200 to at least one black-box test.

The black-box clients (tclient.Client) append "path status" for every answer to the file
named by TRADING_COVERAGE_FILE; scripts/test.d/trading.sh runs them all, then this check.
An endpoint that never answered 200 is either unimplemented or untested, and both fail.
The few endpoints whose documented answer is a refusal must show that status instead.

usage: bb_coverage.py PATH/TO/trading-api COVERAGE_FILE
"""

import json
import os
import sys

# Endpoints documented to refuse: their expected status replaces 200.
REFUSING = {"user/close-account": 403, "subscriptions/cancel": 403}


def main():
    coverage_file = sys.argv[2]
    root = os.path.dirname(os.path.abspath(__file__))
    catalogue = os.path.join(root, "..", "..", "..", "trading-model", "data", "endpoints.json")
    with open(catalogue, encoding="utf-8") as f:
        paths = [e["path"] for e in json.load(f)["endpoints"]]
    answered = set()
    with open(coverage_file, encoding="utf-8") as f:
        for line in f:
            path, _, status = line.strip().rpartition(" ")
            if path:
                answered.add((path, int(status)))
    missing = [p for p in paths if (p, REFUSING.get(p, 200)) not in answered]
    print(f"bb_coverage: {len(paths) - len(missing)} of {len(paths)} endpoints answered as documented in a black-box test")
    if missing:
        for p in missing:
            print(f"  never answered {REFUSING.get(p, 200)}:", p)
        sys.exit(1)


if __name__ == "__main__":
    main()
