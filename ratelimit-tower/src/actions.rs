//! Descriptors from a request, built the way Envoy's rate limit actions build them.
//!
//! A layer holds several action lists (an Envoy route's `rate_limits`); each list makes
//! one descriptor, its actions one entry each, in order. As in Envoy, a list whose action
//! cannot produce its entry (a missing header, a `header_value_match` that does not
//! match, an unknown client address) sends no descriptor at all, except a header action
//! with `skip_if_absent`, which only leaves its entry out. A request with no descriptor is
//! not limited.

use std::fmt::Write as _;
use std::sync::Arc;

use ratelimit_core::{Descriptor, Entry, Request};

use crate::client::masked;
use crate::matcher::{HeaderMatcher, HeaderSource, RequestInfo};

/// A custom action: an entry from anything in the request, or `None` to send no
/// descriptor for its list.
pub type Extractor = Arc<dyn Fn(&RequestInfo<'_>) -> Option<Entry> + Send + Sync>;

/// One entry of a descriptor: one of Envoy's rate limit actions, or a closure.
#[derive(Clone)]
#[non_exhaustive]
pub enum Action {
    /// `request_headers`: the value of a header (or `:method`, `:path`, `:authority`,
    /// `:scheme`) under `descriptor_key`.
    RequestHeader {
        /// The header read.
        header: HeaderSource,
        /// The entry's key.
        descriptor_key: String,
        /// When the header is absent, leave the entry out instead of the descriptor.
        skip_if_absent: bool,
    },
    /// `remote_address`: the client address under `remote_address`.
    RemoteAddress,
    /// `masked_remote_address`: the client's network (`10.1.2.0/24`) under
    /// `masked_remote_address`.
    MaskedRemoteAddress {
        /// Bits of an IPv4 address kept.
        v4_prefix_len: u8,
        /// Bits of an IPv6 address kept.
        v6_prefix_len: u8,
    },
    /// The method under `descriptor_key` (Envoy: `request_headers` of `:method`).
    Method {
        /// The entry's key.
        descriptor_key: String,
    },
    /// The path without its query under `descriptor_key`.
    Path {
        /// The entry's key.
        descriptor_key: String,
    },
    /// `generic_key`: a constant entry.
    GenericKey {
        /// The entry's key (Envoy's default: `generic_key`).
        descriptor_key: String,
        /// The entry's value.
        descriptor_value: String,
    },
    /// `header_value_match`: a constant entry when every matcher passes (or, with
    /// `expect_match: false`, when not all do).
    HeaderValueMatch {
        /// The entry's key (Envoy's default: `header_match`).
        descriptor_key: String,
        /// The entry's value.
        descriptor_value: String,
        /// Whether the entry is produced on a match (`true`) or on a mismatch.
        expect_match: bool,
        /// All must pass.
        headers: Vec<HeaderMatcher>,
    },
    /// Anything else: a closure.
    Custom(Extractor),
}

impl std::fmt::Debug for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Custom(_) => f.write_str("Custom(..)"),
            Action::RequestHeader {
                header,
                descriptor_key,
                skip_if_absent,
            } => f
                .debug_struct("RequestHeader")
                .field("header", header)
                .field("descriptor_key", descriptor_key)
                .field("skip_if_absent", skip_if_absent)
                .finish(),
            Action::RemoteAddress => f.write_str("RemoteAddress"),
            Action::MaskedRemoteAddress {
                v4_prefix_len,
                v6_prefix_len,
            } => write!(f, "MaskedRemoteAddress({v4_prefix_len}, {v6_prefix_len})"),
            Action::Method { descriptor_key } => write!(f, "Method({descriptor_key})"),
            Action::Path { descriptor_key } => write!(f, "Path({descriptor_key})"),
            Action::GenericKey {
                descriptor_key,
                descriptor_value,
            } => write!(f, "GenericKey({descriptor_key}={descriptor_value})"),
            Action::HeaderValueMatch {
                descriptor_key,
                descriptor_value,
                expect_match,
                headers,
            } => f
                .debug_struct("HeaderValueMatch")
                .field("descriptor_key", descriptor_key)
                .field("descriptor_value", descriptor_value)
                .field("expect_match", expect_match)
                .field("headers", headers)
                .finish(),
        }
    }
}

