use super::*;
use crate::config::parse_document;
use crate::{ConfigErrorKind, RuleSet, Stats};

fn every_kind() -> Rules {
    Rules::new("api")
        .limit(["remote_address"], RateLimit::per_second(10).burst(20))
        .limit(
            [("path", "/v1/items"), ("method", "GET")],
            RateLimit::per_minute(30).sliding_window(),
        )
        .limit(
            [("path", "/v1/items"), ("method", "POST")],
            RateLimit::per_hour(5).unit_multiplier(2),
        )
        .limits(
            [("path", "/login"), ("remote_address", "")],
            [
                RateLimit::per_minute(5).token_bucket().name("login_rate"),
                RateLimit::per_day(20).name("login_daily"),
            ],
        )
        .limit([("api_key", "trusted")], RateLimit::unlimited())
        .limit(
            ["tenant"],
            RateLimit::per_day(1000).shadow_mode().replaces("x"),
        )
        .limit(
            ["quota \"q\""],
            RateLimit::per(7, Unit::Week).quota_mode().fixed_window(),
        )
}

#[test]
fn writes_the_yaml_that_parses_back_into_the_same_document() {
    let rules = every_kind();
    let mut parsed = parse_document("code:api", &rules.to_yaml()).unwrap();
    parsed.name = rules.document().name.clone();
    assert_eq!(&parsed, rules.document(), "{}", rules.to_yaml());
}

#[test]
fn compiles_to_the_rules_the_yaml_gives() {
    let rules = every_kind();
    let stats = Stats::default();
    let from_code = RuleSet::compile(&[rules.document().clone()], false, &stats).unwrap();
    let from_yaml = RuleSet::from_yaml([("api.yaml", rules.to_yaml().as_str())], false, &stats);
    assert_eq!(from_code.dump(), from_yaml.unwrap().dump());
    assert!(
        from_code.dump().contains("algorithm: token_bucket"),
        "{}",
        from_code.dump()
    );
}

#[test]
fn nested_paths_share_their_inner_levels() {
    let rules = every_kind();
    let paths: Vec<&str> = rules
        .document()
        .descriptors
        .iter()
        .map(|d| d.key.as_str())
        .collect();
    // "/v1/items" holds both methods; "/login" is one node.
    assert_eq!(
        paths,
        [
            "remote_address",
            "path",
            "path",
            "api_key",
            "tenant",
            "quota \"q\""
        ]
    );
    assert_eq!(rules.document().descriptors[1].descriptors.len(), 2);
}

#[test]
fn mistakes_fail_as_they_would_in_a_file() {
    let stats = Stats::default();
    let compile = |r: Rules| RuleSet::compile(&[r.into_document()], false, &stats).unwrap_err();
    let twice = Rules::new("d")
        .limit(["k"], RateLimit::per_second(1))
        .limit(["k"], RateLimit::per_second(2));
    assert_eq!(compile(twice).kind, ConfigErrorKind::DuplicateCompositeKey);
    let zero_burst = Rules::new("d").limit(["k"], RateLimit::per_second(1).burst(0));
    let e = compile(zero_burst);
    assert_eq!(
        (e.kind, e.file.as_str()),
        (ConfigErrorKind::ZeroLimitField, "code:d")
    );
    let empty_path = Rules::new("d").limit(Vec::<&str>::new(), RateLimit::per_second(1));
    assert_eq!(compile(empty_path).kind, ConfigErrorKind::EmptyKey);
    assert_eq!(
        Rules::new("d").to_yaml(),
        "domain: \"d\"\ndescriptors: []\n"
    );
}
