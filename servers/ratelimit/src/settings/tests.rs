use ratelimit_backends::memcached::MemcachedTls;
use ratelimit_backends::redis::{OnEmpty, RedisKind, SocketType};

use super::*;

fn with(vars: &[(&str, &str)]) -> Result<Settings, SettingsError> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Settings::from_lookup(move |n| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()))
}

#[test]
fn defaults_match_upstream() {
    let s = with(&[]).unwrap();
    assert_eq!((s.port, s.grpc_port, s.debug_port), (8080, 8081, 6070));
    assert_eq!(s.backend_type, BackendType::Redis);
    assert_eq!(
        s.config_dir(),
        PathBuf::from("/srv/runtime_data/current/config")
    );
    assert_eq!(s.limiter.expiration_jitter_max_seconds, 300);
    assert!(s.runtime_watch_root);
}

#[test]
fn bad_values_name_the_variable() {
    let e = with(&[("PORT", "80x")]).unwrap_err();
    assert_eq!(e.name, "PORT");
    assert!(e.to_string().contains("\"80x\""));
    assert_eq!(
        with(&[("SHADOW_MODE", "yes")]).unwrap_err().name,
        "SHADOW_MODE"
    );
    assert_eq!(
        with(&[("BACKEND_TYPE", "etcd")]).unwrap_err().name,
        "BACKEND_TYPE"
    );
    assert_eq!(
        with(&[("NEAR_LIMIT_RATIO", "2")]).unwrap_err().name,
        "NEAR_LIMIT_RATIO"
    );
    assert_eq!(
        with(&[("HTTP_READ_TIMEOUT", "5 parsecs")])
            .unwrap_err()
            .name,
        "HTTP_READ_TIMEOUT"
    );
}

