# A real NATS server for the relay's NATS output test (servers/relay/tests/outputs.rs).
need_apt nats-server
# Debian installs it in /usr/sbin, which is not on every PATH.
NATS_SERVER_BIN=$(command -v nats-server || echo /usr/sbin/nats-server)
export NATS_SERVER_BIN
export RELAY_REQUIRE_NATS=1
