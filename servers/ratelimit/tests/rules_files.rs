//! Rule files reloaded while the server runs: every change kind, both watch modes, swaps,
//! dot files, broken files, merging, and a reload under continuous load.
//!
//! `RUNTIME_POLL_INTERVAL=0` everywhere except where the poll itself is tested, so that
//! these tests show the change events doing the work.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::common::{Server, mkfifo, post_json, start_in, temp_dir};
use crate::rules_util::{VISIBLE, line, rlconfig, rule, spawn, stat, swap_symlink, within};

const NO_POLL: (&str, &str) = ("RUNTIME_POLL_INTERVAL", "0");

fn shows(srv: &Server, expected: &str) -> Option<Duration> {
    within(VISIBLE, || rlconfig(srv).contains(expected))
}

fn lacks(srv: &Server, unexpected: &str) -> Option<Duration> {
    within(VISIBLE, || !rlconfig(srv).contains(unexpected))
}

/// Waits for a log line containing `needle` and returns it.
fn logged(srv: &Server, needle: &str) -> String {
    let mut log = Vec::new();
    let found = within(VISIBLE, || {
        log.extend(srv.proc.lines.try_iter());
        log.iter().any(|l| l.contains(needle))
    });
    assert!(found.is_some(), "no log line with {needle:?} in {log:#?}");
    log.into_iter().find(|l| l.contains(needle)).unwrap()
}

fn successes_grow(srv: &Server, from: u64) -> Option<Duration> {
    within(VISIBLE, || {
        stat(srv, "ratelimit.service.config_load_success") > from
    })
}

/// Edit, create, chmod and remove, in the directory the server reads.
fn every_change_kind(watch_root: &str) {
    let dir = temp_dir("reload");
    let cfg = dir.join("config");
    let srv = start_in(
        dir,
        &[("a.yaml", &rule("d", "a", 10))],
        &[("RUNTIME_WATCH_ROOT", watch_root), NO_POLL],
    );
    assert!(rlconfig(&srv).contains(&line("d", "a", 10)));

    // Edit in place (truncate and write, as `echo >` or most editors do).
    std::fs::write(cfg.join("a.yaml"), rule("d", "a", 20)).unwrap();
    let t = shows(&srv, &line("d", "a", 20)).expect("an edit reloads");
    eprintln!("edit visible after {t:?}");

    // Create.
    std::fs::write(cfg.join("b.yml"), rule("e", "b", 5)).unwrap();
    shows(&srv, &line("e", "b", 5)).expect("a new file is loaded");

    // chmod: the content is the same, so the only trace of the reload is the counter.
    // Let any reload still due to the create pass first, so it is not taken for this one.
    std::thread::sleep(Duration::from_millis(400));
    let before = stat(&srv, "ratelimit.service.config_load_success");
    std::fs::set_permissions(cfg.join("b.yml"), std::fs::Permissions::from_mode(0o600)).unwrap();
    successes_grow(&srv, before).expect("a chmod reloads");

    // Remove.
    std::fs::remove_file(cfg.join("b.yml")).unwrap();
    lacks(&srv, "e.b:").expect("a removed file's rules go");
    assert!(rlconfig(&srv).contains(&line("d", "a", 20)));

    // Files that are not rules do not matter, but their events still cause a harmless reload.
    std::fs::write(cfg.join("notes.txt"), "domain: [").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(stat(&srv, "ratelimit.service.config_load_error"), 0);
}

#[test]
fn edit_create_chmod_remove_reload_in_directory_mode() {
    every_change_kind("false");
}

#[test]
fn edit_create_chmod_remove_reload_in_root_mode() {
    every_change_kind("true");
}

/// `RUNTIME_ROOT` is a symlink replaced atomically by a new one (the deploy layout upstream's
/// default watch mode expects). After a swap the watch follows to the new directory.
#[test]
fn swapping_the_root_symlink_reloads() {
    let dir = temp_dir("rootswap");
    for (v, n) in [("v1", 1), ("v2", 2)] {
        std::fs::create_dir_all(dir.join(v).join("config")).unwrap();
        std::fs::write(dir.join(v).join("config/a.yaml"), rule("d", "a", n)).unwrap();
    }
    let root = dir.join("current");
    std::os::unix::fs::symlink(dir.join("v1"), &root).unwrap();
    let srv = start_in(
        dir.clone(),
        &[],
        &[("RUNTIME_ROOT", root.to_str().unwrap()), NO_POLL],
    );
    assert!(rlconfig(&srv).contains(&line("d", "a", 1)));

    swap_symlink(&root, &dir.join("v2"));
    let t = shows(&srv, &line("d", "a", 2)).expect("the swap reloads");
    eprintln!("root swap visible after {t:?}");

    // Edits now count in v2, no longer in v1.
    std::fs::write(dir.join("v2/config/b.yaml"), rule("e", "b", 3)).unwrap();
    shows(&srv, &line("e", "b", 3)).expect("edits in the new root reload");

    swap_symlink(&root, &dir.join("v1"));
    shows(&srv, &line("d", "a", 1)).expect("swapping back reloads");
    lacks(&srv, "e.b:").unwrap();
}

