//! The `ShouldRateLimit` answer's wire bytes, written by hand for the answers the server
//! gives every request: an overall code and one status per descriptor (its code, limit,
//! remaining count and reset time). prost's derived encoder walks each nested message once
//! to size it and again per enclosing level, and writes field by field through the
//! buffer's trait calls; here the sizes are worked out once and the message is assembled
//! in a stack buffer, then copied out in one piece. The bytes are prost's (fields in tag
//! order, defaults left out), which the tests check on random answers. Any other answer
//! (headers, metadata, quota fields, negative enums, or past the stack buffer) goes
//! through prost.

use bytes::BufMut;
use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, EncodeBuf, Encoder};

use crate::pb::rls;
use crate::pb::rls::rate_limit_response::{DescriptorStatus, RateLimit};

/// Answers up to this many bytes are assembled on the stack: ten descriptors or so.
const STACK_BYTES: usize = 512;

/// The call's encoder: [`encode`] for the usual answer, prost for any other.
#[derive(Debug, Default)]
pub struct RlsEncoder {
    buffer_settings: BufferSettings,
}

impl Encoder for RlsEncoder {
    type Item = rls::RateLimitResponse;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        // An `EncodeBuf` grows as it is written: prost's only error (no room) cannot occur.
        encode_into(&item, buf).map_err(|e| Status::internal(e.to_string()))
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.buffer_settings
    }
}

/// Appends `resp`'s wire bytes to `buf`: the same bytes as prost's `encode`, by hand
/// when [`encode`] knows the answer.
pub fn encode_into(
    resp: &rls::RateLimitResponse,
    buf: &mut impl BufMut,
) -> Result<(), prost::EncodeError> {
    let mut out = Out::new();
    if encode(resp, &mut out) {
        buf.put_slice(out.bytes());
        Ok(())
    } else {
        resp.encode(buf)
    }
}

/// Writes `resp` into `out` as prost would, if it is an answer this encoder knows and
/// fits; `false` (with `out` in any state) otherwise.
fn encode(resp: &rls::RateLimitResponse, out: &mut Out) -> bool {
    if !resp.response_headers_to_add.is_empty()
        || !resp.request_headers_to_add.is_empty()
        || !resp.raw_body.is_empty()
        || resp.dynamic_metadata.is_some()
        || resp.quota.is_some()
        || resp.overall_code < 0
    {
        return false;
    }
    out.uint(1, resp.overall_code as u64);
    for s in &resp.statuses {
        let Some(len) = status_len(s) else {
            return false;
        };
        if !out.message(2, len) {
            return false;
        }
        out.uint(1, s.code as u64);
        if let Some(l) = &s.current_limit {
            out.message(2, rate_limit_len(l));
            out.uint(1, u64::from(l.requests_per_unit));
            out.uint(2, l.unit as u64);
            out.bytes_field(3, l.name.as_bytes());
        }
        out.uint(3, u64::from(s.limit_remaining));
        if let Some(d) = &s.duration_until_reset {
            out.message(4, duration_len(d));
            // int64 and int32 fields: a negative value is the 10-byte two's complement.
            out.uint(1, d.seconds as u64);
            out.uint(2, i64::from(d.nanos) as u64);
        }
    }
    !out.full
}

/// The encoded length of a status, `None` for one this encoder leaves to prost.
fn status_len(s: &DescriptorStatus) -> Option<usize> {
    if s.quota.is_some() || s.code < 0 {
        return None;
    }
    let mut n = uint_len(s.code as u64) + uint_len(u64::from(s.limit_remaining));
    if let Some(l) = &s.current_limit {
        if l.unit < 0 {
            return None;
        }
        n += message_len(rate_limit_len(l));
    }
    if let Some(d) = &s.duration_until_reset {
        n += message_len(duration_len(d));
    }
    Some(n)
}

fn rate_limit_len(l: &RateLimit) -> usize {
    uint_len(u64::from(l.requests_per_unit)) + uint_len(l.unit as u64) + bytes_len(l.name.len())
}

fn duration_len(d: &prost_types::Duration) -> usize {
    uint_len(d.seconds as u64) + uint_len(i64::from(d.nanos) as u64)
}

/// A varint field's length with its one-byte key, 0 for the default (left out).
fn uint_len(v: u64) -> usize {
    if v == 0 { 0 } else { 1 + varint_len(v) }
}

/// A length-delimited field's length with its one-byte key, 0 when empty (left out).
fn bytes_len(n: usize) -> usize {
    if n == 0 { 0 } else { message_len(n) }
}

/// A present message field's length with its key and length prefix (written even when
/// the message is empty).
fn message_len(n: usize) -> usize {
    1 + varint_len(n as u64) + n
}

fn varint_len(v: u64) -> usize {
    // 7 bits per byte; `| 1` makes 0 one byte.
    (70 - (v | 1).leading_zeros() as usize) / 7
}

/// A message being assembled. Field numbers here are all below 16, so every key is one
/// byte.
struct Out {
    buf: [u8; STACK_BYTES],
    len: usize,
    /// Something did not fit: the caller falls back.
    full: bool,
}

impl Out {
    fn new() -> Self {
        Out {
            buf: [0; STACK_BYTES],
            len: 0,
            full: false,
        }
    }

    /// What was written (all of it when nothing was `full`).
    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// A varint field, left out when 0.
    fn uint(&mut self, field: u8, v: u64) {
        if v != 0 {
            self.byte(field << 3);
            self.varint(v);
        }
    }

    /// A length-delimited field's bytes, left out when empty.
    fn bytes_field(&mut self, field: u8, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        self.byte((field << 3) | 2);
        self.varint(b.len() as u64);
        match self.buf.get_mut(self.len..self.len + b.len()) {
            Some(dst) => {
                dst.copy_from_slice(b);
                self.len += b.len();
            }
            None => self.full = true,
        }
    }

    /// A message field's key and length; its fields follow. `false` when it cannot fit.
    fn message(&mut self, field: u8, len: usize) -> bool {
        self.byte((field << 3) | 2);
        self.varint(len as u64);
        if self.len + len > STACK_BYTES {
            self.full = true;
        }
        !self.full
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte((v as u8) | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    fn byte(&mut self, b: u8) {
        match self.buf.get_mut(self.len) {
            Some(slot) => {
                *slot = b;
                self.len += 1;
            }
            None => self.full = true,
        }
    }
}

#[cfg(test)]
mod tests;
