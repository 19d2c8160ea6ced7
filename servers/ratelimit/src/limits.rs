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
    /// The defaults of the settings.
    pub const DEFAULT: RequestLimits = RequestLimits {
        max_descriptors: 1000,
        max_entries: 100,
        max_string_bytes: 64 << 10,
    };

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

    /// Checks an encoded `RateLimitRequest` before it is decoded, in one walk over its
    /// fields that allocates nothing: decoding a 4 MiB message of tiny descriptors took
    /// longer than deciding it, and stalled the connection's thread as much. Bytes that are
    /// no valid encoding pass, for the decoder to refuse with its own error. Whatever
    /// [`RequestLimits::check_pb`] would refuse once decoded, this refuses.
    pub fn check_encoded(&self, message: &[u8]) -> Result<(), TooLarge> {
        let mut descriptors = 0;
        for field in Fields(message) {
            match field {
                Some((1, Wire::Bytes(domain))) => self.string_len("domain", domain.len())?,
                Some((2, Wire::Bytes(descriptor))) => {
                    if descriptors < self.max_descriptors {
                        self.check_encoded_descriptor(descriptors, descriptor)?;
                    }
                    descriptors += 1;
                }
                Some(_) => {}
                None => return Ok(()),
            }
        }
        if descriptors > self.max_descriptors {
            return Err(self.too_many_descriptors(descriptors));
        }
        Ok(())
    }

    fn check_encoded_descriptor(&self, index: usize, descriptor: &[u8]) -> Result<(), TooLarge> {
        let mut entries = 0;
        for field in Fields(descriptor) {
            let Some((1, Wire::Bytes(entry))) = field else {
                continue;
            };
            entries += 1;
            for f in Fields(entry) {
                match f {
                    Some((1, Wire::Bytes(key))) => self.string_len("descriptor key", key.len())?,
                    Some((2, Wire::Bytes(value))) => {
                        self.string_len("descriptor value", value.len())?
                    }
                    _ => {}
                }
            }
        }
        if entries > self.max_entries {
            return Err(self.too_many_entries(index, entries));
        }
        Ok(())
    }

    fn check<'a, D, E>(&self, domain: &str, descriptors: D) -> Result<(), TooLarge>
    where
        D: ExactSizeIterator<Item = E>,
        E: ExactSizeIterator<Item = (&'a str, &'a str)>,
    {
        self.string_len("domain", domain.len())?;
        if descriptors.len() > self.max_descriptors {
            return Err(self.too_many_descriptors(descriptors.len()));
        }
        for (i, entries) in descriptors.enumerate() {
            if entries.len() > self.max_entries {
                return Err(self.too_many_entries(i, entries.len()));
            }
            for (key, value) in entries {
                self.string_len("descriptor key", key.len())?;
                self.string_len("descriptor value", value.len())?;
            }
        }
        Ok(())
    }

    fn too_many_descriptors(&self, n: usize) -> TooLarge {
        TooLarge(format!(
            "request has {n} descriptors, more than the {} allowed (MAX_REQUEST_DESCRIPTORS)",
            self.max_descriptors
        ))
    }

    fn too_many_entries(&self, index: usize, n: usize) -> TooLarge {
        TooLarge(format!(
            "descriptor {index} has {n} entries, more than the {} allowed \
             (MAX_DESCRIPTOR_ENTRIES)",
            self.max_entries
        ))
    }

    fn string_len(&self, what: &str, len: usize) -> Result<(), TooLarge> {
        if len > self.max_string_bytes {
            return Err(TooLarge(format!(
                "a {what} of {len} bytes is longer than the {} allowed (MAX_REQUEST_STRING_BYTES)",
                self.max_string_bytes
            )));
        }
        Ok(())
    }
}

/// One protobuf field's value, as much as the walk needs.
enum Wire<'a> {
    Bytes(&'a [u8]),
    Other,
}

/// The fields of an encoded message, in order; `None` (then nothing more) where the bytes
/// stop being a valid encoding.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for (i, &byte) in self.0.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.0 = &self.0[i + 1..];
                return Some(value);
            }
        }
        None
    }

    fn take(&mut self, n: u64) -> Option<&'a [u8]> {
        let n = usize::try_from(n).ok().filter(|&n| n <= self.0.len())?;
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(taken)
    }

    fn field(&mut self) -> Option<(u64, Wire<'a>)> {
        let key = self.varint()?;
        let value = self.value(key, 0)?;
        Some((key >> 3, value))
    }

    /// The value of a field whose key was `key`, inside `depth` groups.
    fn value(&mut self, key: u64, depth: u32) -> Option<Wire<'a>> {
        match key & 7 {
            0 => self.varint().map(|_| Wire::Other),
            1 => self.take(8).map(|_| Wire::Other),
            2 => {
                let len = self.varint()?;
                self.take(len).map(Wire::Bytes)
            }
            // No field of these messages is a group, but prost skips an unknown one and
            // decodes what follows it, so the walk must go on after it too.
            3 => self.skip_group(key >> 3, depth + 1).map(|()| Wire::Other),
            5 => self.take(4).map(|_| Wire::Other),
            // An end of group that was never started, or wire types 6 and 7: the decoder
            // refuses these.
            _ => None,
        }
    }

    /// Skips to the end of the group numbered `number`, the `depth`th nested one.
    fn skip_group(&mut self, number: u64, depth: u32) -> Option<()> {
        // Deeper than prost's recursion limit, the decoder refuses the message anyway.
        if depth > PROST_RECURSION_LIMIT {
            return None;
        }
        loop {
            let key = self.varint()?;
            if key & 7 == 4 {
                return (key >> 3 == number).then_some(());
            }
            self.value(key, depth)?;
        }
    }
}

