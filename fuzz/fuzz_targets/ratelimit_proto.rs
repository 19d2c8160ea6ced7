//! Any bytes as a `RateLimitRequest` on the wire: decoded and converted to a core request
//! or rejected, never a panic; what converts survives the way back unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use ratelimit_server::convert::{request_from_pb, request_to_pb};
use ratelimit_server::pb::rls::RateLimitRequest;

fuzz_target!(|data: &[u8]| {
    let Ok(pb) = RateLimitRequest::decode(data) else { return };
    if let Ok(req) = request_from_pb(pb) {
        let back = request_from_pb(request_to_pb(&req)).expect("a converted request converts again");
        assert_eq!(back, req);
    }
});
