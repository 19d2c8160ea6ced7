use super::*;

#[test]
fn backoff_grows_and_caps() {
    let b = Backoff {
        initial: Duration::from_millis(100),
        max: Duration::from_millis(1000),
        factor: 2.0,
        jitter: false,
    };
    let ms: Vec<u128> = (0..6).map(|n| b.delay(n).as_millis()).collect();
    assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
    assert_eq!(b.delay(u32::MAX).as_millis(), 1000);
    // Upstream's default factor never grows the wait.
    let flat = Backoff { factor: 0.5, ..b };
    assert!((0..5).all(|n| flat.delay(n) == Duration::from_millis(100)));
    let j = Backoff { jitter: true, ..b };
    for n in 0..8 {
        let d = j.delay(n);
        assert!(d >= b.initial && d <= b.delay(n), "{d:?}");
    }
}

#[test]
fn conversion_keeps_every_proto_field() {
    let cfg = rlconf::RateLimitConfig {
        name: "rl".into(),
        domain: "d".into(),
        descriptors: vec![rlconf::RateLimitDescriptor {
            key: "k".into(),
            value: "v".into(),
            rate_limit: Some(rlconf::RateLimitPolicy {
                unit: rlconf::RateLimitUnit::Week as i32,
                requests_per_unit: 7,
                unlimited: false,
                name: "n".into(),
                replaces: vec![rlconf::RateLimitReplace { name: "o".into() }],
            }),
            descriptors: vec![rlconf::RateLimitDescriptor {
                key: "inner".into(),
                ..Default::default()
            }],
            shadow_mode: true,
            detailed_metric: true,
            quota_mode: true,
            metadata: Some(prost_types::Struct {
                fields: [(
                    "n".to_owned(),
                    prost_types::Value {
                        kind: Some(prost_types::value::Kind::NumberValue(2.0)),
                    },
                )]
                .into(),
            }),
        }],
    };
    let doc = document_from_pb(0, cfg);
    assert_eq!(doc.name, "rl");
    let d = &doc.descriptors[0];
    let rl = d.rate_limit.as_ref().unwrap();
    assert_eq!(
        (rl.unit.as_str(), rl.requests_per_unit, rl.name.as_str()),
        ("WEEK", 7, "n")
    );
    assert_eq!(rl.replaces, ["o"]);
    assert!(d.shadow_mode && d.detailed_metric && d.quota_mode);
    assert_eq!(d.descriptors[0].key, "inner");
    assert_eq!(
        serde_json::Value::Object(d.metadata.clone().unwrap()).to_string(),
        r#"{"n":2}"#
    );
    let unnamed = document_from_pb(3, rlconf::RateLimitConfig::default());
    assert_eq!(unnamed.name, "resource 3");
}

#[test]
fn unknown_unit_is_an_error_unless_unlimited() {
    let doc = |unlimited, unit| {
        document_from_pb(
            0,
            rlconf::RateLimitConfig {
                name: "x".into(),
                domain: "d".into(),
                descriptors: vec![rlconf::RateLimitDescriptor {
                    key: "k".into(),
                    rate_limit: Some(rlconf::RateLimitPolicy {
                        unit,
                        unlimited,
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
            },
        )
    };
    let stats = ratelimit_core::Stats::default();
    assert!(RuleSet::compile(&[doc(true, 0)], false, &stats).is_ok());
    let e = RuleSet::compile(&[doc(false, 0)], false, &stats).unwrap_err();
    assert_eq!(
        e.to_string(),
        "x: invalid rate limit unit 'UNKNOWN' (at descriptors[0].rate_limit)"
    );
    let e = RuleSet::compile(&[doc(false, 42)], false, &stats).unwrap_err();
    assert!(
        e.to_string().contains("invalid rate limit unit '42'"),
        "{e}"
    );
}
