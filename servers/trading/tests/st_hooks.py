"""schemathesis hooks: sign every request the way the executium SDKs do.

Loaded with SCHEMATHESIS_HOOKS=st_hooks; the key and secret come from TRADING_KEY and
TRADING_SECRET. Nonces come from one process-wide counter, so they only grow.
"""

import base64
import hashlib
import hmac
import itertools
import json
import os
import threading
import time

import schemathesis

_lock = threading.Lock()
_counter = itertools.count(int(time.time() * 10**7))


def _b64url(data: bytes) -> str:
    return base64.b64encode(data).decode().replace("+", "-").replace("/", "_").rstrip("=")


def _token(secret: str) -> str:
    with _lock:
        nonce = next(_counter)
    head = _b64url(b'{"typ":"JWT","alg":"HS256"}')
    body = _b64url(json.dumps({"nonce": nonce}).encode())
    sig = hmac.new(secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64url(sig)}"


@schemathesis.auth()
class SdkAuth:
    def get(self, case, context):
        return (os.environ["TRADING_KEY"], os.environ["TRADING_SECRET"])

    def set(self, case, data, context):
        key, secret = data
        case.headers = case.headers or {}
        case.headers["Key"] = key
        case.headers["Authorization"] = _token(secret)