impl Action {
    /// `request_headers`: `header`'s value under `descriptor_key`.
    ///
    /// # Panics
    /// If `header` is not a valid header name; [`HeaderSource::parse`] reports it instead.
    pub fn header(header: &str, descriptor_key: &str) -> Action {
        Action::RequestHeader {
            header: HeaderSource::parse(header).expect("a valid header name"),
            descriptor_key: descriptor_key.to_owned(),
            skip_if_absent: false,
        }
    }

    /// `remote_address`.
    pub fn remote_address() -> Action {
        Action::RemoteAddress
    }

    /// The method under `method`.
    pub fn method() -> Action {
        Action::Method {
            descriptor_key: "method".into(),
        }
    }

    /// The path under `path`.
    pub fn path() -> Action {
        Action::Path {
            descriptor_key: "path".into(),
        }
    }

    /// `generic_key`: `generic_key` = `value`.
    pub fn generic_key(value: &str) -> Action {
        Action::GenericKey {
            descriptor_key: "generic_key".into(),
            descriptor_value: value.to_owned(),
        }
    }

    /// `header_value_match`: `header_match` = `value` when every matcher passes.
    pub fn header_value_match(value: &str, headers: Vec<HeaderMatcher>) -> Action {
        Action::HeaderValueMatch {
            descriptor_key: "header_match".into(),
            descriptor_value: value.to_owned(),
            expect_match: true,
            headers,
        }
    }

    /// A closure's entry.
    pub fn custom(f: impl Fn(&RequestInfo<'_>) -> Option<Entry> + Send + Sync + 'static) -> Action {
        Action::Custom(Arc::new(f))
    }

    /// Whether the action reads the client address (worth finding only then).
    pub(crate) fn needs_client(&self) -> bool {
        matches!(
            self,
            Action::RemoteAddress | Action::MaskedRemoteAddress { .. } | Action::Custom(_)
        )
    }

    /// Writes this action's entry into `slot`: whether it did, or left it out
    /// (`skip_if_absent`), or could not (the descriptor is not sent).
    fn write(&self, req: &RequestInfo<'_>, slot: &mut Entry) -> Wrote {
        let (key, value): (&str, &dyn std::fmt::Display) = match self {
            Action::RequestHeader {
                header,
                descriptor_key,
                skip_if_absent,
            } => match header.read(req) {
                Some(v) => return set(slot, descriptor_key, &v),
                None if *skip_if_absent => return Wrote::Skipped,
                None => return Wrote::Failed,
            },
            Action::RemoteAddress => return remote_address(req, slot),
            Action::MaskedRemoteAddress {
                v4_prefix_len,
                v6_prefix_len,
            } => match req.client {
                Some(ip) => {
                    let net = masked(ip, *v4_prefix_len, *v6_prefix_len);
                    return set(slot, "masked_remote_address", &net);
                }
                None => return Wrote::Failed,
            },
            Action::Method { descriptor_key } => (descriptor_key, &req.method),
            Action::Path { descriptor_key } => {
                return set(slot, descriptor_key, &req.uri.path());
            }
            Action::GenericKey {
                descriptor_key,
                descriptor_value,
            } => (descriptor_key, descriptor_value),
            Action::HeaderValueMatch {
                descriptor_key,
                descriptor_value,
                expect_match,
                headers,
            } => {
                let all = headers.iter().all(|m| m.matches(req));
                if all != *expect_match {
                    return Wrote::Failed;
                }
                (descriptor_key, descriptor_value)
            }
            Action::Custom(f) => match f(req) {
                Some(e) => {
                    *slot = e;
                    return Wrote::Entry;
                }
                None => return Wrote::Failed,
            },
        };
        set(slot, key, value)
    }
}

enum Wrote {
    Entry,
    Skipped,
    Failed,
}

/// `remote_address`'s entry, or `Failed` when the client is unknown.
#[inline]
fn remote_address(req: &RequestInfo<'_>, slot: &mut Entry) -> Wrote {
    let Some(ip) = req.client else {
        return Wrote::Failed;
    };
    set_key(slot, "remote_address");
    slot.value.clear();
    write_ip(&mut slot.value, ip);
    Wrote::Entry
}

/// Overwrites `slot` in place, keeping its strings' room for the next request.
fn set(slot: &mut Entry, key: &str, value: &dyn std::fmt::Display) -> Wrote {
    set_key(slot, key);
    slot.value.clear();
    let _ = write!(slot.value, "{value}");
    Wrote::Entry
}

/// The slot's key, most often already the one the same action wrote last time.
#[inline]
fn set_key(slot: &mut Entry, key: &str) {
    if slot.key != key {
        slot.key.clear();
        slot.key.push_str(key);
    }
}

/// `ip` as `Display` writes it; IPv4 (the common case) a character at a time, without the
/// formatting machinery (in safe code, a stack buffer would have to be validated as UTF-8,
/// which costs more than the pushes).
#[inline]
fn write_ip(out: &mut String, ip: std::net::IpAddr) {
    let std::net::IpAddr::V4(v4) = ip else {
        let _ = write!(out, "{ip}");
        return;
    };
    out.reserve(15);
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        let [len, d0, d1, d2] = OCTETS[usize::from(octet)];
        out.push(char::from(d0));
        if len > 1 {
            out.push(char::from(d1));
        }
        if len > 2 {
            out.push(char::from(d2));
        }
    }
}

