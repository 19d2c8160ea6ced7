//! What statistics hold on to: a reload's removed rules are flushed once and forgotten, and
//! names built from huge request values pin no memory.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{Server, post_json, request, rss_kb, start, start_in, temp_dir};
use crate::rules_util::{VISIBLE, rlconfig, stat, within};

const RULE_PREFIX: &str = "ratelimit.service.rate_limit.";

fn many_rules(domain: &str, n: usize) -> String {
    let mut s = format!("domain: {domain}\ndescriptors:\n");
    for i in 0..n {
        let _ = writeln!(
            s,
            "  - key: k{i}\n    rate_limit: {{unit: hour, requests_per_unit: 100}}"
        );
    }
    s
}

fn hit(srv: &Server, domain: &str, key: &str) {
    let body = format!(
        r#"{{"domain":"{domain}","descriptors":[{{"entries":[{{"key":"{key}","value":"v"}}]}}]}}"#
    );
    assert_eq!(post_json(srv.http, &body).status, 200);
}

/// The `/stats` lines of rule statistics.
fn rule_lines(srv: &Server) -> Vec<String> {
    request(srv.debug, "GET", "/stats", b"")
        .text()
        .lines()
        .filter(|l| l.starts_with(RULE_PREFIX))
        .map(str::to_owned)
        .collect()
}

/// Sums the `name:n|c` deltas a statsd daemon receives, per name.
fn statsd_totals(listener: TcpListener) -> Arc<Mutex<HashMap<String, u64>>> {
    let totals = Arc::new(Mutex::new(HashMap::new()));
    let out = totals.clone();
    std::thread::spawn(move || {
        let Ok((conn, _)) = listener.accept() else {
            return;
        };
        for line in BufReader::new(conn).lines().map_while(Result::ok) {
            if let Some((name, rest)) = line.split_once(':')
                && let Some((v, "c")) = rest.split_once('|')
            {
                *out.lock().unwrap().entry(name.to_owned()).or_default() +=
                    v.parse::<u64>().unwrap_or(0);
            }
        }
    });
    totals
}

#[test]
fn a_reload_flushes_removed_rules_once_then_drops_them() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let totals = statsd_totals(listener);
    let keep = "domain: keep\ndescriptors:\n  - key: stay\n    rate_limit: {unit: hour, requests_per_unit: 100}\n";
    let big = many_rules("big", 2000);
    let dir = temp_dir("stats-reload");
    let config = dir.join("config");
    let srv = start_in(
        dir,
        &[("keep.yaml", keep), ("big.yaml", &big)],
        &[
            ("USE_STATSD", "true"),
            ("STATSD_HOST", "127.0.0.1"),
            ("STATSD_PORT", &port),
            ("STATS_FLUSH_INTERVAL", "300ms"),
            ("RUNTIME_POLL_INTERVAL", "0"),
        ],
    );
    assert_eq!(rule_lines(&srv).len(), 6 * 2001);
    for key in ["k0", "k7", "k7", "k7", "k1999"] {
        hit(&srv, "big", key);
    }
    hit(&srv, "keep", "stay");
    hit(&srv, "keep", "stay");

    // Three reloads, each to a different small set that keeps `keep.stay`; the first one
    // right after a hit, so that hit may only reach statsd in the removed rule's last flush.
    let mut previous = "big.yaml".to_owned();
    for generation in 0..3 {
        if generation == 0 {
            hit(&srv, "big", "k9");
        }
        let name = format!("s{generation}.yaml");
        std::fs::write(
            config.join(&name),
            format!("domain: s{generation}\ndescriptors:\n  - key: a\n    rate_limit: {{unit: hour, requests_per_unit: 1}}\n"),
        )
        .unwrap();
        std::fs::remove_file(config.join(&previous)).unwrap();
        let gone = previous.trim_end_matches(".yaml").to_owned();
        within(VISIBLE, || {
            let text = rlconfig(&srv);
            text.contains(&format!("s{generation}.a:")) && !text.contains(&format!("{gone}."))
        })
        .unwrap_or_else(|| panic!("reload {generation} not seen: {}", rlconfig(&srv)));
        hit(&srv, &format!("s{generation}"), "a");
        previous = name;
    }
    hit(&srv, "keep", "stay");

    let want = [
        ("big.k0", 1),
        ("big.k7", 3),
        ("big.k1999", 1),
        ("big.k9", 1),
        ("s0.a", 1),
        ("s1.a", 1),
        ("keep.stay", 3),
    ];
    let seen = |totals: &HashMap<String, u64>| {
        want.iter().all(|(rule, n)| {
            totals.get(&format!("{RULE_PREFIX}{rule}.total_hits")) == Some(&(*n as u64))
        })
    };
    within(Duration::from_secs(10), || seen(&totals.lock().unwrap())).unwrap_or_else(|| {
        panic!(
            "statsd never saw the last counts of {want:?}: {:?}",
            totals.lock().unwrap()
        )
    });

    // Only the live rules remain, and the kept one kept its counts across three reloads.
    let live = within(VISIBLE, || rule_lines(&srv).len() == 12);
    let lines = rule_lines(&srv);
    assert!(live.is_some(), "{} rule lines: {lines:?}", lines.len());
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with(&format!("{RULE_PREFIX}keep.stay."))
                || l.starts_with(&format!("{RULE_PREFIX}s2.a."))),
        "{lines:?}"
    );
    assert_eq!(stat(&srv, &format!("{RULE_PREFIX}keep.stay.total_hits")), 3);
    let total = request(srv.debug, "GET", "/stats", b"")
        .text()
        .lines()
        .count();
    assert!(total < 30, "{total} lines in /stats");

    // The final flush was the only one: nothing is counted twice afterwards.
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        seen(&totals.lock().unwrap()),
        "{:?}",
        totals.lock().unwrap()
    );
}

#[test]
fn huge_unknown_domain_names_pin_no_memory() {
    let srv = start(
        &[("keep.yaml", "domain: keep\ndescriptors:\n  - key: stay\n")],
        &[
            ("DISABLE_STATS", "true"),
            ("HTTP_MAX_BODY_BYTES", "4194304"),
            // Past the request limit's default, so that the statistics' own bound is tested.
            ("MAX_REQUEST_STRING_BYTES", "4194304"),
        ],
    );
    let filler = "x".repeat(1 << 20);
    let send = |i: usize| {
        let body = format!(
            r#"{{"domain":"{i}{filler}","descriptors":[{{"entries":[{{"key":"k","value":"v"}}]}}]}}"#
        );
        let r = post_json(srv.http, &body);
        assert_eq!(r.status, 200, "{}", r.text());
    };
    // Warm up the buffers and the allocator, then measure.
    for i in 0..4 {
        send(i);
    }
    let before = rss_kb(srv.proc.child.id()) * 1024;
    for i in 4..204 {
        send(i);
    }
    let after = rss_kb(srv.proc.child.id()) * 1024;
    let grown = after.saturating_sub(before);
    assert!(
        grown < 50 << 20,
        "RSS grew by {} MB ({} -> {} MB) over 200 unknown domains of 1 MiB",
        grown >> 20,
        before >> 20,
        after >> 20
    );
    assert!(stat(&srv, "ratelimit.service.stats_dropped") >= 200);
    let stats = request(srv.debug, "GET", "/stats", b"");
    assert!(
        stats.body.len() < 64 << 10,
        "/stats is {} bytes",
        stats.body.len()
    );
}
