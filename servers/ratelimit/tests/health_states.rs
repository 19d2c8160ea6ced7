//! Health transitions of the spec's state table, seen over `/healthcheck` and gRPC health,
//! with rule files as the configuration source; and the forced start.

use crate::common::{post_json, request_with, start, start_in, temp_dir};
use crate::grpc_face::{call, channel, req};
use crate::rules_util::{VISIBLE, health_is, line, rlconfig, rule, stat, within};

const NO_POLL: (&str, &str) = ("RUNTIME_POLL_INTERVAL", "0");

#[test]
fn config_health_follows_loads_when_required() {
    let dir = temp_dir("health");
    let cfg = dir.join("config");
    let srv = start_in(
        dir,
        &[],
        &[("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true"), NO_POLL],
    );
    // Loaded, but no domain: unhealthy, and so says the health gauge dashboards read.
    assert!(health_is(&srv, false));
    assert_eq!(stat(&srv, "ratelimit_server.healthy"), 0);

    // A load with a domain: healthy.
    std::fs::write(cfg.join("a.yaml"), rule("d", "a", 1)).unwrap();
    assert!(within(VISIBLE, || health_is(&srv, true)).is_some());
    assert_eq!(stat(&srv, "ratelimit_server.healthy"), 1);

    // A failed load changes nothing.
    std::fs::write(cfg.join("b.yaml"), "domain: e\ndescriptors: [1, 2]\n").unwrap();
    within(VISIBLE, || {
        stat(&srv, "ratelimit.service.config_load_error") >= 1
    })
    .unwrap();
    assert!(health_is(&srv, true));

    // A successful load without any domain ("no configuration found"): unhealthy.
    std::fs::remove_file(cfg.join("a.yaml")).unwrap();
    std::fs::remove_file(cfg.join("b.yaml")).unwrap();
    assert!(within(VISIBLE, || health_is(&srv, false)).is_some());
    assert_eq!(rlconfig(&srv), "");

    // A failed load while unhealthy leaves it unhealthy.
    let errors = stat(&srv, "ratelimit.service.config_load_error");
    std::fs::write(cfg.join("c.yaml"), "domain: [").unwrap();
    within(VISIBLE, || {
        stat(&srv, "ratelimit.service.config_load_error") > errors
    })
    .unwrap();
    assert!(health_is(&srv, false));

    std::fs::write(cfg.join("c.yaml"), rule("d", "c", 2)).unwrap();
    assert!(within(VISIBLE, || health_is(&srv, true)).is_some());
}

#[test]
fn config_health_is_not_tracked_by_default() {
    let dir = temp_dir("health-default");
    let cfg = dir.join("config");
    let srv = start_in(dir, &[], &[NO_POLL]);
    assert!(health_is(&srv, true));
    std::fs::write(cfg.join("a.yaml"), rule("d", "a", 1)).unwrap();
    within(VISIBLE, || rlconfig(&srv).contains(&line("d", "a", 1))).unwrap();
    std::fs::remove_file(cfg.join("a.yaml")).unwrap();
    within(VISIBLE, || rlconfig(&srv).is_empty()).unwrap();
    assert!(health_is(&srv, true));
}

#[test]
fn forced_start_with_a_broken_file_answers_no_config_until_fixed() {
    let bad = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight}\n";
    let srv = start(
        &[("a.yaml", bad)],
        &[("FORCE_START_WITHOUT_INITIAL_CONFIG", "true"), NO_POLL],
    );
    assert_eq!(stat(&srv, "ratelimit.service.config_load_error"), 1);
    let body = r#"{"domain":"d","descriptors":[{"entries":[{"key":"a","value":"x"}]}]}"#;
    let r = request_with(srv.http, "POST", "/json", &[], body.as_bytes());
    assert_eq!(r.status, 400);
    assert_eq!(
        r.header("x-ratelimit-error"),
        Some("no rate limit configuration loaded")
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let status = rt.block_on(async {
        let ch = channel(&srv.grpc).await;
        call(&ch, &req("d", &[("a", "x")])).await.unwrap_err()
    });
    assert_eq!(status.code(), tonic::Code::Unknown);
    assert_eq!(status.message(), "no rate limit configuration loaded");
    assert!(health_is(&srv, true));

    std::fs::write(srv.dir.join("config/a.yaml"), rule("d", "a", 1)).unwrap();
    within(VISIBLE, || post_json(srv.http, body).status == 200).expect("rules arrive");
    assert_eq!(post_json(srv.http, body).status, 429);
}