/// prost's limit on nested messages and groups (`RECURSION_LIMIT`, not public).
const PROST_RECURSION_LIMIT: u32 = 100;

impl<'a> Iterator for Fields<'a> {
    type Item = Option<(u64, Wire<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_none() {
            self.0 = &[];
        }
        Some(field)
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
    fn the_grpc_form_is_checked_alike_decoded_and_encoded() {
        let cases = [
            request(2, 2, "12345678"),
            request(3, 1, "v"),
            request(1, 3, "v"),
            request(1, 1, "123456789"),
            Request::new("a-long-domain", Vec::new()),
        ];
        for req in cases {
            let pb = crate::convert::request_to_pb(&req);
            let encoded = prost::Message::encode_to_vec(&pb);
            assert_eq!(
                LIMITS.check_encoded(&encoded),
                LIMITS.check_pb(&pb),
                "{req:?}"
            );
            assert_eq!(LIMITS.check_pb(&pb), LIMITS.check_request(&req), "{req:?}");
        }
    }

    /// `bytes` after an unknown group (field 13: start, a varint field inside, end): prost
    /// skips such a group, so a check that stopped at it would let the rest of the message
    /// through unchecked.
    fn with_group(bytes: &[u8]) -> Vec<u8> {
        [&[0x6b, 0x28, 0x0a, 0x6c][..], bytes].concat()
    }

    #[test]
    fn unknown_groups_are_skipped_as_the_decoder_skips_them() {
        let too_long_domain = Request::new("a-long-domain", Vec::new());
        let too_long_value = request(1, 1, "123456789");
        for (req, inner) in [(too_long_domain, false), (too_long_value, true)] {
            let encoded = prost::Message::encode_to_vec(&crate::convert::request_to_pb(&req));
            let mut cases = vec![with_group(&encoded)];
            if inner {
                // Inside the entry, before its key: re-encode the lengths around it.
                let entry = with_group(b"\x0a\x02k0\x12\x09123456789");
                let mut descriptor = vec![0x0a, entry.len() as u8];
                descriptor.extend_from_slice(&entry);
                let mut message = b"\x0a\x06domain\x12".to_vec();
                message.push(descriptor.len() as u8);
                message.extend_from_slice(&descriptor);
                cases.push(message);
            }
            for bytes in cases {
                let decoded: rls::RateLimitRequest =
                    prost::Message::decode(&bytes[..]).expect("prost skips the group");
                assert!(LIMITS.check_pb(&decoded).is_err(), "{req:?}");
                assert_eq!(
                    LIMITS.check_encoded(&bytes),
                    LIMITS.check_pb(&decoded),
                    "{bytes:?}"
                );
            }
        }
    }

    #[test]
    fn groups_nested_as_deep_as_the_decoder_goes_are_skipped() {
        let encoded = prost::Message::encode_to_vec(&crate::convert::request_to_pb(&Request::new(
            "a-long-domain",
            Vec::new(),
        )));
        for depth in [100, 101] {
            let mut bytes = vec![0x6b; depth];
            bytes.extend(std::iter::repeat_n(0x6c, depth));
            bytes.extend_from_slice(&encoded);
            let decoded = <rls::RateLimitRequest as prost::Message>::decode(&bytes[..]);
            match depth {
                100 => assert_eq!(
                    LIMITS.check_encoded(&bytes),
                    LIMITS.check_pb(&decoded.expect("within prost's limit"))
                ),
                _ => {
                    assert!(decoded.is_err(), "past prost's limit");
                    assert_eq!(LIMITS.check_encoded(&bytes), Ok(()));
                }
            }
        }
    }

    #[test]
    fn bytes_that_are_no_encoding_are_left_to_the_decoder() {
        for bytes in [&[0x0a, 0x05, b'a'][..], &[0xff; 11], &[0x0b], &[0x12, 0x80]] {
            assert_eq!(LIMITS.check_encoded(bytes), Ok(()));
        }
    }
}
