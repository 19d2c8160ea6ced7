//! Any bytes as a `RateLimitResponse` on the wire: whatever prost decodes, the hand-written
//! answer encoder (`ratelimit_server::rls_encode`) writes back as exactly prost's bytes.
//! Shared by the cargo-fuzz target and the stable corpus replay test
//! (`servers/ratelimit/tests/fuzz_corpus.rs`).

use prost::Message;
use ratelimit_server::pb::rls::RateLimitResponse;
use ratelimit_server::rls_encode::encode_into;

/// Returns whether the input decoded, so the replay test can see its seeds still do.
pub fn run(data: &[u8]) -> bool {
    let Ok(resp) = RateLimitResponse::decode(data) else {
        return false;
    };
    let mut ours = Vec::new();
    encode_into(&resp, &mut ours).expect("a Vec grows");
    assert_eq!(ours, resp.encode_to_vec(), "{resp:?}");
    true
}
