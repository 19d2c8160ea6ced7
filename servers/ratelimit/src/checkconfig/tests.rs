use super::repair::{Seg, parse_path};
use super::*;

fn lines_of(text: &str) -> Vec<String> {
    let r = check_texts(&[("f.yaml".to_owned(), text.to_owned())], false);
    r.problems.iter().map(ToString::to_string).collect()
}

#[test]
fn positions_follow_block_and_flow_styles() {
    let text = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: b\n    descriptors:\n      - key: c\n        rate_limit:\n          unit: minute\n";
    let p = Positions::scan(text);
    assert_eq!(p.line("domain"), Some(1));
    assert_eq!(p.line("descriptors[0]"), Some(3));
    assert_eq!(p.line("descriptors[0].rate_limit.unit"), Some(4));
    assert_eq!(p.line("descriptors[1].descriptors[0].rate_limit"), Some(8));
    assert_eq!(
        p.line("descriptors[1].descriptors[0].rate_limit.unit"),
        Some(9)
    );
    // Not written: the nearest ancestor.
    assert_eq!(p.line("descriptors[1].descriptors[0].value"), Some(7));
}

#[test]
fn every_problem_of_a_file_is_reported_with_its_line() {
    let text = "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimied: true\n      unit: second\n  - key: b\n    rate_limit: {unit: fortnight}\n  - value: x\n  - key: b\n    ratelimit: {}\n";
    assert_eq!(
        lines_of(text),
        [
            "f.yaml:5: config error, unknown key 'unlimied' (at descriptors[0].rate_limit)",
            "f.yaml:8: invalid rate limit unit 'fortnight' (at descriptors[1].rate_limit)",
            "f.yaml:9: descriptor has empty key (at descriptors[2])",
            "f.yaml:10: duplicate descriptor composite key 'd.b' (at descriptors[3])",
            "f.yaml:11: config error, unknown key 'ratelimit' (at descriptors[3])",
        ]
    );
}

#[test]
fn syntax_errors_carry_the_parser_line() {
    let out = lines_of("domain: d\ndescriptors:\n  - key: [a\n");
    assert_eq!(out.len(), 1);
    assert!(out[0].starts_with("f.yaml:"), "{out:?}");
    assert!(out[0].contains("error loading config file"), "{out:?}");
}

#[test]
fn duplicate_domains_across_files() {
    let a =
        "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1}}]\n";
    let b =
        "\ndomain: d\ndescriptors: [{key: b, rate_limit: {unit: second, requests_per_unit: 1}}]\n";
    let files = [
        ("a.yaml".to_owned(), a.to_owned()),
        ("b.yaml".to_owned(), b.to_owned()),
    ];
    let r = check_texts(&files, false);
    let out: Vec<String> = r.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        out,
        ["b.yaml:2: duplicate domain 'd' in config file (at domain)"]
    );
    let r = check_texts(&files, true);
    assert!(r.problems.is_empty());
    assert_eq!((r.domains, r.rules), (1, 2));
}

#[test]
fn nesting_past_the_bound_is_refused_unparsed() {
    let deep = format!(
        "domain: d\ndescriptors: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert_eq!(
        lines_of(&deep),
        [
            "f.yaml:2: error loading config file: collections nested more than 64 levels deep (line 2)"
        ]
    );
    // Deep only where saphyr reads NEL as an ordinary character: line numbers are
    // skipped, the loader (libyaml) still decides.
    let text = format!("a: b\u{85}\"\nc: {} \"\n", "[".repeat(100));
    assert!(ratelimit_core::prescan::check(&text, &ratelimit_core::Limits::DEFAULT).is_ok());
    assert!(!saphyr_can_scan(&text));
    assert!(saphyr_can_scan("domain: d\n# \u{85}\n"));
    // libyaml stops at the tab; saphyr reads on.
    let text = format!("\t{}", "[".repeat(100));
    assert!(ratelimit_core::prescan::check(&text, &ratelimit_core::Limits::DEFAULT).is_ok());
    assert!(!saphyr_can_scan(&text));
}

#[test]
fn paths_parse() {
    assert_eq!(
        parse_path("descriptors[1].rate_limit.replaces[0]"),
        [
            Seg::Key("descriptors".into()),
            Seg::Index(1),
            Seg::Key("rate_limit".into()),
            Seg::Key("replaces".into()),
            Seg::Index(0)
        ]
    );
}
