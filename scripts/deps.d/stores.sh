# Real counter stores for ratelimit-backends' tests: Redis (single, cluster, sentinel) and memcached.
# Debian's memcached and redis-server are built with TLS (memcached -Z, redis --tls-port),
# which the TLS tests use; there is no separate TLS package to install.
need_apt redis-server redis-sentinel redis-tools memcached
# The packages start system services on the default ports; the tests use their own ports,
# so stop the services to keep the machine quiet (no systemd in containers: ignore failures).
for svc in redis-server redis-sentinel memcached; do
    service "$svc" stop >/dev/null 2>&1 || true
done
