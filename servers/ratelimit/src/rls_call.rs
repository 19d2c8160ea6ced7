//! The `ShouldRateLimit` call as the gRPC port serves it: prost's decoding, with the
//! request limits checked before the call, and the answer written by
//! [`crate::rls_encode`]. A large message is checked before it is
//! decoded, so that a request over the limits costs a walk over its bytes rather than the
//! allocations of decoding it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use bytes::Buf;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::ProstDecoder;

use crate::limits::{RequestLimits, TooLarge};
use crate::pb::rls;
use crate::rls_encode::RlsEncoder;

/// `/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`.
pub const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// The call's codec. Cloned for every call: keep one per connection
/// ([`LimitedCodec::for_connection`]), so that the count a clone bumps is that
/// connection's, not one that every connection thread shares.
#[derive(Clone)]
pub struct LimitedCodec(Arc<CodecSettings>);

struct CodecSettings {
    limits: RequestLimits,
    /// Where refused requests are counted (`ShouldRateLimit.service_error`).
    refused: Arc<AtomicU64>,
}

impl LimitedCodec {
    /// A codec that refuses requests over `limits`, counting them in `refused`.
    pub fn new(limits: RequestLimits, refused: Arc<AtomicU64>) -> Self {
        LimitedCodec(Arc::new(CodecSettings { limits, refused }))
    }

    /// The same codec for one connection.
    pub fn for_connection(&self) -> Self {
        Self::new(self.0.limits, self.0.refused.clone())
    }
}

impl Codec for LimitedCodec {
    type Encode = rls::RateLimitResponse;
    type Decode = rls::RateLimitRequest;
    type Encoder = RlsEncoder;
    type Decoder = LimitedDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        RlsEncoder::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        LimitedDecoder {
            codec: self.clone(),
            inner: ProstDecoder::default(),
        }
    }
}

/// prost's decoder behind the limits' check.
pub struct LimitedDecoder {
    codec: LimitedCodec,
    inner: ProstDecoder<rls::RateLimitRequest>,
}

impl Decoder for LimitedDecoder {
    type Item = rls::RateLimitRequest;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        if buf.remaining() <= CHECKED_AFTER_DECODING {
            let request = self.inner.decode(buf)?;
            if let Some(r) = &request {
                self.refuse(self.codec.0.limits.check_pb(r))?;
            }
            return Ok(request);
        }
        // tonic hands over the whole message in one buffer; one in pieces is joined first.
        if let Some(message) = buf.chunk().get(..buf.remaining()) {
            self.refuse(self.codec.0.limits.check_encoded(message))?;
            return self.inner.decode(buf);
        }
        let message = buf.copy_to_bytes(buf.remaining());
        self.refuse(self.codec.0.limits.check_encoded(&message))?;
        prost::Message::decode(message)
            .map(Some)
            .map_err(|e| Status::internal(e.to_string()))
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.inner.buffer_settings()
    }
}

/// Messages up to this size are decoded, then checked: decoding them costs less than a
/// walk over their bytes would add to every ordinary request (Envoy's are a few hundred
/// bytes), and no more than tens of microseconds at worst.
const CHECKED_AFTER_DECODING: usize = 16 << 10;

impl LimitedDecoder {
    fn refuse(&self, check: Result<(), TooLarge>) -> Result<(), Status> {
        check.map_err(|e| {
            self.codec.0.refused.fetch_add(1, Relaxed);
            // What grpc-go answers for a message over its size limit.
            Status::resource_exhausted(e.to_string())
        })
    }
}
