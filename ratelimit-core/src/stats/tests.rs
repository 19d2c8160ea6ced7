use super::*;

#[test]
fn sanitizes_like_upstream() {
    assert_eq!(sanitize_stat_name("a:b|c"), "a_b_c");
    assert_eq!(
        sanitize_stat_name("domain.remote_address_10.0.0.1"),
        "domain.remote_address_10_0_0_1"
    );
    assert_eq!(sanitize_stat_name("domain.key_1.2.3"), "domain.key_1.2.3");
    // Upstream's regex is unanchored: any four dotted groups of up to three digits.
    assert_eq!(sanitize_stat_name("d.k_1.2.3.4567"), "d.k_1_2_3_4567");
    assert_eq!(sanitize_stat_name("d.dm_1234.5.6.7"), "d.dm_1234_5_6_7");
    assert_eq!(sanitize_stat_name("d.dm_0001.2.3.4"), "d.dm_0001_2_3_4");
    assert_eq!(sanitize_stat_name("a.1.2.3.4.5.6.7.8"), "a.1_2_3_4.5_6_7_8");
    assert_eq!(sanitize_stat_name("a.12.3456.7.8.9"), "a.12.3456_7_8_9");
    // (Each checked against Go's regexp, as are these two where a group gives way.)
    assert_eq!(sanitize_stat_name("1.22.333.4444.5"), "1_22_333_4444.5");
    assert_eq!(sanitize_stat_name("9999.1.1.1.1"), "9999_1_1_1.1");
    assert_eq!(
        sanitize_stat_name("d.k_a\nother.metric\r\t\u{7f}é"),
        "d.k_a_other.metric___é"
    );
}

#[test]
fn dynamic_stats_are_capped_by_eviction() {
    let s = Stats::with_dynamic_cap(3);
    for i in 0..10 {
        s.dynamic_rule(&format!("d.k_{i}"))
            .unwrap()
            .add(&StatDelta {
                total_hits: 1,
                ..StatDelta::default()
            });
    }
    s.dynamic_counter_add("ratelimit.service.rate_limit.x.domain_not_found", 1);
    assert_eq!(s.dynamic_entries(), 3);
    assert_eq!(s.snapshot()["ratelimit.service.stats_dropped"], 8);
    assert!(
        s.dynamic_rule("ratelimit.service.rate_limit.x.domain_not_found")
            .is_none()
    );
    // The newest key is always present.
    assert_eq!(
        s.snapshot()["ratelimit.service.rate_limit.x.domain_not_found"],
        1
    );
    // Configured rules are never evicted.
    let r = s.rule("d.configured");
    for i in 0..10 {
        s.dynamic_rule(&format!("d.z_{i}"));
    }
    assert!(Arc::ptr_eq(&r, &s.rule("d.configured")));
}

fn hit(s: &RuleStats) {
    s.add(&StatDelta {
        total_hits: 1,
        within_limit: 1,
        ..StatDelta::default()
    });
}

const GONE: &str = "ratelimit.service.rate_limit.d.gone.total_hits";

#[test]
fn removed_rules_are_reported_until_their_final_flush() {
    let s = Stats::default();
    s.hold_retired(true);
    let keep = s.rule("d.keep");
    hit(&keep);
    hit(&s.rule("d.gone"));
    s.retire_rules_except([&keep]);
    let (snap, mark) = s.snapshot_for_flush();
    assert_eq!(snap[GONE], 1);
    // Retired after that snapshot: waits for the next flush.
    s.rule("d.later");
    s.retire_rules_except([&keep]);
    s.release_flushed(mark);
    let snap = s.snapshot();
    assert!(!snap.contains_key(GONE), "{snap:?}");
    assert!(snap.contains_key("ratelimit.service.rate_limit.d.later.total_hits"));
    // A rule that stays keeps its counters.
    assert!(Arc::ptr_eq(&keep, &s.rule("d.keep")));
    assert_eq!(snap["ratelimit.service.rate_limit.d.keep.total_hits"], 1);
    let (_, mark) = s.snapshot_for_flush();
    s.release_flushed(mark);
    assert_eq!(s.snapshot().len(), 4 + 1 + 6);
}

#[test]
fn a_rule_back_before_the_flush_keeps_its_counts() {
    let s = Stats::default();
    s.hold_retired(true);
    let gone = s.rule("d.gone");
    hit(&gone);
    s.retire_rules_except([]);
    let back = s.rule("d.gone");
    assert!(Arc::ptr_eq(&gone, &back));
    let (_, mark) = s.snapshot_for_flush();
    s.release_flushed(mark);
    assert_eq!(s.snapshot()[GONE], 1);
}

#[test]
fn without_a_holding_sink_removed_rules_leave_at_once() {
    let s = Stats::default();
    hit(&s.rule("d.gone"));
    s.retire_rules_except([]);
    assert!(!s.snapshot().contains_key(GONE));
    assert_eq!(s.rule("d.gone").total_hits(), 0);
}

#[test]
fn huge_request_values_hold_no_memory() {
    let s = Stats::with_dynamic_bounds(10_000, 1 << 20);
    let huge = "x".repeat(1 << 20);
    for i in 0..50 {
        s.dynamic_counter_add(&format!("{RULE_PREFIX}{i}{huge}.domain_not_found"), 1);
        assert!(s.dynamic_rule(&format!("d.k_{i}{huge}")).is_none());
    }
    assert_eq!(s.dynamic_entries(), 0);
    assert_eq!(s.dynamic_bytes(), 0);
    assert_eq!(s.snapshot()["ratelimit.service.stats_dropped"], 100);
    // Ordinary names still fit, within the byte budget.
    for i in 0..100_000 {
        s.dynamic_counter_add(&format!("{RULE_PREFIX}d{i}.domain_not_found"), 1);
    }
    assert!(s.dynamic_bytes() <= 1 << 20);
    assert!(s.dynamic_entries() > 1_000);
}
