use super::*;

fn depth(text: &str) -> usize {
    scan(text, usize::MAX).0
}

#[test]
fn counts_flow_and_block_levels() {
    assert_eq!(depth(""), 0);
    assert_eq!(depth("a"), 0);
    assert_eq!(depth("a: 1"), 1);
    assert_eq!(depth("a: [[1]]"), 5);
    assert_eq!(depth("a: {b: {c: 1}}"), 3);
    assert_eq!(depth("a:\n  b:\n    c: {d: [1]}\n"), 6);
    // The single-pair mapping that holds `a`.
    assert_eq!(depth("[a: b]"), 2);
    assert_eq!(depth("- - - a\n"), 3);
    // An indentless sequence is a level of its own.
    assert_eq!(depth("a:\n- b: 1\n"), 3);
    // The mapping opens around a flow key.
    assert_eq!(depth("[[a]]: b\n"), 5);
    assert_eq!(depth("- {a: [b]}: c\n"), 5);
    let rule = "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        rate_limit: {unit: second, requests_per_unit: 1}\n";
    assert_eq!(depth(rule), 6);
    assert_eq!(
        depth("domain: d\ndescriptors: [{key: a, descriptors: [{key: b}]}]\n"),
        7
    );
}

#[test]
fn brackets_in_strings_comments_and_block_scalars_do_not_count() {
    let deep = "[".repeat(100);
    for text in [
        format!("a: '{deep}'\n"),
        format!("a: \"{deep}\\\" {deep}\"\n"),
        format!("a: x{deep}\n"),
        format!("a: b # {deep}\n"),
        format!("# {deep}\na: 1\n"),
        format!("a: |\n  {deep}\n  \"\nb: 1\n"),
        format!("a: >-\n\n   {deep}\n"),
        format!("a: !t{}\n", "]".repeat(100)),
        format!("a: 'it''s {deep}'\n"),
        format!("a: plain\n  continued \" {deep}\n"),
    ] {
        assert!(depth(&text) <= 2, "{text}");
    }
}

#[test]
fn brackets_the_parser_sees_always_count() {
    let deep = "[".repeat(100);
    for text in [
        format!("a: {deep}"),
        // A quote inside a plain scalar opens nothing.
        format!("a: x\"\nb: {deep}\"\n"),
        format!("a: b\n  \"c\nx: {deep} \"\n"),
        // A comment ends at NEL for libyaml.
        format!("a: 1 #c\u{85}b: {deep}\n"),
        // The block scalar ends at a less indented line.
        format!("a: |\n  \"\nb: {deep} \"\n"),
        // Quoted closers are not closers.
        format!("a: [[[[ \"]]]]\" {deep}\n"),
        format!("a: ['x', {deep}\n"),
        format!("{{\"a\":{deep}\n"),
    ] {
        assert!(depth(&text) > 64, "{text}");
    }
}

#[test]
fn check_reports_size_and_depth() {
    let limits = Limits {
        max_bytes: 100,
        max_depth: 4,
    };
    assert_eq!(check("a: {b: {c: 1}}\n", &limits), Ok(()));
    let e = check("a: 1\nb: {c: {d: {e: {f: 1}}}}\n", &limits).unwrap_err();
    assert_eq!(e, Exceeded::Depth { max: 4, line: 2 });
    assert_eq!(
        e.to_string(),
        "collections nested more than 4 levels deep (line 2)"
    );
    let e = check(&"#".repeat(101), &limits).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the document is 101 bytes, more than the 100 allowed"
    );
}

#[test]
fn the_pathological_document_is_refused_quickly() {
    let text = format!(
        "descriptors: {}{}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let t = std::time::Instant::now();
    assert!(matches!(
        check(&text, &Limits::DEFAULT),
        Err(Exceeded::Depth { max: 64, line: 1 })
    ));
    // Unbounded, the pass still takes one step per byte.
    assert_eq!(scan(&text, usize::MAX).0, 200_001);
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn a_bom_at_a_line_start_takes_a_column_as_in_libyaml() {
    // libyaml skips a BOM at column 0 but counts its column, at the start of the text too
    // (serde_yaml names the encoding, so the reader leaves the BOM to the scanner): `0bb`
    // stands at column 3, inside `0b`'s mapping.
    assert_eq!(depth("- 0b:\n\u{feff}  0bb:\n"), 3);
    assert_eq!(depth("a:\n-\n- 0b\":\r\u{feff}  0bb:\r \n"), 4);
    // `a` at column 1 and `b` beside it: one mapping.
    assert_eq!(depth("\u{feff}a:\n b: 1\n"), 1);
}
