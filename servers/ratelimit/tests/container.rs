//! The container image (`Containerfile` at the repository root), built and run.
//!
//! Base images cannot be pulled here, so the test builds the Containerfile's runtime stage
//! as it is written, with its two bases replaced by local directories: the build stage's
//! `/out` by the binaries this test run built, and distroless's `cc` image by the shared
//! libraries those binaries load (glibc and libgcc, what that image provides). Every other
//! instruction (user, environment, volume, command, stop signal) is the Containerfile's
//! own. The image then runs as it says: its command, its user, rules in its volume (laid
//! out as Kubernetes mounts a ConfigMap, and updated as Kubernetes updates one).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use test_support::process::{Capture, Proc};

use crate::buildah::{Buildah, comm, descendants, describe, uids};
use crate::common::{listening, post_json, request};
use crate::rules_util::{swap_symlink, within};

const RULES: &str = "domain: rl\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: day, requests_per_unit: 2}\n";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The runtime stage of `containerfile`, rebased on `base/` and `build/` in the context.
fn runtime_stage(containerfile: &str) -> String {
    let stages: Vec<&str> = containerfile
        .split("\nFROM ")
        .skip(1)
        .map(|s| s.trim_end())
        .collect();
    assert_eq!(stages.len(), 2, "a build stage and a runtime stage");
    assert!(stages[0].starts_with("docker.io/library/rust:") && stages[0].contains(" AS build"));
    let (from, body) = stages[1].split_once('\n').unwrap();
    assert!(
        from.starts_with("gcr.io/distroless/cc-debian12:nonroot"),
        "runtime base is {from}"
    );
    let mut out = String::from("FROM scratch\nCOPY base/ /\n");
    for line in body.lines() {
        match line.strip_prefix("COPY --from=build ") {
            Some(paths) => {
                let rebased: Vec<String> = paths
                    .split_whitespace()
                    .map(|p| match p.strip_prefix("/out/") {
                        Some(rest) => format!("build/out/{rest}"),
                        None => p.to_owned(),
                    })
                    .collect();
                out.push_str(&format!("COPY {}\n", rebased.join(" ")));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// `bin` copied to `dest` without its debug sections (the vfs store copies every layer).
fn copy_binary(bin: &str, dest: &Path) {
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let stripped = std::process::Command::new("objcopy")
        .arg("--strip-debug")
        .arg(bin)
        .arg(dest)
        .status()
        .is_ok_and(|s| s.success());
    if !stripped {
        std::fs::copy(bin, dest).unwrap();
    }
}

/// The shared libraries `bins` load (from `ldd`), copied under `base`.
fn copy_libraries(bins: &[&str], base: &Path) {
    let out = std::process::Command::new("ldd")
        .args(bins)
        .output()
        .unwrap();
    assert!(out.status.success(), "ldd: {}", describe(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let libs = text
        .split_whitespace()
        .filter(|w| w.starts_with('/') && !w.ends_with(':'));
    for lib in libs {
        let dest = base.join(lib.trim_start_matches('/'));
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(lib, dest).unwrap();
    }
}

/// Paths in the image the server's user could write to (owned by it, or writable by all).
fn writable_by(uid: u32, root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                continue;
            }
            if meta.uid() == uid || meta.mode() & 0o002 != 0 {
                found.push(path.clone());
            }
            if meta.is_dir() {
                todo.push(path);
            }
        }
    }
    found
}

fn ports_env() -> Vec<(&'static str, &'static str)> {
    [
        "HOST",
        "PORT",
        "GRPC_HOST",
        "GRPC_PORT",
        "DEBUG_HOST",
        "DEBUG_PORT",
    ]
    .into_iter()
    .map(|k| {
        (
            k,
            if k.ends_with("PORT") {
                "0"
            } else {
                "127.0.0.1"
            },
        )
    })
    .collect()
}

#[test]
fn the_image_serves_decides_checks_rules_and_stops_on_sigterm() {
    let Some(buildah) = Buildah::or_skip() else {
        return;
    };
    let ctx = buildah.scratch_dir("context");
    let server = env!("CARGO_BIN_EXE_ratelimit");
    let client = env!("CARGO_BIN_EXE_ratelimit-client");
    copy_binary(server, &ctx.join("build/out/ratelimit"));
    copy_binary(client, &ctx.join("build/out/ratelimit-client"));
    copy_libraries(&[server, client], &ctx.join("base"));
    let containerfile = std::fs::read_to_string(repo_root().join("Containerfile")).unwrap();
    std::fs::write(ctx.join("Containerfile"), runtime_stage(&containerfile)).unwrap();
    buildah.build(&ctx, &ctx.join("Containerfile"), "ratelimit-test");

    // What the image says about itself, as a runtime reads it.
    let config = buildah.image_config("ratelimit-test");
    assert_eq!(config["User"], "65532:65532");
    assert_eq!(config["Cmd"], serde_json::json!(["ratelimit"]));
    assert_eq!(config["StopSignal"], "SIGTERM");
    let rules_dir = "/srv/runtime_data/current/config";
    assert!(config["Volumes"][rules_dir].is_object(), "{config}");
    let cmd: Vec<&str> = config["Cmd"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();

    // The rules as Kubernetes mounts a ConfigMap: `rl.yaml -> ..data/rl.yaml`, `..data`
    // a symlink to the current version's directory, swapped on an update.
    let rules = ctx.join("rules");
    for (version, limit) in [("..v1", 2), ("..v2", 5)] {
        std::fs::create_dir_all(rules.join(version)).unwrap();
        let text = RULES.replace(
            "requests_per_unit: 2",
            &format!("requests_per_unit: {limit}"),
        );
        std::fs::write(rules.join(version).join("rl.yaml"), text).unwrap();
    }
    std::os::unix::fs::symlink("..v1", rules.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/rl.yaml", rules.join("rl.yaml")).unwrap();
    let volume = vec![format!("{}:{rules_dir}:ro", rules.display())];
    let container = buildah.ok(&["from", "ratelimit-test"]);
    let mut env = ports_env();
    env.extend([("BACKEND_TYPE", "memory"), ("USE_STATSD", "false")]);
    env.push(("DISABLE_STATS", "true"));
    let mut run = Proc::spawn(
        buildah.run(&container, &env, &volume, &cmd),
        Capture::Stderr,
    );
    let (http, _debug, grpc) = run
        .find_line(Duration::from_secs(30), listening)
        .expect("the server in the container did not report its ports");

    // The server runs as the image's user, and nothing in the image is writable by it:
    // it needs no writable root file system.
    let pid = descendants(run.pid())
        .into_iter()
        .find(|p| comm(*p) == "ratelimit")
        .expect("the server process under buildah");
    assert!(uids(pid).iter().all(|u| *u == 65532), "{:?}", uids(pid));
    let rootfs = PathBuf::from(buildah.ok(&["mount", &container]));
    assert_eq!(writable_by(65532, &rootfs), Vec::<PathBuf>::new());

    let health = request(http, "GET", "/healthcheck", b"");
    assert_eq!((health.status, health.text().as_str()), (200, "OK"));
    let body = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"api_key","value":"img"}]}]}"#;
    let first = post_json(http, body);
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.json()["statuses"][0]["limitRemaining"], 1);

    // One decision over gRPC with the image's client: the second hit is still OK, the
    // third is over the limit (exit 3).
    let ask = || {
        let argv = [
            "ratelimit-client",
            "-dial_string",
            &grpc,
            "-domain",
            "rl",
            "-descriptors",
            "api_key=img",
        ];
        buildah.run(&container, &[], &[], &argv).output().unwrap()
    };
    let ok = ask();
    assert_eq!(ok.status.code(), Some(0), "{}", describe(&ok));
    assert!(String::from_utf8_lossy(&ok.stdout).contains("overall: OK"));
    let over = ask();
    assert_eq!(over.status.code(), Some(3), "{}", describe(&over));
    assert!(String::from_utf8_lossy(&over.stdout).contains("overall: OVER_LIMIT"));

    // check-config reads the same volume.
    let check = buildah
        .run(
            &container,
            &[],
            &volume,
            &["ratelimit", "check-config", rules_dir],
        )
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", describe(&check));
    assert!(String::from_utf8_lossy(&check.stdout).starts_with("ok: 1 file(s)"));

    // A ConfigMap update, seen through the volume: the new limit applies.
    swap_symlink(&rules.join("..data"), Path::new("..v2"));
    let fresh = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"api_key","value":"new"}]}]}"#;
    let limit =
        || post_json(http, fresh).json()["statuses"][0]["currentLimit"]["requestsPerUnit"].clone();
    let reloaded = within(Duration::from_secs(10), || limit() == 5);
    assert!(
        reloaded.is_some(),
        "the ..data swap did not reload the rules"
    );

    // SIGTERM to the server (buildah does not forward it): a clean exit, 0.
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = run
        .wait_timeout(Duration::from_secs(20))
        .expect("the server did not stop on SIGTERM");
    assert!(status.success(), "{status:?}");
}
