//! The committed cargo-fuzz corpora (`fuzz/corpus/<target>/`), for the tests that replay
//! them on stable through the checks the fuzz targets run.

use std::path::{Path, PathBuf};

/// Every file of the corpus of `target`, with its path, in path order.
pub fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("a directory entry").path();
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Runs `check` on every file of the corpus of `target`: how many files there were, and
/// how many `check` accepted.
pub fn replay(target: &str, mut check: impl FnMut(&[u8]) -> bool) -> (usize, usize) {
    let files = corpus(target);
    let accepted = files.iter().filter(|(_, bytes)| check(bytes)).count();
    (files.len(), accepted)
}
