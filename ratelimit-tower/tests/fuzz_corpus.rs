//! Replays the committed `tower_request` and `tower_config` cargo-fuzz corpora on stable:
//! the same checks the fuzz targets run.

use std::path::PathBuf;

#[path = "../../fuzz/harness/tower_request.rs"]
mod request_harness;

#[path = "../../fuzz/harness/tower_config.rs"]
mod config_harness;

/// Runs `check` on every file of the cargo-fuzz corpus `target`; how many files there
/// were, and how many `check` accepted.
fn replay(target: &str, check: fn(&[u8]) -> bool) -> (usize, usize) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let (mut seen, mut accepted) = (0, 0);
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        seen += 1;
        accepted += usize::from(check(&bytes));
    }
    (seen, accepted)
}

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
