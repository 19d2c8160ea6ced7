"""Shared pieces of the trading-api black-box tests (standard library only).

`Client` signs requests the way the executium SDKs do: header `Key`, header
`Authorization` = HS256 token over {"nonce": N} with N = round(time * 10^7). `start` runs
the real binary on 127.0.0.1 (port 0) and reads the address it reports. `advance` moves a
server started with `--sandbox-clock` forward, so tests never sleep to let time pass.
"""

import base64
import hashlib
import hmac
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def answered(path, status):
    """Records every endpoint's answer status, for the coverage check (bb_coverage.py)."""
    log = os.environ.get("TRADING_COVERAGE_FILE")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{path} {status}\n")


def b64url(data: bytes) -> str:
    return base64.b64encode(data).decode().replace("+", "-").replace("/", "_").rstrip("=")


class Client:
    """Mirrors the SDKs' ApiAccess class: same header names, token layout and nonce."""

    def __init__(self, base, key="", secret=""):
        self.base = base
        self.key = key
        self.secret = secret
        self.last_nonce = 0

    def nonce(self):
        n = int(round(time.time() * 10**7))
        self.last_nonce = max(n, self.last_nonce + 1)
        return self.last_nonce

    def token(self, nonce):
        head = b64url(b'{"typ":"JWT","alg":"HS256"}')
        body = b64url(json.dumps({"nonce": nonce}).encode())
        sig = hmac.new(self.secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{b64url(sig)}"

    def call(self, method, path, params=None, nonce=None, auth=True):
        url = f"{self.base}/api/v2/{path}"
        data = None
        headers = {}
        if params and method == "GET":
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        elif method == "POST":
            data = urllib.parse.urlencode(params or {}, doseq=True).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if auth and self.key:
            headers["Key"] = self.key
            headers["Authorization"] = self.token(nonce if nonce is not None else self.nonce())
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                status, body = resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            status, body = e.code, json.loads(e.read())
        answered(path, status)
        return status, body


def start(binary, data_dir, *extra):
    proc = subprocess.Popen(
        [binary, "--listen", "127.0.0.1:0", "--data-dir", data_dir, *extra],
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stderr.readline()
    m = re.search(r"http://([0-9.]+:[0-9]+)/", line)
    if not m:
        proc.kill()
        raise SystemExit(f"server did not report its address: {line!r}")
    return proc, f"http://{m.group(1)}"


def stop(proc):
    proc.terminate()
    try:
        code = proc.wait(timeout=10)
        check(code == 0, f"server exits cleanly on SIGTERM (exit {code})")
    except subprocess.TimeoutExpired:
        check(False, "server stops within 10 s of SIGTERM")
        proc.kill()
        proc.wait()


def envelope_ok(status, body, endpoint):
    check(body.get("meta", {}).get("status") == status, f"{endpoint}: meta.status {body.get('meta')} != {status}")
    check(body.get("meta", {}).get("endpoint") == endpoint, f"{endpoint}: meta.endpoint")
    check("data" in body, f"{endpoint}: data present")


def create_key(binary, data_dir, name, plan=None):
    """Runs `trading-api create-key` and returns {"key", "secret"}."""
    args = [binary, "create-key", "--data-dir", data_dir, "--name", name]
    if plan:
        args += ["--plan", plan]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def advance(base, ms):
    """Moves the sandbox clock of a `--sandbox-clock` server forward; returns its new time (ms)."""
    req = urllib.request.Request(f"{base}/sandbox/advance?ms={int(ms)}", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())["data"]["milliseconds"]


def finish(name):
    """Prints the verdict and exits non-zero when any check failed."""
    if FAILURES:
        print(f"{name}: {len(FAILURES)} check(s) failed")
        sys.exit(1)
    print(f"{name}: all checks passed")
