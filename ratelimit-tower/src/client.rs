//! The client's address, as Envoy's `remote_address` action sees it: the peer's address,
//! or, behind trusted proxies, an address from `X-Forwarded-For`.
//!
//! Envoy's rule (`xff_num_trusted_hops`): with N trusted hops, the client is the N-th
//! address from the right of the `X-Forwarded-For` the request arrived with; every entry
//! to the left of it was written by the client and may be forged, so it is never read.
//! With N = 0 (the default) the header is ignored and the peer address is the client.
//! Optionally, the header is believed only from peers in `trusted_proxies`, so a client
//! that reaches the service directly cannot choose its own key.

use std::net::{IpAddr, SocketAddr};

use http::{Extensions, HeaderMap};
use ipnet::IpNet;

/// How the client address is found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientAddress {
    /// Proxies in front of this service that append to `X-Forwarded-For` (Envoy's
    /// `xff_num_trusted_hops`); 0 ignores the header.
    pub trusted_hops: u32,
    /// When not empty, `X-Forwarded-For` is read only if the peer is in one of these
    /// networks; from any other peer the peer address is the client.
    pub trusted_proxies: Vec<IpNet>,
}

/// The peer address a server put in the request's extensions: ours ([`PeerAddr`]), a bare
/// [`SocketAddr`] (hyper users insert one), axum's `ConnectInfo<SocketAddr>` or tonic's
/// `TcpConnectInfo` (with those features).
pub fn peer_addr(ext: &Extensions) -> Option<IpAddr> {
    // The framework's own first: it is there on every request of an axum or tonic server.
    #[cfg(feature = "axum")]
    if let Some(c) = ext.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(c.0.ip());
    }
    #[cfg(feature = "tonic")]
    if let Some(a) = ext
        .get::<tonic::transport::server::TcpConnectInfo>()
        .and_then(|c| c.remote_addr())
    {
        return Some(a.ip());
    }
    if let Some(p) = ext.get::<PeerAddr>() {
        return Some(p.0.ip());
    }
    ext.get::<SocketAddr>().map(SocketAddr::ip)
}

/// The peer's address, for servers that put nothing of their own in the extensions:
/// insert it into each request before the layer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

impl ClientAddress {
    /// The client's address for a request from `peer` with `headers`; `None` when the
    /// peer is unknown and no trusted header names the client.
    #[inline]
    pub fn resolve(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Option<IpAddr> {
        if self.trusted_hops == 0 {
            return peer;
        }
        if !self.trusted_proxies.is_empty()
            && !peer.is_some_and(|p| self.trusted_proxies.iter().any(|n| n.contains(&p)))
        {
            return peer;
        }
        self.forwarded_client(headers).or(peer)
    }

    /// The N-th entry from the right of every `X-Forwarded-For` line, in order; `None`
    /// when there are fewer entries or that one is not an address.
    fn forwarded_client(&self, headers: &HeaderMap) -> Option<IpAddr> {
        let mut wanted = self.trusted_hops as usize;
        // The lines from the last, each line's entries from the right. A line that is not
        // text ends the walk: what lies left of it cannot be placed.
        for line in headers.get_all("x-forwarded-for").iter().rev() {
            let line = line.to_str().ok()?;
            for entry in line.rsplit(',') {
                wanted -= 1;
                if wanted == 0 {
                    return parse_entry(entry.trim());
                }
            }
        }
        None
    }
}

/// An `X-Forwarded-For` entry: an address, possibly with a port (`1.2.3.4:5`,
/// `[::1]:5`), as some proxies write it.
fn parse_entry(s: &str) -> Option<IpAddr> {
    s.parse::<IpAddr>()
        .ok()
        .or_else(|| s.parse::<SocketAddr>().ok().map(|a| a.ip()))
}

/// `ip` with only its first `v4` (IPv4) or `v6` (IPv6) bits kept, as a network
/// (`10.1.2.0/24`): Envoy's `masked_remote_address`.
pub fn masked(ip: IpAddr, v4: u8, v6: u8) -> IpNet {
    let prefix = if ip.is_ipv4() {
        v4.min(32)
    } else {
        v6.min(128)
    };
    IpNet::new(ip, prefix).expect("prefix clamped").trunc()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(lines: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append("x-forwarded-for", l.parse().unwrap());
        }
        h
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn takes_the_nth_address_from_the_right() {
        let peer = ip("10.0.0.9");
        let two = ClientAddress {
            trusted_hops: 2,
            ..Default::default()
        };
        let h = headers(&["6.6.6.6, 1.1.1.1", "10.0.0.1"]);
        assert_eq!(two.resolve(peer, &h), ip("1.1.1.1"));
        let one = ClientAddress {
            trusted_hops: 1,
            ..Default::default()
        };
        assert_eq!(one.resolve(peer, &h), ip("10.0.0.1"));
        // Fewer entries than hops, or garbage where the client should be: the peer.
        let three = ClientAddress {
            trusted_hops: 3,
            ..Default::default()
        };
        assert_eq!(three.resolve(peer, &headers(&["1.1.1.1"])), peer);
        assert_eq!(one.resolve(peer, &headers(&["1.1.1.1, nonsense"])), peer);
        assert_eq!(one.resolve(peer, &headers(&["[::1]:80"])), ip("::1"));
        // No hops trusted: the header is never read.
        assert_eq!(ClientAddress::default().resolve(peer, &h), peer);
    }

    #[test]
    fn believes_the_header_only_from_trusted_proxies() {
        let c = ClientAddress {
            trusted_hops: 1,
            trusted_proxies: vec!["10.0.0.0/8".parse().unwrap()],
        };
        let h = headers(&["1.1.1.1"]);
        assert_eq!(c.resolve(ip("10.2.3.4"), &h), ip("1.1.1.1"));
        assert_eq!(c.resolve(ip("192.168.0.1"), &h), ip("192.168.0.1"));
        assert_eq!(c.resolve(None, &h), None);
    }

    #[test]
    fn masks_to_the_network() {
        let v4 = masked("10.1.2.3".parse().unwrap(), 24, 64);
        assert_eq!(v4.to_string(), "10.1.2.0/24");
        let v6 = masked("2001:db8::1:2".parse().unwrap(), 24, 64);
        assert_eq!(v6.to_string(), "2001:db8::/64");
    }
}
