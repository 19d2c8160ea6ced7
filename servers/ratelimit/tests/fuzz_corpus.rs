//! Replays the committed `ratelimit_proto` and `ratelimit_b3` cargo-fuzz corpora on stable:
//! the same checks the fuzz targets run.

use std::path::PathBuf;

use prost::Message;
use ratelimit_server::convert::{request_from_pb, request_to_pb};
use ratelimit_server::pb::rls::RateLimitRequest;

#[path = "../../../fuzz/harness/ratelimit_b3.rs"]
mod b3_harness;

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

#[test]
fn b3_corpus_parses_or_fails_cleanly() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/ratelimit_b3");
    let mut seen = 0;
    let mut parsed = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        seen += 1;
        parsed += usize::from(b3_harness::run(&bytes));
    }
    assert!(seen >= 5, "corpus has {seen} files");
    assert!(parsed >= 1, "the valid seeds still parse");
}
