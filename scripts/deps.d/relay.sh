# A real NATS server for the relay's NATS output test (servers/relay/tests/outputs.rs).
need_apt nats-server
# Debian installs it in /usr/sbin, which is not on every PATH.
NATS_SERVER_BIN=$(command -v nats-server || echo /usr/sbin/nats-server)
export NATS_SERVER_BIN
export RELAY_REQUIRE_NATS=1
# Go and PyYAML for the relay-templates cross-check against real Go
# (scripts/test.d/relay-go-crosscheck.sh); required there once installed here.
need_apt golang-go python3-yaml
export RELAY_REQUIRE_GO=1
