//! Bounds on the shape of one request, checked before anything is decided: a request's
//! cost grows with its descriptors, entries and string lengths, and a connection thread
//! decides one request at a time, so an unbounded request stalls every connection on it.

use std::fmt;

use crate::pb::rls;

/// The largest request the server decides. The defaults are far above what Envoy sends (a
/// descriptor per rate limit action list, an entry per action, header values within
/// Envoy's 60 KiB header limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// `MAX_REQUEST_DESCRIPTORS` (1000).
    pub max_descriptors: usize,
    /// `MAX_DESCRIPTOR_ENTRIES` (100): entries in one descriptor.
    pub max_entries: usize,
    /// `MAX_REQUEST_STRING_BYTES` (64 KiB): the longest domain, key or value.
    pub max_string_bytes: usize,
}

/// A request over one of the [`RequestLimits`], said in words a client can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge(String);

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl RequestLimits {
    /// Checks a gRPC request before it is converted.
    pub fn check_pb(&self, req: &rls::RateLimitRequest) -> Result<(), TooLarge> {
        self.check(
            &req.domain,
            req.descriptors
                .iter()
                .map(|d| d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()))),
        )
    }

    /// Checks a request parsed from `/json`.
    pub fn check_request(&self, req: &ratelimit_core::Request) -> Result<(), TooLarge> {
        self.check(
            &req.domain,
            req.descriptors
                .iter()
                .map(|d| d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()))),
        )
    }

    fn check<'a, D, E>(&self, domain: &str, descriptors: D) -> Result<(), TooLarge>
    where
        D: ExactSizeIterator<Item = E>,
        E: ExactSizeIterator<Item = (&'a str, &'a str)>,
    {
        self.string("domain", domain)?;
        if descriptors.len() > self.max_descriptors {
            return Err(TooLarge(format!(
                "request has {} descriptors, more than the {} allowed (MAX_REQUEST_DESCRIPTORS)",
                descriptors.len(),
                self.max_descriptors
            )));
        }
        for (i, entries) in descriptors.enumerate() {
            if entries.len() > self.max_entries {
                return Err(TooLarge(format!(
                    "descriptor {i} has {} entries, more than the {} allowed \
                     (MAX_DESCRIPTOR_ENTRIES)",
                    entries.len(),
                    self.max_entries
                )));
            }
            for (key, value) in entries {
                self.string("descriptor key", key)?;
                self.string("descriptor value", value)?;
            }
        }
        Ok(())
    }

    fn string(&self, what: &str, s: &str) -> Result<(), TooLarge> {
        if s.len() > self.max_string_bytes {
            return Err(TooLarge(format!(
                "a {what} of {} bytes is longer than the {} allowed (MAX_REQUEST_STRING_BYTES)",
                s.len(),
                self.max_string_bytes
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimit_core::{Descriptor, Request};

    const LIMITS: RequestLimits = RequestLimits {
        max_descriptors: 2,
        max_entries: 2,
        max_string_bytes: 8,
    };

    fn request(descriptors: usize, entries: usize, value: &str) -> Request {
        let d = Descriptor::new((0..entries).map(|i| (format!("k{i}"), value.to_owned())));
        Request::new("domain", vec![d; descriptors])
    }

    #[test]
    fn requests_within_every_bound_pass() {
        assert_eq!(LIMITS.check_request(&request(2, 2, "12345678")), Ok(()));
    }

    #[test]
    fn each_bound_is_named_in_its_error() {
        let cases = [
            (request(3, 1, "v"), "MAX_REQUEST_DESCRIPTORS"),
            (request(1, 3, "v"), "MAX_DESCRIPTOR_ENTRIES"),
            (request(1, 1, "123456789"), "MAX_REQUEST_STRING_BYTES"),
            (
                Request::new("a-long-domain", Vec::new()),
                "MAX_REQUEST_STRING_BYTES",
            ),
        ];
        for (req, setting) in cases {
            let err = LIMITS.check_request(&req).unwrap_err().to_string();
            assert!(err.contains(setting), "{err}");
        }
    }

    #[test]
    fn the_grpc_form_is_checked_alike() {
        let pb = crate::convert::request_to_pb(&request(3, 1, "v"));
        let err = LIMITS.check_pb(&pb).unwrap_err().to_string();
        assert!(err.contains("3 descriptors"), "{err}");
    }
}
