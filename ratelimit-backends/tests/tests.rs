//! Every store against real servers started on loopback ports: Redis (single, Cluster of
//! three masters, behind Sentinel, with a per-second instance) and memcached (two nodes,
//! over TLS, and from a DNS SRV record).
//! The servers come from Debian's packages, installed by `scripts/test.sh`.

mod conformance;
mod fault;
mod memcached;
mod redis_keys;
mod saturation;
mod servers;
