//! Plain request and response types: the shape of `envoy.service.ratelimit.v3` without
//! any protobuf or gRPC dependency, so embedding needs neither.

use crate::store::MAX_HITS;
use crate::unit::Unit;

/// One `(key, value)` pair of a descriptor. Keys and values are case-sensitive.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Entry {
    /// The descriptor key, e.g. `remote_address`.
    pub key: String,
    /// The runtime value; may be empty.
    pub value: String,
}

impl Entry {
    /// Builds an entry from anything string-like.
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Self {
        Entry {
            key: key.into(),
            value: value.into(),
        }
    }
}

/// A limit supplied by the caller for one descriptor (`RateLimitOverride`). When present,
/// and the domain is configured, it replaces whatever the rules say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitOverride {
    /// Allowed hits per window.
    pub requests_per_unit: u32,
    /// The window.
    pub unit: Unit,
}

/// An ordered list of entries that is matched against the rule tree of a domain.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Descriptor {
    /// The entries, outermost first.
    pub entries: Vec<Entry>,
    /// A caller-supplied limit that replaces the configured one.
    pub limit: Option<LimitOverride>,
    /// Hits to add for this descriptor. `Some(0)` checks without counting; `None` falls
    /// back to the request's `hits_addend`.
    pub hits_addend: Option<u64>,
}

impl Descriptor {
    /// A descriptor from `(key, value)` pairs.
    pub fn new<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Descriptor {
            entries: pairs.into_iter().map(|(k, v)| Entry::new(k, v)).collect(),
            limit: None,
            hits_addend: None,
        }
    }

    /// Sets a caller-supplied limit.
    pub fn with_limit(mut self, requests_per_unit: u32, unit: Unit) -> Self {
        self.limit = Some(LimitOverride {
            requests_per_unit,
            unit,
        });
        self
    }

    /// Sets this descriptor's hits.
    pub fn with_hits(mut self, hits: u64) -> Self {
        self.hits_addend = Some(hits);
        self
    }
}

/// A decision request: a domain and one or more descriptors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// The domain whose rules apply. Must not be empty.
    pub domain: String,
    /// The descriptors; one status per descriptor is returned, in order. Must not be empty.
    pub descriptors: Vec<Descriptor>,
    /// Hits for descriptors that carry none of their own; 0 counts as 1.
    pub hits_addend: u32,
}

impl Request {
    /// A request for `domain` with the given descriptors and one hit each.
    pub fn new(domain: impl Into<String>, descriptors: Vec<Descriptor>) -> Self {
        Request {
            domain: domain.into(),
            descriptors,
            hits_addend: 0,
        }
    }

    /// Hits counted for descriptor `i` (upstream's rule: the descriptor's own wrapper when
    /// present, even 0, else the request's, at least 1), at most [`MAX_HITS`]: more would
    /// decide nothing differently, and would overflow stores' counters and the statistics.
    #[inline]
    pub fn hits_for(&self, d: &Descriptor) -> u64 {
        d.hits_addend
            .map_or(u64::from(self.hits_addend.max(1)), |h| h.min(MAX_HITS))
    }
}

/// The decision for a descriptor or a whole request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Code {
    /// Never produced by a successful decision; present for wire parity.
    #[default]
    Unknown,
    /// Within limits.
    Ok,
    /// At least one limit is exceeded.
    OverLimit,
}

impl Code {
    /// Wire name (`OK`, `OVER_LIMIT`, `UNKNOWN`).
    pub const fn name(self) -> &'static str {
        match self {
            Code::Unknown => "UNKNOWN",
            Code::Ok => "OK",
            Code::OverLimit => "OVER_LIMIT",
        }
    }

    /// Wire number (0, 1, 2).
    pub const fn proto_number(self) -> i32 {
        match self {
            Code::Unknown => 0,
            Code::Ok => 1,
            Code::OverLimit => 2,
        }
    }
}

/// The limit that applied to a descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentLimit {
    /// Allowed hits per window.
    pub requests_per_unit: u32,
    /// The window.
    pub unit: Unit,
    /// The rule's `name`, empty when it has none or the limit came from an override.
    pub name: String,
    /// Hits the limit allows at once: a token bucket's `burst`, else `requests_per_unit`.
    /// Not on the wire (the RLS proto has no field for it); embedders' `RateLimit-Policy`
    /// headers need it.
    pub capacity: u32,
    /// The span the limit counts over, in seconds: the window (`unit` × `unit_multiplier`),
    /// or the time an empty token bucket takes to fill. Not on the wire either.
    pub window_seconds: u64,
}

impl CurrentLimit {
    /// A fixed window of one `unit`, as the wire describes every limit.
    pub fn fixed(requests_per_unit: u32, unit: Unit, name: impl Into<String>) -> Self {
        CurrentLimit {
            requests_per_unit,
            unit,
            name: name.into(),
            capacity: requests_per_unit,
            window_seconds: unit.seconds(),
        }
    }
}