/// Each octet's decimal digits, as `[count, first, second, third]`: looked up rather than
/// divided out.
const OCTETS: [[u8; 4]; 256] = {
    let mut t = [[0; 4]; 256];
    let mut i = 0;
    while i < 256 {
        let o = i as u8;
        t[i] = if o >= 100 {
            [3, b'0' + o / 100, b'0' + o / 10 % 10, b'0' + o % 10]
        } else if o >= 10 {
            [2, b'0' + o / 10, b'0' + o % 10, 0]
        } else {
            [1, b'0' + o, 0, 0]
        };
        i += 1;
    }
    t
};

/// The action lists of a layer: one descriptor each.
#[derive(Debug, Clone, Default)]
pub struct Descriptors {
    lists: Vec<Vec<Action>>,
    needs_client: bool,
}

impl Descriptors {
    /// Adds a list: one more descriptor per request.
    pub fn push(&mut self, actions: Vec<Action>) {
        self.needs_client |= actions.iter().any(Action::needs_client);
        self.lists.push(actions);
    }

    /// No list at all.
    pub fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }

    /// Whether any action reads the client address.
    pub(crate) fn needs_client(&self) -> bool {
        self.needs_client
    }

    /// Fills `out` (domain already set) with this request's descriptors, reusing the
    /// strings a previous request left there; how many were made.
    #[inline]
    pub fn fill(&self, req: &RequestInfo<'_>, out: &mut Request) -> usize {
        let mut made = 0;
        for actions in &self.lists {
            if out.descriptors.len() == made {
                out.descriptors.push(Descriptor::default());
            }
            let d = &mut out.descriptors[made];
            d.limit = None;
            d.hits_addend = None;
            let mut entries = 0;
            let mut sent = true;
            for a in actions {
                if d.entries.len() == entries {
                    d.entries.push(Entry::default());
                }
                let slot = &mut d.entries[entries];
                // The usual action without a call through the general one.
                let wrote = match a {
                    Action::RemoteAddress => remote_address(req, slot),
                    _ => a.write(req, slot),
                };
                match wrote {
                    Wrote::Entry => entries += 1,
                    Wrote::Skipped => {}
                    Wrote::Failed => {
                        sent = false;
                        break;
                    }
                }
            }
            // Envoy sends no descriptor without entries either.
            if sent && entries > 0 {
                d.entries.truncate(entries);
                made += 1;
            }
        }
        out.descriptors.truncate(made);
        made
    }
}

#[cfg(test)]
mod tests;
