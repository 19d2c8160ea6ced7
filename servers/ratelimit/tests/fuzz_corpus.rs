//! Replays the committed `ratelimit_proto` cargo-fuzz corpus on stable: the same decoding
//! and conversion the fuzz target runs, including its round-trip check.

use std::path::PathBuf;

use prost::Message;
use ratelimit_server::convert::{request_from_pb, request_to_pb};
use ratelimit_server::pb::rls::RateLimitRequest;

#[test]
fn proto_corpus_decodes_or_fails_cleanly() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/ratelimit_proto");
    let mut seen = 0;
    let mut converted = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        seen += 1;
        let Ok(pb) = RateLimitRequest::decode(bytes.as_slice()) else {
            continue;
        };
        if let Ok(req) = request_from_pb(pb) {
            let back = request_from_pb(request_to_pb(&req)).expect("converts again");
            assert_eq!(back, req, "{} changed on the way back", path.display());
            converted += 1;
        }
    }
    assert!(seen >= 5, "corpus has {seen} files");
    assert!(converted >= 1, "the valid seeds still convert");
}
