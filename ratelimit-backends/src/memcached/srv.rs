//! `MEMCACHE_SRV`: the node list from a DNS SRV record.

use std::net::SocketAddr;

use hickory_resolver::config::{NameServerConfigGroup, ResolverConfig};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::{Resolver, TokioResolver};

/// Resolves one SRV record on demand.
pub struct SrvResolver {
    name: String,
    resolver: TokioResolver,
}

impl SrvResolver {
    /// A resolver for `name`, asking `nameserver` or else the servers of /etc/resolv.conf.
    pub fn new(name: &str, nameserver: Option<SocketAddr>) -> Result<SrvResolver, String> {
        let mut builder = match nameserver {
            Some(addr) => Resolver::builder_with_config(
                ResolverConfig::from_parts(
                    None,
                    Vec::new(),
                    NameServerConfigGroup::from_ips_clear(&[addr.ip()], addr.port(), true),
                ),
                TokioConnectionProvider::default(),
            ),
            None => TokioResolver::builder_tokio()
                .map_err(|e| format!("cannot read the system's DNS configuration: {e}"))?,
        };
        // Every refresh must ask the DNS server: a cached answer would hide a change for up
        // to the record's TTL (Go's resolver, which upstream uses, caches nothing either).
        builder.options_mut().cache_size = 0;
        Ok(SrvResolver {
            name: name.to_owned(),
            resolver: builder.build(),
        })
    }

    /// The record's targets as `host:port`, ordered by priority, then target and port.
    ///
    /// Every instance must list the nodes in the same order (a key's node is its CRC-32
    /// modulo the count), so the order is fixed here; Go's `net.LookupSRV` shuffles records
    /// of equal priority by weight, which would move keys between refreshes.
    pub async fn servers(&self) -> Result<Vec<String>, String> {
        let lookup = self
            .resolver
            .srv_lookup(self.name.as_str())
            .await
            .map_err(|e| format!("SRV lookup of {}: {e}", self.name))?;
        let mut records: Vec<(u16, String, u16)> = lookup
            .iter()
            .map(|r| {
                let target = r.target().to_ascii();
                let host = target.strip_suffix('.').unwrap_or(&target).to_owned();
                (r.priority(), host, r.port())
            })
            .collect();
        records.sort();
        records.dedup();
        if records.is_empty() {
            return Err(format!("SRV lookup of {}: no records", self.name));
        }
        Ok(records
            .into_iter()
            .map(|(_, host, port)| join_host_port(&host, port))
            .collect())
    }
}

/// `host:port`, with brackets around an IPv6 address.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Checks the shape upstream requires (`_service._proto.name`).
pub fn valid_srv_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('_') else {
        return false;
    };
    let Some((service, rest)) = rest.split_once("._") else {
        return false;
    };
    let Some((proto, domain)) = rest.split_once('.') else {
        return false;
    };
    !service.is_empty() && !proto.is_empty() && !domain.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srv_names() {
        assert!(valid_srv_name("_memcache._tcp.example.com"));
        assert!(valid_srv_name("_m._tcp.local"));
        for bad in [
            "",
            "memcache._tcp.example.com",
            "_memcache.tcp.example.com",
            "_memcache._tcp",
            "_._tcp.x",
            "_m._.x",
        ] {
            assert!(!valid_srv_name(bad), "{bad}");
        }
    }

    #[test]
    fn host_port() {
        assert_eq!(
            join_host_port("mc1.example.com", 11211),
            "mc1.example.com:11211"
        );
        assert_eq!(join_host_port("::1", 11211), "[::1]:11211");
    }
}
