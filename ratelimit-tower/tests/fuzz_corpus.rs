//! Replays the committed `tower_request` and `tower_config` cargo-fuzz corpora on stable:
//! the same checks the fuzz targets run.

use test_support::fuzz::replay;

#[path = "../../fuzz/harness/tower_request.rs"]
mod request_harness;

#[path = "../../fuzz/harness/tower_config.rs"]
mod config_harness;

#[test]
fn request_corpus_is_answered_200_or_429() {
    let (seen, through) = replay("tower_request", request_harness::run);
    // The seeds include requests let through and requests over a limit.
    assert!(
        through > 0 && through < seen,
        "{through} of {seen} let through"
    );
}

#[test]
fn config_corpus_builds_or_is_refused() {
    let (seen, built) = replay("tower_config", config_harness::run);
    // The seeds include settings that build and settings that are refused.
    assert!(built > 0 && built < seen, "{built} of {seen} built");
}
