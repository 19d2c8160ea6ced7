//! Any bytes as a `RateLimitRequest` on the wire: decoded and converted to a core request
//! or rejected, never a panic; what converts survives the way back unchanged; and the
//! request limits' check of the encoded bytes refuses whatever the check of the decoded
//! message refuses (limits small enough for the fuzzer to reach). Shared by the cargo-fuzz
//! target and the stable corpus replay test (`servers/ratelimit/tests/fuzz_corpus.rs`).

use prost::Message;
use ratelimit_server::convert::{request_from_pb, request_to_pb};
use ratelimit_server::limits::RequestLimits;
use ratelimit_server::pb::rls::RateLimitRequest;

const LIMITS: RequestLimits = RequestLimits {
    max_descriptors: 3,
    max_entries: 2,
    max_string_bytes: 8,
};

/// Returns whether the input converted, so the replay test can see its seeds still do.
pub fn run(data: &[u8]) -> bool {
    let before_decoding = LIMITS.check_encoded(data);
    let Ok(pb) = RateLimitRequest::decode(data) else {
        return false;
    };
    if let Err(e) = LIMITS.check_pb(&pb) {
        assert!(
            before_decoding.is_err(),
            "the encoded check let through what the decoded one refuses: {e}"
        );
    }
    let Ok(req) = request_from_pb(pb) else {
        return false;
    };
    let back = request_from_pb(request_to_pb(&req)).expect("a converted request converts again");
    assert_eq!(back, req);
    true
}
