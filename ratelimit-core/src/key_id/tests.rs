use proptest::prelude::*;

use super::*;

/// The parts' fingerprint written the slow way: the word sequence, then Horner in u128.
fn reference(words: &[u64]) -> [u64; 2] {
    points().map(|point| {
        words.iter().fold(1u128, |sum, &w| {
            (sum * u128::from(point) + u128::from(w)) % u128::from(P)
        }) as u64
    })
}

/// A string's words as the module's doc says: length in the first word when short,
/// else a word of its own.
fn string_words(b: &[u8]) -> Vec<u64> {
    let mut out: Vec<u64> = b
        .chunks(7)
        .map(|c| {
            let mut le = [0; 8];
            le[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(le)
        })
        .collect();
    let length = b.len() as u64 + 1;
    if b.len() < SHORT {
        match out.first_mut() {
            Some(first) => *first |= length << 56,
            None => out.push(length << 56),
        }
    } else {
        out.insert(0, length);
    }
    out
}

fn parts(domain: &str, tag: &str, entries: &[(&str, &str)], window: u64) -> KeyId {
    let mut s = KeyIdState::key_parts(false, window, entries.len(), domain, tag);
    for (k, v) in entries {
        s.entry(k, v);
    }
    s.finish_key("")
}

proptest! {
    #[test]
    fn mul_add_is_the_field_arithmetic(sum in 0..(1u64 << 62), point in 1..P, w in 0..P) {
        let want = (u128::from(sum) * u128::from(point) + u128::from(w)) % u128::from(P);
        let got = mul_add(sum, point, w);
        prop_assert!(got < 1 << 62);
        prop_assert_eq!(u128::from(got) % u128::from(P), want);
    }

    #[test]
    fn a_fingerprint_is_the_polynomial_of_its_words(
        domain in ".{0,20}",
        tag in "[a-z0-9]{0,8}",
        entries in proptest::collection::vec(("[a-z_]{0,9}", ".{0,40}"), 0..4),
        window in any::<u32>(),
        prefix in "[a-z_]{0,9}",
    ) {
        let mut s = KeyIdState::key_parts(true, window.into(), entries.len(), &domain, &tag);
        let mut words = vec![PARTS | JOINT | (entries.len() as u64) << ENTRIES, window.into()];
        words.extend(string_words(domain.as_bytes()));
        words.extend(string_words(tag.as_bytes()));
        for (k, v) in &entries {
            s.entry(k, v);
            words.extend(string_words(k.as_bytes()));
            words.extend(string_words(v.as_bytes()));
        }
        if !prefix.is_empty() {
            words.extend(string_words(prefix.as_bytes()));
        }
        let id = s.finish_key(&prefix);
        prop_assert_eq!(id.lanes.map(|l| l % P), reference(&words));
    }

    #[test]
    fn short_loads_read_every_byte(b in proptest::collection::vec(any::<u8>(), 0..=8)) {
        let mut le = [0; 8];
        le[..b.len()].copy_from_slice(&b);
        prop_assert_eq!(load_le(&b), u64::from_le_bytes(le));
    }

    #[test]
    fn different_texts_have_different_fingerprints(a in ".{0,40}", b in ".{0,40}") {
        prop_assert_eq!(a == b, KeyId::of_text(&a) == KeyId::of_text(&b));
    }
}

#[test]
fn keys_that_upstreams_underscores_make_one_are_apart() {
    // Upstream writes both as `d_a_b_c_`.
    assert_ne!(
        parts("d", "", &[("a_b", "c")], 0),
        parts("d", "", &[("a", "b_c")], 0)
    );
    assert_ne!(
        parts("d_a", "", &[("b", "c")], 0),
        parts("d", "", &[("a", "b_c")], 0)
    );
}

#[test]
fn every_part_tells_keys_apart() {
    let base = parts("d", "", &[("k", "v")], 60);
    assert_eq!(base, parts("d", "", &[("k", "v")], 60));
    assert_ne!(base, parts("d", "", &[("k", "v")], 120));
    assert_ne!(base, parts("d", "", &[("k", "v")], 0));
    assert_ne!(base, parts("d", "tb1", &[("k", "v")], 60));
    assert_ne!(base, parts("e", "", &[("k", "v")], 60));
    assert_ne!(base, parts("d", "", &[("k", "w")], 60));
    assert_ne!(base, parts("d", "", &[("k", "v"), ("k", "v")], 60));
    assert_ne!(base, parts("d", "", &[("k", "v\0")], 60));
    let mut joint = KeyIdState::key_parts(true, 60, 1, "d", "");
    joint.entry("k", "v");
    assert_ne!(base, joint.finish_key(""));
    let mut prefixed = KeyIdState::key_parts(false, 60, 1, "d", "");
    prefixed.entry("k", "v");
    assert_ne!(base, prefixed.finish_key("p_"));
    assert_ne!(KeyId::of_text(""), parts("", "", &[], 0));
}

#[test]
fn strings_around_the_short_form_boundary_are_apart() {
    let values = (0..=40).map(|n| "a".repeat(n));
    let ids: Vec<KeyId> = values
        .chain((1..=40).map(|n| "\0".repeat(n)))
        .map(|v| parts("d", "", &[("k", &v)], 0))
        .collect();
    for (i, a) in ids.iter().enumerate() {
        assert!(!ids[i + 1..].contains(a), "{i}");
    }
}

#[test]
fn a_saved_state_continues_as_the_whole() {
    let mut head = KeyIdState::key_parts(false, 0, 1, "domain", "sw60");
    head.bytes(b"api_key");
    let mut from_head = head;
    from_head.bytes(b"some-value-longer-than-seven");
    assert_eq!(
        from_head.finish_key(""),
        parts(
            "domain",
            "sw60",
            &[("api_key", "some-value-longer-than-seven")],
            0
        )
    );
}
