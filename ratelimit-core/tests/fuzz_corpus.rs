//! Replays the committed cargo-fuzz corpora (`fuzz/corpus/ratelimit_*`) on stable, through
//! the same code the fuzz targets run, so every input the fuzzer kept stays fixed.

use std::path::PathBuf;

#[path = "../../fuzz/harness/ratelimit_matcher.rs"]
mod matcher;
#[path = "../../fuzz/harness/ratelimit_prescan.rs"]
mod prescan;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 5,
        "{target} corpus has {} files",
        files.len()
    );
    files
}

#[test]
fn yaml_corpus_loads_or_fails_cleanly() {
    let mut loaded = 0;
    for (_, bytes) in corpus("ratelimit_yaml") {
        let text = String::from_utf8_lossy(&bytes);
        let stats = ratelimit_core::Stats::default();
        if let Ok(rules) =
            ratelimit_core::RuleSet::from_yaml([("fuzz.yaml", text.as_ref())], false, &stats)
        {
            let _ = rules.dump();
            loaded += 1;
        }
    }
    assert!(loaded >= 2, "the valid seeds still load");
}

#[test]
fn json_corpus_parses_or_fails_cleanly() {
    let mut parsed = 0;
    for (_, bytes) in corpus("ratelimit_json") {
        parsed += usize::from(ratelimit_core::json::parse_request(&bytes).is_ok());
    }
    assert!(parsed >= 1, "the valid seeds still parse");
}

#[test]
fn matcher_corpus_agrees_with_the_model() {
    for (path, bytes) in corpus("ratelimit_matcher") {
        let r = std::panic::catch_unwind(|| matcher::run(&bytes));
        assert!(r.is_ok(), "{} disagrees with the model", path.display());
    }
}

#[test]
fn prescan_corpus_never_counts_below_the_parsed_depth() {
    for (path, bytes) in corpus("ratelimit_prescan") {
        let r = std::panic::catch_unwind(|| prescan::run(&bytes));
        assert!(
            r.is_ok(),
            "{} is deeper than the pre-scan counts",
            path.display()
        );
    }
}
