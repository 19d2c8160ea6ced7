use super::*;

#[test]
fn wildcards() {
    assert!(wildcard_match("k_foo*", "k_foobar"));
    assert!(wildcard_match("k_foo*", "k_foo"));
    assert!(!wildcard_match("k_foo*", "k_fo"));
    assert!(wildcard_match("k_*bar", "k_foobar"));
    assert!(wildcard_match("k_a*b*c", "k_aXXbYYc"));
    assert!(!wildcard_match("k_a*b*c", "k_aXXcYYb"));
    assert!(wildcard_match("k_*", "k_"));
    assert!(!wildcard_match("k_ab*ba", "k_aba"));
    assert!(wildcard_match("k_ab*ba", "k_abba"));
    assert!(wildcard_match("k_x", "k_x"));
}

fn rules(yaml: &str) -> RuleSet {
    RuleSet::from_yaml([("t.yaml", yaml)], false, &Stats::default()).unwrap()
}

fn entries(pairs: &[(&str, &str)]) -> Vec<Entry> {
    pairs.iter().map(|(k, v)| Entry::new(*k, *v)).collect()
}

fn matched(r: &RuleSet, pairs: &[(&str, &str)]) -> Option<String> {
    match r.find("d", &entries(pairs), &mut String::new()) {
        Match::Rule(rule) => Some(rule.full_key.clone()),
        Match::NoRule | Match::UnknownDomain => None,
    }
}

/// Upstream looks up `key + "_" + value` first, so a key-only rule whose name holds a
/// `_` matches an entry split elsewhere. Such a level must not take the shortcut that
/// skips that lookup.
#[test]
fn key_value_lookup_still_reaches_names_with_underscores() {
    let r = rules(
        "domain: d\ndescriptors:\n  - key: a_b\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: c\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    );
    assert_eq!(matched(&r, &[("a", "b")]).as_deref(), Some("d.a_b"));
    assert_eq!(matched(&r, &[("a_b", "x")]).as_deref(), Some("d.a_b"));
    assert_eq!(matched(&r, &[("c", "anything")]).as_deref(), Some("d.c"));
    assert_eq!(matched(&r, &[("a", "c")]), None);
}

/// Only an entry whose key is the part before some `_` of a name at its level goes
/// through the `key_value` lookup; any other key (Envoy's `remote_address` among names
/// holding `_`) is matched by its bare key alone, with the same answers as upstream.
#[test]
fn the_key_value_lookup_is_skipped_only_for_keys_no_name_starts_with() {
    let limit = "    rate_limit: {unit: second, requests_per_unit: 1}\n";
    let r = rules(&format!(
        "domain: d\ndescriptors:\n  - key: x_y_z\n{limit}  - key: user\n    value: a_b\n{limit}  - key: remote_address\n{limit}  - key: outer\n    descriptors:\n      - key: in_ner\n    {limit}"
    ));
    for (entries, want) in [
        (&[("x", "y_z")][..], Some("d.x_y_z")),
        (&[("x_y", "z")], Some("d.x_y_z")),
        (&[("x_y_z", "q")], Some("d.x_y_z")),
        (&[("user", "a_b")], Some("d.user_a_b")),
        (&[("user_a", "b")], Some("d.user_a_b")),
        (&[("user", "c")], None),
        (&[("remote_address", "10.0.0.1")], Some("d.remote_address")),
        (&[("remote", "address")], Some("d.remote_address")),
        (&[("remote", "other")], None),
        (&[("outer", "o"), ("in_ner", "v")], Some("d.outer.in_ner")),
        (&[("outer", "o"), ("in", "ner")], Some("d.outer.in_ner")),
        (&[("outer", "o"), ("in", "x")], None),
    ] {
        assert_eq!(matched(&r, entries).as_deref(), want, "{entries:?}");
    }
}

/// Levels switch from comparing names in a row to a hash index above 8 names; both
/// find every name, and duplicates are refused on either side of the switch.
#[test]
fn wide_levels_find_every_name() {
    let mut yaml = String::from("domain: d\ndescriptors:\n");
    for i in 0..20 {
        yaml.push_str(&format!(
            "  - key: k{i}\n    rate_limit: {{unit: second, requests_per_unit: {}}}\n",
            i + 1
        ));
    }
    let r = rules(&yaml);
    for i in 0..20 {
        let key = format!("k{i}");
        assert_eq!(matched(&r, &[(&key, "v")]), Some(format!("d.{key}")));
    }
    assert_eq!(matched(&r, &[("k20", "v")]), None);
    for dup in [3, 15] {
        let text = format!(
            "{yaml}  - key: k{dup}\n    rate_limit: {{unit: second, requests_per_unit: 1}}\n"
        );
        let e =
            RuleSet::from_yaml([("t.yaml", text.as_str())], false, &Stats::default()).unwrap_err();
        assert!(
            e.to_string().contains("duplicate descriptor composite key"),
            "{e}"
        );
    }
}

/// Domains live in the same kind of map: many of them, each found.
#[test]
fn many_domains_each_found() {
    let docs: Vec<(String, String)> = (0..12)
            .map(|i| {
                (
                    format!("d{i}.yaml"),
                    format!("domain: dom{i}\ndescriptors:\n  - key: k\n    rate_limit: {{unit: second, requests_per_unit: 1}}\n"),
                )
            })
            .collect();
    let r = RuleSet::from_yaml(
        docs.iter().map(|(n, t)| (n.as_str(), t.as_str())),
        false,
        &Stats::default(),
    )
    .unwrap();
    for i in 0..12 {
        let m = r.find(
            &format!("dom{i}"),
            &entries(&[("k", "v")]),
            &mut String::new(),
        );
        assert!(matches!(m, Match::Rule(_)), "dom{i}");
    }
    assert!(matches!(
        r.find("dom12", &entries(&[("k", "v")]), &mut String::new()),
        Match::UnknownDomain
    ));
}
