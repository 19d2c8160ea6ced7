# Trading API: the black-box client needs only python3; schemathesis (PyPI) goes into a
# private venv so that a system-managed Python is never touched.
need_apt python3 python3-venv
TRADING_VENV=.tmp/trading-venv
if [ ! -x "$TRADING_VENV/bin/st" ]; then
    python3 -m venv "$TRADING_VENV"
    "$TRADING_VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==4.32.5"
fi
