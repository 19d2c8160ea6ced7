use super::*;

#[test]
fn keys_memcached_cannot_hold_are_refused() {
    assert!(check_key("d_k_v_60").is_ok());
    assert!(check_key(&"x".repeat(250)).is_ok());
    assert!(
        check_key(&"x".repeat(251))
            .unwrap_err()
            .message
            .contains("at most 250")
    );
    assert!(check_key("d_k_a b_60").is_err());
    assert!(check_key("d_k_a\nb_60").is_err());
}

#[test]
fn long_ttls_become_absolute() {
    assert_eq!(expiry(60, 1_000), 60);
    assert_eq!(expiry(2_592_000, 1_000), 2_592_000);
    assert_eq!(expiry(2_592_001, 1_000), 2_593_001);
    assert_eq!(expiry(31_536_000, 1_700_000_000), 1_731_536_000);
}

#[test]
fn node_choice_is_gomemcache_compatible() {
    // crc32("foo") = 0x8c736521
    assert_eq!(node_for("foo", 2), (0x8c73_6521usize) % 2);
    assert_eq!(node_for("foo", 3), (0x8c73_6521usize) % 3);
}

#[test]
fn node_addresses() {
    assert_eq!(
        crate::client_tls::host_of("10.0.0.1:11211"),
        Some("10.0.0.1")
    );
    assert_eq!(
        crate::client_tls::host_of("mc.example.com:11211"),
        Some("mc.example.com")
    );
    assert_eq!(crate::client_tls::host_of("[::1]:11211"), Some("::1"));
    for bad in [
        "mc",
        "mc:",
        ":11211",
        "mc:x",
        "[::1]",
        "[::1]11211",
        "mc:70000",
    ] {
        assert_eq!(crate::client_tls::host_of(bad), None, "{bad}");
    }
    let e = MemcachedStore::new(MemcachedSettings {
        nodes: vec!["127.0.0.1:1".into(), "nowhere".into()],
        ..MemcachedSettings::default()
    })
    .err()
    .unwrap();
    assert!(e.message.contains("MEMCACHE_HOST_PORT"), "{}", e.message);
    assert!(e.message.contains("\"nowhere\""), "{}", e.message);
}

#[tokio::test]
async fn join_all_keeps_order() {
    let futs = (0..4u64).map(|i| async move {
        tokio::time::sleep(Duration::from_millis(40 - i * 10)).await;
        i
    });
    assert_eq!(join_all(futs.collect()).await, [0, 1, 2, 3]);
}
