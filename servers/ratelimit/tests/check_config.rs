//! `ratelimit check-config`: the offline checker, run as CI would run it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{mkfifo, temp_dir};

fn check(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratelimit"));
    cmd.env_clear().arg("check-config").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap(), text)
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_owned()
}

const GOOD: &str =
    "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n";

#[test]
fn valid_files_and_directories_pass() {
    let dir = temp_dir("check-ok");
    let cfg = dir.join("config");
    write(&cfg, "a.yaml", GOOD);
    write(&cfg, "b.yml", &GOOD.replace("domain: d", "domain: e"));
    write(&cfg, "README.md", "not rules");
    let (code, out) = check(&[cfg.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.trim(), "ok: 2 file(s), 2 domain(s), 2 rule(s)");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_algorithm_fields_are_checked_and_printed() {
    let dir = temp_dir("check-algorithms");
    let bad = write(
        &dir,
        "bad.yaml",
        concat!(
            "domain: d\ndescriptors:\n",
            "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky_bucket}\n",
            "  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 5}\n",
            "  - key: c\n    rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: 0}\n",
            "  - key: e\n    rate_limit: {unit: second, requests_per_unit: 1}\n    rate_limits: [{unit: day, requests_per_unit: 9}]\n",
            "  - key: f\n    rate_limits: []\n",
            "  - key: g\n    rate_limits:\n      - {unit: second, requests_per_unit: 1, name: x}\n      - {unit: day, requests_per_unit: 9, name: x}\n",
        ),
    );
    let (code, out) = check(&[&bad], &[]);
    assert_eq!(code, 1, "{out}");
    for expected in [
        ":4: unknown rate limit algorithm 'leaky_bucket' (expected fixed_window, sliding_window or token_bucket) (at descriptors[0].rate_limit.algorithm)",
        ":6: burst is only valid with algorithm token_bucket (at descriptors[1].rate_limit.burst)",
        ":8: unit_multiplier must be at least 1 (at descriptors[2].rate_limit.unit_multiplier)",
        ":9: rate_limit and rate_limits cannot both be set (at descriptors[3])",
        ":13: rate_limits must have at least one entry (at descriptors[4].rate_limits)",
        ":17: rate limit name 'x' is used twice in one rate_limits list (at descriptors[5].rate_limits[1])",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    assert!(out.contains("6 problem(s) in 1 of 1 file(s)"), "{out}");
    let good = write(
        &dir,
        "good.yaml",
        concat!(
            "domain: d\ndescriptors:\n",
            "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}\n",
            "  - key: b\n    rate_limits:\n      - {unit: minute, unit_multiplier: 5, requests_per_unit: 100, algorithm: sliding_window, name: five}\n      - {unit: day, requests_per_unit: 1000}\n",
            "  - key: c\n    rate_limit: {unit: hour, requests_per_unit: 7}\n",
        ),
    );
    let (code, out) = check(&["--print-rules", &good], &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        concat!(
            "d.a: unit=SECOND requests_per_unit=10, shadow_mode: false, quota_mode: false, algorithm: token_bucket, unit_multiplier: 1, burst: 20\n",
            "d.b: unit=DAY requests_per_unit=1000, shadow_mode: false, quota_mode: false\n",
            "d.b: unit=MINUTE requests_per_unit=100, shadow_mode: false, quota_mode: false, algorithm: sliding_window, unit_multiplier: 5, name: five\n",
            "d.c: unit=HOUR requests_per_unit=7, shadow_mode: false, quota_mode: false\n",
            "ok: 1 file(s), 1 domain(s), 3 rule(s)\n",
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_problem_is_printed_with_file_line_and_path() {
    let dir = temp_dir("check-bad");
    let typo = write(
        &dir,
        "typo.yaml",
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimied: true\n      unit: second\n      requests_per_unit: 5\n  - key: b\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 5\n",
    );
    let syntax = write(
        &dir,
        "syntax.yaml",
        "domain: e\ndescriptors:\n  - key: [a\n",
    );
    let good = write(&dir, "good.yaml", &GOOD.replace("domain: d", "domain: f"));
    let (code, out) = check(&[&typo, &syntax, &good], &[]);
    assert_eq!(code, 1, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!("{typo}:5: config error, unknown key 'unlimied' (at descriptors[0].rate_limit)")
    );
    assert_eq!(
        lines[1],
        format!("{typo}:9: invalid rate limit unit 'fortnight' (at descriptors[1].rate_limit)")
    );
    assert!(
        lines[2].starts_with(&format!("{syntax}:"))
            && lines[2].contains("error loading config file"),
        "{out}"
    );
    assert_eq!(lines[3], "3 problem(s) in 2 of 3 file(s)");
    assert_eq!(lines.len(), 4, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn duplicate_domains_across_files_unless_merging() {
    let dir = temp_dir("check-dup");
    let a = write(&dir, "a.yaml", GOOD);
    let b = write(
        &dir,
        "b.yaml",
        "# same domain\ndomain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    );
    let (code, out) = check(&[&a, &b], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "{b}:2: duplicate domain 'd' in config file (at domain)"
        )),
        "{out}"
    );
    let (code, out) = check(&["--merge-domain-config", &a, &b], &[]);
    assert_eq!(code, 0, "{out}");
    let (code, _) = check(&[&a, &b], &[("MERGE_DOMAIN_CONFIG", "true")]);
    assert_eq!(code, 0);
    // Merged, the same key twice is still a problem.
    let c = write(&dir, "c.yaml", GOOD);
    let (code, out) = check(&["--merge-domain-config", &a, &c], &[]);
    assert_eq!(code, 1);
    assert!(
        out.contains(&format!(
            "{c}:3: duplicate descriptor composite key 'd.a' (at descriptors[0])"
        )),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dot_files_in_directories_follow_the_flag() {
    let dir = temp_dir("check-dots");
    let cfg = dir.join("config");
    write(&cfg, "a.yaml", GOOD);
    write(&cfg, ".draft.yaml", "domain: [");
    let (code, out) = check(&[cfg.to_str().unwrap()], &[]);
    assert_eq!(code, 1, "{out}");
    let (code, out) = check(&["--ignore-dotfiles", cfg.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn usage_errors_and_missing_paths() {
    let (code, out) = check(&[], &[]);
    assert_eq!(code, 2);
    assert!(out.contains("usage: ratelimit check-config"), "{out}");
    let (code, _) = check(&["--frobnicate", "x"], &[]);
    assert_eq!(code, 2);
    let (code, out) = check(&["--help"], &[]);
    assert_eq!(code, 0);
    assert!(out.contains("Exit status"), "{out}");
    let (code, out) = check(&["/nonexistent/rules"], &[]);
    assert_eq!(code, 1);
    assert!(out.contains("/nonexistent/rules: cannot read"), "{out}");
}

/// Runs check-config, killing it (and failing) if it has not finished within 20 s.
fn check_within_deadline(args: &[&str]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratelimit"))
        .env_clear()
        .arg("check-config")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("check-config {args:?} still running after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap(), text)
}

#[test]
fn a_deeply_nested_file_fails_fast_with_the_reason() {
    let dir = temp_dir("check-deep");
    let deep = write(
        &dir,
        "deep.yaml",
        &format!(
            "domain: d\ndescriptors: {}{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        ),
    );
    let (code, out) = check_within_deadline(&[&deep]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "{deep}:2: error loading config file: collections nested more than 64 levels deep"
        )),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn entries_that_cannot_be_read_as_files_are_problems() {
    let dir = temp_dir("check-unreadable");
    /// A name, how to make the entry, what the error says.
    type Case<'a> = (&'a str, &'a dyn Fn(&Path), &'a str);
    let cases: [Case; 3] = [
        (
            "loop.yaml",
            &|p| std::os::unix::fs::symlink(p, p).unwrap(),
            "cannot read: Too many levels of symbolic links",
        ),
        (
            "dangling.yaml",
            &|p| std::os::unix::fs::symlink(p.with_file_name("missing"), p).unwrap(),
            "cannot read: dangling symlink",
        ),
        (
            "fifo.yaml",
            &mkfifo,
            "cannot read: not a regular file (a FIFO)",
        ),
    ];
    for (name, make, expected) in cases {
        let cfg = dir.join(name.replace(".yaml", ""));
        std::fs::create_dir_all(&cfg).unwrap();
        write(&cfg, "good.yaml", GOOD);
        let bad = cfg.join(name);
        make(&bad);
        let (code, out) = check_within_deadline(&[cfg.to_str().unwrap()]);
        assert_eq!(code, 1, "{name}: {out}");
        assert!(
            out.contains(&format!("{}: {expected}", bad.display())),
            "{name}: {out}"
        );
        assert!(
            out.contains("1 problem(s) in 1 of 2 file(s)"),
            "{name}: {out}"
        );
        // Named on the command line too.
        let (code, out) = check_within_deadline(&[bad.to_str().unwrap()]);
        assert_eq!(code, 1, "{name}: {out}");
        assert!(out.contains(expected), "{name}: {out}");
    }
    // A directory with a rule file's name is not a rule file.
    let cfg = dir.join("subdir");
    std::fs::create_dir_all(cfg.join("nested.yaml")).unwrap();
    write(&cfg, "good.yaml", GOOD);
    let (code, out) = check(&[cfg.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
