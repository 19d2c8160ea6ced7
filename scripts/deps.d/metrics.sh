# A real Prometheus exposition-format parser for the metrics tests (PyPI's prometheus_client).
if ! python3 -c "import prometheus_client" >/dev/null 2>&1; then
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore prometheus_client
fi
export RATELIMIT_REQUIRE_PROM_PARSER=1
