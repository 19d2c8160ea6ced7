use super::keys::jitter;

#[test]
fn jitter_spreads_keys_and_stays_below_its_bound() {
    let values: std::collections::HashSet<u64> = (0..3000)
        .map(|i| jitter(&format!("domain_user_{i}_1700000000"), 300))
        .collect();
    assert!(values.iter().all(|v| *v < 300));
    // 3000 keys into 300 buckets: a fair spread leaves almost none empty.
    assert!(values.len() > 290, "only {} distinct", values.len());
    // Keys that differ only in the last byte, or only past the first eight, differ.
    assert_ne!(jitter("a_b_1", 1 << 40), jitter("a_b_2", 1 << 40));
    assert_ne!(jitter("12345678x", 1 << 40), jitter("12345678y", 1 << 40));
    assert_eq!(jitter("anything", 0), 0);
}