#[test]
fn xds_settings() {
    let s = with(&[]).unwrap();
    assert_eq!(s.xds_server_url, "localhost:18000");
    assert_eq!(s.xds_node_id, "default");
    assert_eq!(s.xds_backoff_initial, Duration::from_secs(10));
    assert_eq!(s.xds_backoff_factor, 0.5);
    assert!(s.xds_backoff_jitter);
    let s = with(&[
        ("CONFIG_GRPC_XDS_NODE_METADATA", "a=1, b = two=2 ,"),
        (
            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
            "authorization:Bearer x:y",
        ),
    ])
    .unwrap();
    assert_eq!(
        s.xds_node_metadata,
        [("a".into(), "1".into()), ("b".into(), "two=2".into())]
    );
    assert_eq!(
        s.xds_additional_headers,
        [("authorization".into(), "Bearer x:y".into())]
    );
    for (name, value) in [
        ("CONFIG_GRPC_XDS_NODE_METADATA", "novalue"),
        ("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", ":v"),
        ("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "-1"),
        ("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "soon"),
    ] {
        assert_eq!(with(&[(name, value)]).unwrap_err().name, name);
    }
}

#[test]
fn intervals_that_pace_a_loop_refuse_zero() {
    for name in [
        "STATS_FLUSH_INTERVAL",
        "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
        "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
        "REDIS_STARTUP_INITIAL_INTERVAL",
        "REDIS_STARTUP_MAX_INTERVAL",
    ] {
        for zero in ["0", "0s", "0.0h"] {
            let e = with(&[(name, zero)]).unwrap_err();
            assert_eq!((e.name.as_str(), e.value.as_str()), (name, zero));
            assert!(e.to_string().contains("a duration above 0"), "{e}");
        }
        assert!(with(&[(name, "1ms")]).is_ok(), "{name}");
    }
    // Zero keeps its meaning where it has one: polling off, no time limit.
    let s = with(&[
        ("RUNTIME_POLL_INTERVAL", "0"),
        ("REDIS_STARTUP_MAX_ELAPSED_TIME", "0"),
    ])
    .unwrap();
    assert!(s.runtime_poll_interval.is_zero());
}

#[test]
fn go_durations() {
    assert_eq!(parse_go_duration("150us"), Some(Duration::from_micros(150)));
    assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
    assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
    assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
    assert_eq!(parse_go_duration("10"), None);
    assert_eq!(parse_go_duration("-1s"), None);
    assert_eq!(parse_go_duration(""), None);
}

#[test]
fn subdirectory_and_prefix() {
    let s = with(&[
        ("RUNTIME_ROOT", "/r"),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("CACHE_KEY_PREFIX", "p:"),
        ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
        ("LIMIT_RESET_HEADER", "X-Reset"),
    ])
    .unwrap();
    assert_eq!(s.config_dir(), PathBuf::from("/r/ratelimit/config"));
    assert_eq!(s.limiter.cache_key_prefix, "p:");
    assert_eq!(s.limiter.response_headers.unwrap().reset, "X-Reset");
}

#[test]
fn store_settings_reject_bad_values() {
    assert_eq!(
        with(&[("REDIS_TYPE", "ring")]).unwrap_err().name,
        "REDIS_TYPE"
    );
    assert_eq!(
        with(&[("REDIS_TIMEOUT", "10")]).unwrap_err().name,
        "REDIS_TIMEOUT"
    );
    let e = with(&[
        ("REDIS_PERSECOND", "true"),
        ("REDIS_PERSECOND_POOL_SIZE", "x"),
    ])
    .unwrap_err();
    assert_eq!(e.name, "REDIS_PERSECOND_POOL_SIZE");
    let both = [
        ("BACKEND_TYPE", "memcache"),
        ("MEMCACHE_HOST_PORT", "a:1"),
        ("MEMCACHE_SRV", "_m._tcp"),
    ];
    let e = with(&both).unwrap_err().to_string();
    assert!(
        e.contains("Both MEMCACHE_HOST_PORT and MEMCACHE_SRV are set"),
        "{e}"
    );
}

#[test]
fn memcache_settings() {
    let mc = [("BACKEND_TYPE", "memcache")];
    let with_mc = |extra: &[(&str, &str)]| {
        let mut v = mc.to_vec();
        v.extend_from_slice(extra);
        with(&v)
    };
    let s = with_mc(&[("MEMCACHE_HOST_PORT", "a:1, b:2")])
        .unwrap()
        .memcache;
    assert_eq!(s.nodes, ["a:1", "b:2"]);
    assert_eq!((s.srv.as_deref(), s.srv_refresh), (None, Duration::ZERO));
    assert!(s.tls.is_none() && s.srv_nameserver.is_none());
    assert_eq!(s.timeout, Duration::from_secs(1));

    let s = with_mc(&[
        ("MEMCACHE_SRV", "_memcache._tcp.example.com"),
        ("MEMCACHE_SRV_REFRESH", "30s"),
        ("MEMCACHE_SRV_NAMESERVER", "127.0.0.1:5353"),
    ])
    .unwrap()
    .memcache;
    assert_eq!(s.srv.as_deref(), Some("_memcache._tcp.example.com"));
    assert!(s.nodes.is_empty());
    assert_eq!(s.srv_refresh, Duration::from_secs(30));
    assert_eq!(s.srv_nameserver, Some("127.0.0.1:5353".parse().unwrap()));
    let s = with_mc(&[
        ("MEMCACHE_SRV", "_m._tcp.x"),
        ("MEMCACHE_SRV_NAMESERVER", "10.0.0.2"),
    ])
    .unwrap()
    .memcache;
    assert_eq!(s.srv_nameserver, Some("10.0.0.2:53".parse().unwrap()));

    let s = with_mc(&[
        ("MEMCACHE_HOST_PORT", "a:1"),
        ("MEMCACHE_TLS", "true"),
        ("MEMCACHE_TLS_CACERT", "/ca.pem"),
        ("MEMCACHE_TLS_CLIENT_CERT", "/c.pem"),
        ("MEMCACHE_TLS_CLIENT_KEY", "/c.key"),
        ("MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "true"),
    ])
    .unwrap()
    .memcache;
    assert_eq!(
        s.tls,
        Some(MemcachedTls {
            ca: Some("/ca.pem".into()),
            client_cert: Some(("/c.pem".into(), "/c.key".into())),
            skip_hostname_verification: true,
        })
    );
    // The files only count when TLS is on, as upstream.
    let s = with_mc(&[
        ("MEMCACHE_HOST_PORT", "a:1"),
        ("MEMCACHE_TLS_CACERT", "/ca"),
    ]);
    assert!(s.unwrap().memcache.tls.is_none());

    for (vars, name) in [
        (
            &[("MEMCACHE_SRV", "memcache.example.com")][..],
            "MEMCACHE_SRV",
        ),
        (
            &[
                ("MEMCACHE_SRV", "_m._tcp.x"),
                ("MEMCACHE_SRV_REFRESH", "10"),
            ],
            "MEMCACHE_SRV_REFRESH",
        ),
        (
            &[
                ("MEMCACHE_SRV", "_m._tcp.x"),
                ("MEMCACHE_SRV_NAMESERVER", "dns:53"),
            ],
            "MEMCACHE_SRV_NAMESERVER",
        ),
        (
            &[("MEMCACHE_HOST_PORT", "a:1"), ("MEMCACHE_TLS", "yes")],
            "MEMCACHE_TLS",
        ),
        (
            &[
                ("MEMCACHE_HOST_PORT", "a:1"),
                ("MEMCACHE_TLS", "1"),
                ("MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "sure"),
            ],
            "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
        ),
        (
            &[
                ("MEMCACHE_HOST_PORT", "a:1"),
                ("MEMCACHE_TLS", "true"),
                ("MEMCACHE_TLS_CLIENT_KEY", "/c.key"),
            ],
            "MEMCACHE_TLS_CLIENT_KEY",
        ),
        (&[][..], "MEMCACHE_HOST_PORT"),
    ] {
        let e = with_mc(vars).unwrap_err();
        assert_eq!(e.name, name, "{vars:?}: {e}");
    }
    let e = with_mc(&[
        ("MEMCACHE_HOST_PORT", "a:1"),
        ("MEMCACHE_TLS", "true"),
        ("MEMCACHE_TLS_CLIENT_CERT", "/c.pem"),
    ])
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("MEMCACHE_TLS_CLIENT_KEY to be set too"),
        "{e}"
    );
}

#[test]
fn redis_settings_as_upstream() {
    let s = with(&[]).unwrap();
    assert_eq!(s.redis.socket_type, SocketType::Unix);
    assert_eq!(s.redis.url, "/var/run/nutcracker/ratelimit.sock");
    assert_eq!(s.redis.pool_size, 10);
    assert_eq!(s.redis.timeout, Duration::from_secs(10));
    assert!(s.redis_per_second.is_none());
    let s = with(&[
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", "mymaster,10.0.0.1:26379"),
        ("REDIS_TYPE", "Sentinel"),
        ("REDIS_PERSECOND", "true"),
        ("REDIS_PERSECOND_URL", "127.0.0.1:6380"),
        ("REDIS_PERSECOND_SOCKET_TYPE", "tcp"),
        ("REDIS_PIPELINE_LIMIT", "8"),
        ("REDIS_POOL_ON_EMPTY_BEHAVIOR", "error"),
    ])
    .unwrap();
    assert_eq!(s.redis.kind, RedisKind::Sentinel);
    assert_eq!(s.redis.on_empty, OnEmpty::Error);
    assert_eq!(s.redis_per_second.unwrap().url, "127.0.0.1:6380");
    assert_eq!(
        s.warnings,
        ["REDIS_PIPELINE_LIMIT is deprecated and has no effect"]
    );
}

#[test]
fn worker_threads_default_to_the_cpus_and_reject_zero() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(with(&[]).unwrap().worker_threads, cpus);
    assert_eq!(
        with(&[("TOKIO_WORKER_THREADS", "3")])
            .unwrap()
            .worker_threads,
        3
    );
    for bad in ["0", "two", "-1"] {
        let e = with(&[("TOKIO_WORKER_THREADS", bad)]).unwrap_err();
        assert!(e.to_string().contains("TOKIO_WORKER_THREADS"), "{e}");
    }
}

#[test]
fn rlqs_settings_default_and_refuse_what_envoy_cannot_use() {
    use ratelimit_core::quota::{NoMatch, QuotaSettings};
    assert_eq!(with(&[]).unwrap().rlqs, QuotaSettings::default());
    let s = with(&[
        ("RLQS_NO_MATCH", "deny_all"),
        ("RLQS_ASSIGNMENT_TTL", "1m"),
        ("RLQS_REFRESH_INTERVAL", "20s"),
        ("RLQS_ABANDON_AFTER", "10m"),
        ("RLQS_DEMAND_WINDOW", "15s"),
        ("RLQS_FLOOR_PERMILLE", "50"),
        ("RLQS_CHANGE_PERMILLE", "0"),
        ("RLQS_MAX_BUCKETS_PER_STREAM", "50"),
        ("RLQS_MAX_BUCKETS", "2000"),
        ("RLQS_MAX_BUCKET_BYTES", "1000000"),
    ])
    .unwrap()
    .rlqs;
    assert_eq!(
        s,
        QuotaSettings {
            no_match: NoMatch::DenyAll,
            assignment_ttl_secs: 60,
            refresh_secs: 20,
            abandon_after_secs: 600,
            demand_window_secs: 15,
            floor_permille: 50,
            change_permille: 0,
            max_buckets_per_stream: 50,
            max_buckets: 2000,
            max_bucket_bytes: 1_000_000,
        }
    );
    for (name, bad) in [
        ("RLQS_NO_MATCH", "maybe"),
        ("RLQS_ASSIGNMENT_TTL", "1500ms"),
        ("RLQS_ASSIGNMENT_TTL", "1s"),
        ("RLQS_REFRESH_INTERVAL", "30s"),
        ("RLQS_ABANDON_AFTER", "0"),
        ("RLQS_FLOOR_PERMILLE", "1001"),
        ("RLQS_MAX_BUCKETS", "0"),
        ("RLQS_MAX_BUCKETS_PER_STREAM", "many"),
        ("RLQS_MAX_BUCKET_BYTES", "0"),
    ] {
        let e = with(&[(name, bad)]).unwrap_err();
        assert!(e.to_string().contains(name), "{e}");
    }
}
