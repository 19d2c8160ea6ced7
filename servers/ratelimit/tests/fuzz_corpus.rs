//! Replays the committed `ratelimit_proto`, `rls_answer`, `ratelimit_b3`,
//! `prometheus_render`, `xds_resource`, `ratelimit_settings` and `rlqs_reports` cargo-fuzz
//! corpora on stable: the same checks the fuzz targets run.

use prost::Message;
use ratelimit_server::convert::request_to_pb;
use test_support::fuzz::replay;

#[path = "../../../fuzz/harness/ratelimit_proto.rs"]
mod proto_harness;

#[path = "../../../fuzz/harness/ratelimit_b3.rs"]
mod b3_harness;

#[path = "../../../fuzz/harness/rls_answer.rs"]
mod answer_harness;

#[path = "../../../fuzz/harness/prometheus_render.rs"]
mod prometheus_harness;

#[path = "../../../fuzz/harness/xds_resource.rs"]
mod xds_harness;

#[path = "../../../fuzz/harness/ratelimit_settings.rs"]
mod settings_harness;

#[path = "../../../fuzz/harness/rlqs_reports.rs"]
mod rlqs_harness;

#[test]
fn answer_corpus_is_encoded_by_hand_as_prost_encodes_it() {
    let (seen, decoded) = replay("rls_answer", |bytes| {
        // Every cut of a seed too: truncated messages decode partly or not at all.
        for end in 0..bytes.len() {
            answer_harness::run(&bytes[..end]);
        }
        answer_harness::run(bytes)
    });
    assert!(seen >= 5, "corpus has {seen} files");
    assert!(decoded >= 5, "the seeds still decode");
}

#[test]
fn proto_corpus_decodes_or_fails_cleanly() {
    let (seen, converted) = replay("ratelimit_proto", proto_harness::run);
    assert!(seen >= 5, "corpus has {seen} files");
    assert!(converted >= 1, "the valid seeds still convert");
}

/// Random requests around the harness's limits, encoded and then cut or bit-flipped: the
/// check of the encoded bytes never lets through what the decoded check refuses.
#[test]
fn the_encoded_limits_check_is_never_weaker_than_the_decoded_one() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for _ in 0..20_000 {
        let descriptors = (0..next(5))
            .map(|_| {
                let entries: Vec<(String, String)> = (0..next(4))
                    .map(|_| ("k".repeat(next(11) as usize), "v".repeat(next(11) as usize)))
                    .collect();
                ratelimit_core::Descriptor::new(entries)
            })
            .collect();
        let domain = "d".repeat(next(11) as usize);
        let req = ratelimit_core::Request::new(domain, descriptors);
        let mut bytes = request_to_pb(&req).encode_to_vec();
        match next(3) {
            0 if !bytes.is_empty() => bytes.truncate(next(bytes.len() as u64) as usize),
            1 if !bytes.is_empty() => {
                let i = next(bytes.len() as u64) as usize;
                bytes[i] ^= 1 << next(8);
            }
            _ => {}
        }
        proto_harness::run(&bytes);
    }
}

#[test]
fn b3_corpus_parses_or_fails_cleanly() {
    let (seen, parsed) = replay("ratelimit_b3", b3_harness::run);
    assert!(seen >= 5, "corpus has {seen} files");
    assert!(parsed >= 1, "the valid seeds still parse");
}

#[test]
fn prometheus_corpus_renders_valid_exposition_text() {
    let (seen, read) = replay("prometheus_render", prometheus_harness::run);
    // Seeds with a mapper file that is read, and without one or with a refused one.
    assert!(
        read > 0 && read < seen,
        "{read} of {seen} mapper files read"
    );
}

#[test]
fn xds_corpus_compiles_or_is_refused() {
    let (seen, compiled) = replay("xds_resource", xds_harness::run);
    // Seeds with resources that compile and resources that are refused.
    assert!(
        compiled > 0 && compiled < seen,
        "{compiled} of {seen} compiled"
    );
}

#[test]
fn settings_corpus_reads_or_names_the_variable() {
    let (seen, read) = replay("ratelimit_settings", settings_harness::run);
    // Seeds with environments that read and ones refused.
    assert!(read > 0 && read < seen, "{read} of {seen} read");
}

#[test]
fn rlqs_corpus_holds_the_quota_engines_caps() {
    let (seen, decoded) = replay("rlqs_reports", |bytes| {
        // Every cut of a seed too: a stream may end anywhere.
        for end in 0..bytes.len() {
            rlqs_harness::run(&bytes[..end]);
        }
        rlqs_harness::run(bytes) > 0
    });
    assert!(seen >= 6, "corpus has {seen} files");
    assert_eq!(decoded, seen, "every seed's reports still decode");
}