/// The rule directory itself is a symlink inside the root, swapped to a new directory.
fn app_directory_swap(watch_root: &str) {
    let dir = temp_dir("appswap");
    std::fs::remove_dir_all(dir.join("config")).unwrap();
    for (v, n) in [("rules-1", 1), ("rules-2", 2)] {
        std::fs::create_dir_all(dir.join(v)).unwrap();
        std::fs::write(dir.join(v).join("a.yaml"), rule("d", "a", n)).unwrap();
    }
    std::os::unix::fs::symlink("rules-1", dir.join("config")).unwrap();
    let srv = start_in(
        dir.clone(),
        &[],
        &[("RUNTIME_WATCH_ROOT", watch_root), NO_POLL],
    );
    assert!(rlconfig(&srv).contains(&line("d", "a", 1)));
    swap_symlink(&dir.join("config"), Path::new("rules-2"));
    let t = shows(&srv, &line("d", "a", 2)).expect("the swap reloads");
    eprintln!("config swap ({watch_root}) visible after {t:?}");
    // The directory watch moved along.
    std::fs::write(dir.join("rules-2/b.yaml"), rule("e", "b", 3)).unwrap();
    shows(&srv, &line("e", "b", 3)).expect("edits in the new directory reload");
}

#[test]
fn swapping_the_rule_directory_symlink_reloads_in_directory_mode() {
    app_directory_swap("false");
}

#[test]
fn swapping_the_rule_directory_symlink_reloads_in_root_mode() {
    app_directory_swap("true");
}

