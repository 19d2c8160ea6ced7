//! Rule documents over the size or nesting bound are refused before parsing, on every way
//! into the library.

use std::time::{Duration, Instant};

use ratelimit_backends::MemoryStore;
use ratelimit_core::{ConfigErrorKind, Limiter, Limits, ManualClock, RuleSet, Stats};

fn nested(levels: usize) -> String {
    format!(
        "descriptors: {}{}\n",
        "[".repeat(levels),
        "]".repeat(levels)
    )
}

#[test]
fn deep_nesting_fails_fast_with_the_reason() {
    let text = nested(100_000);
    let start = Instant::now();
    let e =
        RuleSet::from_yaml([("deep.yaml", text.as_str())], false, &Stats::default()).unwrap_err();
    assert_eq!(e.kind, ConfigErrorKind::Limits);
    assert_eq!(
        e.to_string(),
        "deep.yaml: error loading config file: collections nested more than 64 levels deep (line 1)"
    );
    assert_eq!(e.line, Some(1));

    let e = Limiter::builder(MemoryStore::new(), ManualClock::new(0))
        .yaml("deep.yaml", text.as_str())
        .build()
        .err()
        .expect("refused");
    assert_eq!(e.kind, ConfigErrorKind::Limits);
    // Parsing took over a minute before the bound; generous for slow machines.
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn nesting_up_to_the_bound_parses() {
    // Flow mappings count one level each, as does the top-level mapping.
    let maps = |levels: usize| {
        format!(
            "domain: d\nmetadata: {}1{}\n",
            "{a: ".repeat(levels),
            "}".repeat(levels)
        )
    };
    let limits = Limits::DEFAULT;
    let doc = ratelimit_core::parse_document_with("ok.yaml", &maps(limits.max_depth - 1), &limits);
    assert!(doc.is_ok(), "{doc:?}");
    let e = ratelimit_core::parse_document_with("deep.yaml", &maps(limits.max_depth), &limits)
        .unwrap_err();
    assert_eq!(e.kind, ConfigErrorKind::Limits, "{e}");
}

#[test]
fn size_is_bounded() {
    let limits = Limits {
        max_bytes: 64,
        ..Limits::DEFAULT
    };
    let text = format!("domain: d\n{}", "#".repeat(60));
    let e = ratelimit_core::parse_document_with("big.yaml", &text, &limits).unwrap_err();
    assert_eq!(
        e.to_string(),
        "big.yaml: error loading config file: the document is 70 bytes, more than the 64 allowed"
    );
    let small = "domain: d\n";
    assert!(ratelimit_core::parse_document_with("small.yaml", small, &limits).is_ok());
}

#[test]
fn an_alias_bomb_is_refused_instead_of_expanded() {
    // Nine levels of ten aliases each: 10^9 strings if expanded.
    let mut doc = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let p = i - 1;
        doc.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    doc.push_str("domain: d\n");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(ratelimit_core::parse_document("bomb.yaml", &doc).map(|_| ()));
    });
    let result = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("refused in time, not expanded");
    let err = result.unwrap_err();
    assert!(
        err.to_string().contains("error loading config file"),
        "{err}"
    );
}
