use proptest::prelude::*;
use prost::Message;

use super::*;
use crate::pb::rls::rate_limit_response::Quota;

fn encoded(resp: &rls::RateLimitResponse) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_into(resp, &mut buf).expect("a Vec grows");
    buf
}

/// Whether the hand encoder took `resp` (rather than prost).
fn by_hand(resp: &rls::RateLimitResponse) -> bool {
    encode(resp, &mut Out::new())
}

fn rate_limit() -> impl Strategy<Value = RateLimit> {
    (
        prop_oneof![Just(0u32), any::<u32>()],
        prop_oneof![0..8i32, any::<i32>()],
        prop_oneof![Just(String::new()), "[a-z_]{1,12}", "[a-z]{100,200}"],
    )
        .prop_map(|(requests_per_unit, unit, name)| RateLimit {
            name,
            requests_per_unit,
            unit,
        })
}

fn status() -> impl Strategy<Value = DescriptorStatus> {
    (
        prop_oneof![0..3i32, any::<i32>()],
        proptest::option::of(rate_limit()),
        prop_oneof![Just(0u32), Just(u32::MAX), any::<u32>()],
        proptest::option::of((
            prop_oneof![Just(0i64), 0..100_000i64, any::<i64>()],
            prop_oneof![Just(0i32), any::<i32>()],
        )),
        proptest::bool::weighted(0.05),
    )
        .prop_map(
            |(code, current_limit, limit_remaining, d, quota)| DescriptorStatus {
                code,
                current_limit,
                limit_remaining,
                duration_until_reset: d
                    .map(|(seconds, nanos)| prost_types::Duration { seconds, nanos }),
                quota: quota.then(Quota::default),
            },
        )
}

fn response() -> impl Strategy<Value = rls::RateLimitResponse> {
    (
        prop_oneof![0..3i32, any::<i32>()],
        prop_oneof![
            proptest::collection::vec(status(), 0..4),
            proptest::collection::vec(status(), 0..40),
        ],
        proptest::bool::weighted(0.05),
        proptest::bool::weighted(0.05),
    )
        .prop_map(
            |(overall_code, statuses, headers, body)| rls::RateLimitResponse {
                overall_code,
                statuses,
                response_headers_to_add: if headers {
                    vec![crate::pb::envoy::config::core::v3::HeaderValue {
                        key: "x-ratelimit-limit".into(),
                        value: "10".into(),
                        raw_value: Vec::new(),
                    }]
                } else {
                    Vec::new()
                },
                raw_body: if body { b"denied".to_vec() } else { Vec::new() },
                ..Default::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_bytes_are_prosts(resp in response()) {
        prop_assert_eq!(encoded(&resp), resp.encode_to_vec());
    }
}

/// The answers the server gives every request are the ones written by hand; the random
/// ones above would pass through prost alone just as well.
#[test]
fn the_usual_answers_are_written_by_hand() {
    let status = |code, remaining, name: &str| DescriptorStatus {
        code,
        current_limit: Some(RateLimit {
            name: name.into(),
            requests_per_unit: 10,
            unit: 2,
        }),
        limit_remaining: remaining,
        duration_until_reset: Some(prost_types::Duration {
            seconds: 37,
            nanos: 0,
        }),
        quota: None,
    };
    let usual = [
        rls::RateLimitResponse {
            overall_code: 1,
            statuses: vec![status(1, 9, "")],
            ..Default::default()
        },
        rls::RateLimitResponse {
            overall_code: 2,
            statuses: vec![
                status(1, 3, "per_user"),
                status(2, 0, ""),
                DescriptorStatus {
                    code: 1,
                    ..Default::default()
                },
            ],
            ..Default::default()
        },
        // Eight descriptors with named limits still fit on the stack.
        rls::RateLimitResponse {
            overall_code: 1,
            statuses: vec![status(1, 1_000_000, "a_fairly_long_rule_name"); 8],
            ..Default::default()
        },
    ];
    for resp in &usual {
        assert!(by_hand(resp), "{resp:?}");
        assert_eq!(encoded(resp), resp.encode_to_vec());
    }
    let mut with_headers = usual[0].clone();
    with_headers.raw_body = b"x".to_vec();
    assert!(!by_hand(&with_headers));
    let too_big = rls::RateLimitResponse {
        statuses: vec![status(1, 1, "a_fairly_long_rule_name"); 40],
        ..Default::default()
    };
    assert!(!by_hand(&too_big));
    assert_eq!(encoded(&too_big), too_big.encode_to_vec());
}