/// A Kubernetes ConfigMap volume: the files are symlinks through `..data`, which is swapped
/// to a new timestamped directory on every update. Works in both watch modes.
fn configmap_swap(watch_root: &str) {
    let dir = temp_dir("configmap");
    let cfg = dir.join("config");
    for (v, n) in [("..2026_01", 1), ("..2026_02", 2)] {
        std::fs::create_dir_all(cfg.join(v)).unwrap();
        std::fs::write(cfg.join(v).join("limits.yaml"), rule("d", "a", n)).unwrap();
    }
    std::os::unix::fs::symlink("..2026_01", cfg.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/limits.yaml", cfg.join("limits.yaml")).unwrap();
    let srv = start_in(
        dir,
        &[],
        &[
            ("RUNTIME_WATCH_ROOT", watch_root),
            ("RUNTIME_IGNOREDOTFILES", "true"),
            NO_POLL,
        ],
    );
    assert!(rlconfig(&srv).contains(&line("d", "a", 1)));
    swap_symlink(&cfg.join("..data"), Path::new("..2026_02"));
    let t = shows(&srv, &line("d", "a", 2)).expect("the ..data swap reloads");
    eprintln!("..data swap ({watch_root}) visible after {t:?}");
    std::fs::remove_dir_all(cfg.join("..2026_01")).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    assert!(rlconfig(&srv).contains(&line("d", "a", 2)));
    assert_eq!(stat(&srv, "ratelimit.service.config_load_error"), 0);
}

#[test]
fn configmap_data_swap_reloads_in_directory_mode() {
    configmap_swap("false");
}

#[test]
fn configmap_data_swap_reloads_in_root_mode() {
    configmap_swap("true");
}

#[test]
fn dot_files_are_skipped_only_when_asked() {
    for ignore in [true, false] {
        let dir = temp_dir("dots");
        let cfg = dir.join("config");
        let srv = start_in(
            dir,
            &[("a.yaml", &rule("d", "a", 1))],
            &[
                (
                    "RUNTIME_IGNOREDOTFILES",
                    if ignore { "true" } else { "false" },
                ),
                NO_POLL,
            ],
        );
        let before = stat(&srv, "ratelimit.service.config_load_success");
        std::fs::write(cfg.join(".hidden.yaml"), rule("h", "x", 4)).unwrap();
        successes_grow(&srv, before).expect("a dot file's change still reloads");
        // Let the burst settle before judging.
        std::thread::sleep(Duration::from_millis(300));
        let shown = rlconfig(&srv).contains(&line("h", "x", 4));
        assert_eq!(shown, !ignore, "ignore={ignore}: {}", rlconfig(&srv));
        assert!(rlconfig(&srv).contains(&line("d", "a", 1)));
    }
}

#[test]
fn a_broken_file_keeps_the_old_rules_until_fixed() {
    let dir = temp_dir("broken");
    let cfg = dir.join("config");
    let srv = start_in(dir, &[("a.yaml", &rule("d", "a", 1))], &[NO_POLL]);
    let bad = "domain: e\ndescriptors:\n  - key: b\n    rate_limit:\n      unlimied: true\n";
    std::fs::write(cfg.join("b.yaml"), bad).unwrap();
    within(VISIBLE, || {
        stat(&srv, "ratelimit.service.config_load_error") >= 1
    })
    .expect("the error is counted");
    let l = logged(
        &srv,
        "config.b.yaml: config error, unknown key 'unlimied' (at descriptors[0].rate_limit)",
    );
    assert!(l.contains("keeping the previous rules"), "{l}");
    // Old rules still decide: d.a allows one request per minute.
    assert!(rlconfig(&srv).contains(&line("d", "a", 1)));
    let body = r#"{"domain":"d","descriptors":[{"entries":[{"key":"a","value":"x"}]}]}"#;
    assert_eq!(post_json(srv.http, body).status, 200);
    assert_eq!(post_json(srv.http, body).status, 429);

    std::fs::write(cfg.join("b.yaml"), rule("e", "b", 9)).unwrap();
    shows(&srv, &line("e", "b", 9)).expect("the fixed file loads");
    assert!(rlconfig(&srv).contains(&line("d", "a", 1)));
}

/// Entries that cannot be read as files, and a file nested past the loader's bound: each
/// fails the reload, naming the file, and the rules in force keep deciding.
#[test]
fn unreadable_or_too_deep_files_fail_the_reload() {
    let dir = temp_dir("unreadable");
    let cfg = dir.join("config");
    let srv = start_in(dir, &[("a.yaml", &rule("d", "a", 1))], &[NO_POLL]);
    let deep = |p: &Path| {
        let text = format!(
            "domain: e\ndescriptors: {}{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        std::fs::write(p, text).unwrap();
    };
    /// A name, how to make the entry, what the error says.
    type Case<'a> = (&'a str, &'a dyn Fn(&Path), &'a str);
    let cases: [Case; 4] = [
        (
            "loop.yaml",
            &|p| std::os::unix::fs::symlink(p, p).unwrap(),
            "loop.yaml: Too many levels of symbolic links",
        ),
        (
            "dangling.yaml",
            &|p| std::os::unix::fs::symlink(p.with_file_name("missing"), p).unwrap(),
            "dangling.yaml: dangling symlink",
        ),
        (
            "fifo.yaml",
            &mkfifo,
            "fifo.yaml: not a regular file (a FIFO)",
        ),
        (
            "deep.yaml",
            &deep,
            "config.deep.yaml: error loading config file: collections nested more than 64 levels deep",
        ),
    ];
    for (name, make, expected) in cases {
        let errors = stat(&srv, "ratelimit.service.config_load_error");
        make(&cfg.join(name));
        within(VISIBLE, || {
            stat(&srv, "ratelimit.service.config_load_error") > errors
        })
        .unwrap_or_else(|| panic!("{name} fails the reload"));
        let l = logged(&srv, expected);
        assert!(l.contains("keeping the previous rules"), "{l}");
        assert!(rlconfig(&srv).contains(&line("d", "a", 1)));

        let successes = stat(&srv, "ratelimit.service.config_load_success");
        std::fs::remove_file(cfg.join(name)).unwrap();
        successes_grow(&srv, successes).unwrap_or_else(|| panic!("without {name} it loads"));
    }
    let body = r#"{"domain":"d","descriptors":[{"entries":[{"key":"a","value":"x"}]}]}"#;
    assert_eq!(post_json(srv.http, body).status, 200);
    assert_eq!(post_json(srv.http, body).status, 429);
}

#[test]
fn merging_domains_across_files_follows_the_setting() {
    for merge in [false, true] {
        let dir = temp_dir("merge");
        let cfg = dir.join("config");
        let srv = start_in(
            dir,
            &[("a.yaml", &rule("d", "a", 1))],
            &[
                ("MERGE_DOMAIN_CONFIG", if merge { "true" } else { "false" }),
                NO_POLL,
            ],
        );
        std::fs::write(cfg.join("b.yaml"), rule("d", "b", 2)).unwrap();
        if merge {
            shows(&srv, &line("d", "b", 2)).expect("merged");
            assert!(rlconfig(&srv).contains(&line("d", "a", 1)));
        } else {
            within(VISIBLE, || {
                stat(&srv, "ratelimit.service.config_load_error") >= 1
            })
            .expect("a duplicate domain is an error");
            logged(&srv, "config.b.yaml: duplicate domain 'd' in config file");
            assert!(!rlconfig(&srv).contains("d.b:"));
        }
        // The same key in two files is an error even when merging.
        let errors = stat(&srv, "ratelimit.service.config_load_error");
        std::fs::write(cfg.join("c.yaml"), rule("d", "a", 3)).unwrap();
        within(VISIBLE, || {
            stat(&srv, "ratelimit.service.config_load_error") > errors
        })
        .expect("duplicate key rejected");
        assert!(rlconfig(&srv).contains(&line("d", "a", 1)));
    }
}

/// The poll notices a change no event reports: here nothing on the way to the rule
/// directory exists at start (so there is nothing to watch) and it all appears later.
#[test]
fn the_poll_picks_up_a_root_created_later() {
    let dir = temp_dir("poll");
    let root = dir.join("later");
    let mut p = spawn(
        &dir,
        &[
            ("RUNTIME_ROOT", root.to_str().unwrap()),
            ("FORCE_START_WITHOUT_INITIAL_CONFIG", "true"),
            ("RUNTIME_WATCH_ROOT", "false"),
            ("RUNTIME_POLL_INTERVAL", "300ms"),
        ],
    );
    let srv = p
        .wait_listening(Duration::from_secs(20))
        .expect("forced start");
    assert_eq!(rlconfig(&srv), "");
    std::fs::create_dir_all(root.join("config")).unwrap();
    std::fs::write(root.join("config/a.yaml"), rule("d", "a", 6)).unwrap();
    shows(&srv, &line("d", "a", 6)).expect("the poll loads the new directory");
    logged(&srv, "rule directory changed without a file event");
    // Later edits load too.
    std::fs::write(root.join("config/a.yaml"), rule("d", "a", 7)).unwrap();
    shows(&srv, &line("d", "a", 7)).unwrap();
}

/// Root swaps under continuous load: two files of one domain change together with every
/// swap, so a request that saw one file from before and one from after would report two
/// different limits. Every request must succeed and see one consistent rule set.
#[test]
fn reloads_under_load_never_fail_or_mix_rule_sets() {
    let dir = temp_dir("load");
    let limits = [1_000_000u32, 2_000_000];
    for (v, n) in [("v1", limits[0]), ("v2", limits[1])] {
        let cfg = dir.join(v).join("config");
        std::fs::create_dir_all(&cfg).unwrap();
        for key in ["k1", "k2"] {
            std::fs::write(
                cfg.join(format!("{key}.yaml")),
                format!(
                    "domain: load\ndescriptors:\n  - key: {key}\n    rate_limit: {{unit: hour, requests_per_unit: {n}}}\n"
                ),
            )
            .unwrap();
        }
    }
    let root = dir.join("current");
    std::os::unix::fs::symlink(dir.join("v1"), &root).unwrap();
    let srv = start_in(
        dir.clone(),
        &[],
        &[
            ("RUNTIME_ROOT", root.to_str().unwrap()),
            ("MERGE_DOMAIN_CONFIG", "true"),
            NO_POLL,
        ],
    );
    let http = srv.http;
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let body = r#"{"domain":"load","descriptors":[{"entries":[{"key":"k1","value":"x"}]},{"entries":[{"key":"k2","value":"y"}]}]}"#;
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let stop = stop.clone();
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let r = post_json(http, body);
                    assert_eq!(r.status, 200, "{}", r.text());
                    let j = r.json();
                    let got: Vec<u64> = j["statuses"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|s| s["currentLimit"]["requestsPerUnit"].as_u64().unwrap())
                        .collect();
                    assert_eq!(got.len(), 2, "{j}");
                    assert_eq!(got[0], got[1], "a request saw two rule sets: {j}");
                    let which = limits.iter().position(|l| u64::from(*l) == got[0]);
                    let which = which.unwrap_or_else(|| panic!("unknown limit: {j}"));
                    seen[which].fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
                n
            })
        })
        .collect();
    let loads_before = stat(&srv, "ratelimit.service.config_load_success");
    let started = Instant::now();
    let mut swaps = 0;
    while started.elapsed() < Duration::from_secs(4) {
        swaps += 1;
        swap_symlink(&root, &dir.join(if swaps % 2 == 1 { "v2" } else { "v1" }));
        // Long enough for a debounced reload between swaps, short enough for many swaps.
        std::thread::sleep(Duration::from_millis(250));
    }
    stop.store(true, Ordering::Relaxed);
    let total: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let loads = stat(&srv, "ratelimit.service.config_load_success") - loads_before;
    eprintln!(
        "{total} requests, {swaps} swaps, {loads} reloads, seen v1={} v2={}",
        seen[0].load(Ordering::Relaxed),
        seen[1].load(Ordering::Relaxed)
    );
    assert!(total >= 100, "too few requests to mean anything: {total}");
    assert!(seen.iter().all(|s| s.load(Ordering::Relaxed) > 0));
    assert!(loads >= swaps / 2, "{loads} reloads for {swaps} swaps");
    assert_eq!(stat(&srv, "ratelimit.service.config_load_error"), 0);
}
