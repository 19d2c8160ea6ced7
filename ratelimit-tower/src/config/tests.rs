use super::*;
use ratelimit_backends::MemoryStore;
use ratelimit_core::ManualClock;

const DOC: &str = r#"
domain: api
rate_limits:
  - actions:
      - remote_address: {}
  - actions:
      - generic_key: {descriptor_value: search}
      - request_headers: {header_name: x-api-key, descriptor_key: api_key}
  - actions:
      - header_value_match:
          descriptor_value: admin
          headers:
            - {name: ":path", prefix_match: /admin}
            - {name: x-role, string_match: {exact: ADMIN, ignore_case: true}, invert_match: true}
      - masked_remote_address: {v4_prefix_mask_len: 24}
      - method: {}
      - path: {descriptor_key: route}
xff_num_trusted_hops: 1
trusted_proxies: [10.0.0.0/8, 192.168.1.1]
headers: ietf
failure_mode: closed
status_on_error: 503
"#;

fn limiter() -> Arc<Limiter<MemoryStore, ManualClock>> {
    Arc::new(
        Limiter::builder(MemoryStore::new(), ManualClock::new(1))
            .build()
            .unwrap(),
    )
}

#[test]
fn reads_envoy_shaped_actions() {
    let c = LayerConfig::from_yaml(DOC).unwrap();
    assert_eq!(c.rate_limits.len(), 3);
    assert_eq!(
        (c.headers, c.failure_mode),
        (HeaderStyle::Ietf, FailureMode::Closed)
    );
    assert!(c.layer(limiter()).is_ok());
}

#[test]
fn mistakes_are_named() {
    let err = |doc: &str| match LayerConfig::from_yaml(doc) {
        Err(e) => e.to_string(),
        Ok(c) => c.layer(limiter()).err().expect("an error").to_string(),
    };
    let two = "domain: a\nrate_limits: [{actions: [{remote_address: {}, method: {}}]}]";
    assert!(
        err(two).contains("rate_limits[0].actions[0]: an action names exactly one"),
        "{}",
        err(two)
    );
    let typo = "domain: a\nrate_limits: [{actions: [{remote_adress: {}}]}]";
    assert!(
        err(typo).contains("unknown field `remote_adress`"),
        "{}",
        err(typo)
    );
    let regex = "domain: a\nrate_limits: [{actions: [{header_value_match: {descriptor_value: v, headers: [{name: x, safe_regex_match: {regex: '('}}]}}]}]";
    assert!(err(regex).contains("bad regex"), "{}", err(regex));
    let net = "domain: a\nrate_limits: [{actions: [{remote_address: {}}]}]\ntrusted_proxies: [10.0.0.0/99]";
    assert!(err(net).contains("is not a network"), "{}", err(net));
    let none = "domain: a\nrate_limits: []";
    assert!(err(none).contains("no descriptor"), "{}", err(none));
    let style = "domain: a\nrate_limits: [{actions: [{remote_address: {}}]}]\nheaders: draft-99";
    assert!(err(style).contains("unknown variant"), "{}", err(style));
}