/// The answer for one descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescriptorStatus {
    /// OK or OVER_LIMIT (a shadow-mode rule always reports OK).
    pub code: Code,
    /// The limit that applied; `None` when no rule matched or the rule is unlimited.
    pub current_limit: Option<CurrentLimit>,
    /// Hits left in the window; `u32::MAX` for unlimited rules, 0 when over the limit.
    pub limit_remaining: u32,
    /// Seconds until the window resets; set exactly when `current_limit` is.
    pub duration_until_reset: Option<u64>,
}

/// A header the proxy should add to its response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Header name.
    pub key: String,
    /// Header value.
    pub value: String,
}

/// The decision for a whole request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Response {
    /// OVER_LIMIT when any (non-quota) descriptor is over its limit.
    pub overall_code: Code,
    /// One status per request descriptor, in request order.
    pub statuses: Statuses,
    /// `RateLimit-*` headers, only when enabled in [`crate::LimiterSettings`].
    pub response_headers_to_add: Vec<Header>,
    /// The `dynamic_metadata` struct, only when enabled in [`crate::LimiterSettings`].
    /// Boxed: rarely on, and a `Response` moved whole (the async API returns one) is
    /// copied with inline moves only up to 128 bytes, with a `memcpy` call beyond.
    pub dynamic_metadata: Option<Box<serde_json::Map<String, serde_json::Value>>>,
}

/// The statuses of a response, one per request descriptor: a slice to read, kept inline
/// for the usual handful of descriptors so that deciding a request allocates nothing here.
///
/// ```
/// use ratelimit_core::{Code, DescriptorStatus, Statuses};
///
/// let s: Statuses = vec![DescriptorStatus::default(); 2].into();
/// assert_eq!((s.len(), s[1].code), (2, Code::Unknown));
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Statuses(smallvec::SmallVec<[DescriptorStatus; STATUSES_INLINE]>);

/// Statuses held without a heap allocation.
const STATUSES_INLINE: usize = 1;

impl Statuses {
    /// Empty, with room for `n` statuses.
    #[inline]
    pub fn with_capacity(n: usize) -> Self {
        Statuses(smallvec::SmallVec::with_capacity(n))
    }

    /// Appends a status.
    #[inline]
    pub fn push(&mut self, s: DescriptorStatus) {
        self.0.push(s);
    }

    /// Removes every status, keeping the room they took.
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// Makes room for `n` more statuses.
    #[inline]
    pub(crate) fn reserve(&mut self, n: usize) {
        self.0.reserve(n);
    }

    /// The statuses as a `Vec`.
    pub fn into_vec(self) -> Vec<DescriptorStatus> {
        self.0.into_vec()
    }
}

impl std::ops::Deref for Statuses {
    type Target = [DescriptorStatus];
    #[inline] // a test of where the statuses are, on every decision
    fn deref(&self) -> &[DescriptorStatus] {
        &self.0
    }
}

impl std::ops::DerefMut for Statuses {
    #[inline]
    fn deref_mut(&mut self) -> &mut [DescriptorStatus] {
        &mut self.0
    }
}

impl From<Vec<DescriptorStatus>> for Statuses {
    fn from(v: Vec<DescriptorStatus>) -> Self {
        Statuses(smallvec::SmallVec::from_vec(v))
    }
}

impl FromIterator<DescriptorStatus> for Statuses {
    fn from_iter<I: IntoIterator<Item = DescriptorStatus>>(iter: I) -> Self {
        Statuses(iter.into_iter().collect())
    }
}

impl IntoIterator for Statuses {
    type Item = DescriptorStatus;
    type IntoIter = StatusesIntoIter;
    fn into_iter(self) -> Self::IntoIter {
        StatusesIntoIter(self.0.into_iter())
    }
}

/// The owning iterator of [`Statuses`] (a wrapper, so the inline storage stays private).
#[derive(Debug)]
pub struct StatusesIntoIter(smallvec::IntoIter<[DescriptorStatus; STATUSES_INLINE]>);

impl Iterator for StatusesIntoIter {
    type Item = DescriptorStatus;
    fn next(&mut self) -> Option<DescriptorStatus> {
        self.0.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for StatusesIntoIter {}

impl<'a> IntoIterator for &'a Statuses {
    type Item = &'a DescriptorStatus;
    type IntoIter = std::slice::Iter<'a, DescriptorStatus>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    /// The async API returns a `Response` by value through a few layers; up to 128 bytes
    /// those moves are inline stores, beyond it each is a `memcpy` call (three per
    /// decision, +58 instructions, when #31's limit fields took it to 144 bytes).
    #[test]
    fn a_response_moves_without_memcpy() {
        assert!(
            std::mem::size_of::<super::Response>() <= 128,
            "{} bytes",
            std::mem::size_of::<super::Response>()
        );
    }
}
