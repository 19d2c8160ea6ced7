//! Building and running images with Debian's `buildah`, rootless of any daemon: vfs storage
//! in a private directory (removed on drop) and chroot isolation, which share the host's
//! network and process table, so a test reaches the container on loopback and signals its
//! process by PID.
//!
//! Without `buildah` (or without root, which chroot isolation needs) a test says it is
//! skipped and passes, unless `RATELIMIT_REQUIRE_BUILDAH=1` (set by `scripts/deps.d/deploy.sh`),
//! where it fails instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A buildah with its own image store.
pub struct Buildah {
    bin: PathBuf,
    store: PathBuf,
}

impl Drop for Buildah {
    fn drop(&mut self) {
        let _ = self.cmd().args(["rm", "--all"]).output();
        let _ = std::fs::remove_dir_all(&self.store);
    }
}

fn found(cmd: &str) -> Option<String> {
    let out = Command::new("sh").args(["-c", cmd]).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !s.is_empty()).then_some(s)
}

impl Buildah {
    /// A buildah with a fresh store, or `None` after saying why the test is skipped.
    pub fn or_skip() -> Option<Buildah> {
        let bin = std::env::var("BUILDAH_BIN")
            .ok()
            .or_else(|| found("command -v buildah"));
        let root = found("id -u").as_deref() == Some("0");
        let required = std::env::var("RATELIMIT_REQUIRE_BUILDAH").is_ok();
        match bin {
            Some(bin) if root => Some(Buildah {
                bin: PathBuf::from(bin),
                store: test_support::net::temp_dir("rl-test", "buildah"),
            }),
            _ => {
                assert!(
                    !required,
                    "RATELIMIT_REQUIRE_BUILDAH is set but buildah is missing or we are not root"
                );
                eprintln!("SKIPPED: needs buildah (apt-get install buildah) and root");
                None
            }
        }
    }

    /// A fresh directory removed with the store (e.g. a build context).
    pub fn scratch_dir(&self, name: &str) -> PathBuf {
        let dir = self.store.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// `buildah` with this store's global options.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--root")
            .arg(self.store.join("root"))
            .arg("--runroot")
            .arg(self.store.join("run"))
            .args(["--storage-driver", "vfs"]);
        c
    }

    /// Runs `buildah args...`; panics with its output unless it succeeds.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().expect("run buildah");
        assert!(out.status.success(), "buildah {args:?}: {}", describe(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// `buildah bud` of `containerfile` in `context`, tagged `tag`.
    pub fn build(&self, context: &Path, containerfile: &Path, tag: &str) {
        let (ctx, file) = (context.to_str().unwrap(), containerfile.to_str().unwrap());
        self.ok(&["bud", "--isolation", "chroot", "-f", file, "-t", tag, ctx]);
    }

    /// The image's OCI configuration (`User`, `Cmd`, `Env`, `Volumes`, ...).
    pub fn image_config(&self, tag: &str) -> serde_json::Value {
        let text = self.ok(&["inspect", "--type", "image", tag]);
        let all: serde_json::Value = serde_json::from_str(&text).unwrap();
        all["OCIv1"]["config"].clone()
    }

    /// `buildah run` in `container` with `env` and `volumes` (`host:container[:ro]`), not
    /// yet started.
    pub fn run(
        &self,
        container: &str,
        env: &[(&str, &str)],
        volumes: &[String],
        argv: &[&str],
    ) -> Command {
        let mut c = self.cmd();
        c.args(["run", "--isolation", "chroot"]);
        for (k, v) in env {
            c.arg("-e").arg(format!("{k}={v}"));
        }
        for v in volumes {
            c.arg("-v").arg(v);
        }
        c.arg(container).arg("--").args(argv);
        c
    }
}

/// Exit status, stdout and stderr, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "{:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The processes below `pid` (children, grandchildren, ...), from `/proc/*/stat`.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces, so read after the last ')'.
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        parent_of.push((p, ppid));
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parent_of
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out.remove(0);
    out
}

/// The process's name (`/proc/PID/comm`).
pub fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The real, effective, saved and file-system user ids (`Uid:` of `/proc/PID/status`).
pub fn uids(pid: u32) -> Vec<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace()
        .skip(1)
        .map(|n| n.parse().unwrap())
        .collect()
}
