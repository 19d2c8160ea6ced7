//! Rule files, reloaded when they change.
//!
//! What is watched (inotify through `notify`):
//! - always the rule directory `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`,
//!   resolved through symlinks: a write, create, chmod, remove or rename of anything in it
//!   reloads every file. That covers plain edits and Kubernetes ConfigMap updates, which
//!   swap the `..data` symlink inside the mounted directory;
//! - with `RUNTIME_WATCH_ROOT=true` also the directory holding `RUNTIME_ROOT`, so that
//!   replacing the root symlink (the runtime layout upstream expects) reloads.
//!
//! Events are debounced (a burst of them gives one reload), and after every reload the
//! rule directory is resolved again: when a swap pointed it elsewhere, the watch moves.
//! A low-frequency poll (`RUNTIME_POLL_INTERVAL`) compares the directory with what was
//! last loaded and reloads on a difference, for changes no event reported (a watch that
//! could not be set up, a directory created after start, network file systems).

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use ratelimit_core::RuleSet;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::App;
use crate::files::{self, LoadError};
use crate::log::{self, Level};

/// Quiet time after the last event before reloading.
const QUIET: Duration = Duration::from_millis(150);
/// Upper bound on how long a steady stream of events can postpone a reload.
const MAX_DELAY: Duration = Duration::from_secs(1);

/// Reads and installs every rule file once. On error the previous rules stay.
pub fn load(app: &App) -> Result<(), String> {
    let source = app.settings.config_dir().display().to_string();
    let outcome = match files::read_rule_files(&app.settings) {
        Ok(files) => RuleSet::from_yaml(
            files.iter().map(|(n, t)| (n.as_str(), t.as_str())),
            app.settings.merge_domain_config,
            app.limiter.stats(),
        )
        .map_err(|e| e.to_string()),
        Err(LoadError(e)) => Err(e),
    };
    let err = outcome.as_ref().err().cloned();
    super::install(app, &source, outcome);
    err.map_or(Ok(()), Err)
}

/// What the poll compares: where the directory resolves to and each entry's identity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Fingerprint {
    dir: Option<(PathBuf, u64)>,
    entries: BTreeSet<(String, u64, u64, i64, i64, u32)>,
}

fn fingerprint(configured: &Path) -> Fingerprint {
    let Some(dir) = resolve(configured) else {
        return Fingerprint::default();
    };
    let mut entries = BTreeSet::new();
    if let Ok(list) = std::fs::read_dir(&dir.0) {
        for e in list.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            // The link itself (a swapped `..data`) and what it points to (an edited file).
            let link_ino = e.path().symlink_metadata().map_or(0, |m| m.ino());
            let m = std::fs::metadata(e.path()).ok();
            entries.insert((
                name,
                link_ino,
                m.as_ref().map_or(0, |m| m.ino()),
                m.as_ref()
                    .map_or(0, |m| m.mtime() * 1_000_000_000 + m.mtime_nsec()),
                m.as_ref().map_or(0, |m| m.size() as i64),
                m.as_ref().map_or(0, |m| m.mode()),
            ));
        }
    }
    Fingerprint {
        dir: Some(dir),
        entries,
    }
}

/// The rule directory's real path and inode (a recreated directory has a new inode).
fn resolve(configured: &Path) -> Option<(PathBuf, u64)> {
    let real = std::fs::canonicalize(configured).ok()?;
    let ino = std::fs::metadata(&real).ok()?.ino();
    Some((real, ino))
}

/// The watches, set up before the first load so that no change after it can go unseen.
pub struct Watch {
    app: Arc<App>,
    watcher: Option<RecommendedWatcher>,
    events: mpsc::Receiver<()>,
    watched: Option<(PathBuf, u64)>,
    last: Fingerprint,
}

impl Watch {
    /// Sets up the watches (failures are logged: the poll still works).
    pub fn new(app: Arc<App>) -> Watch {
        let configured = app.settings.config_dir();
        let last = fingerprint(&configured);
        // One slot: while a notice is waiting, later events need no notice of their own,
        // since the reload it leads to reads the files after them. Memory stays bounded
        // whatever the event rate.
        let (tx, events) = mpsc::channel::<()>(1);
        let root = if app.settings.runtime_watch_root {
            root_parent(&app.settings.runtime_root)
        } else {
            None
        };
        let filter_root = root.clone();
        let watcher = notify::recommended_watcher(move |res: notify::Result<Event>| match res {
            Ok(ev) if !relevant(&ev, filter_root.as_ref()) => {}
            Ok(_) => {
                let _ = tx.try_send(());
            }
            Err(e) => {
                // A lost event (queue overflow) is treated as a change.
                log::log(Level::Warn, &format!("rule file watcher: {e}"));
                let _ = tx.try_send(());
            }
        });
        let mut watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                log::log(
                    Level::Error,
                    &format!(
                        "cannot watch rule files ({e}); changes are picked up by polling only"
                    ),
                );
                None
            }
        };
        match (watcher.as_mut(), &root) {
            (Some(w), Some((parent, _))) => {
                if let Err(e) = w.watch(parent, RecursiveMode::NonRecursive) {
                    log::log(
                        Level::Error,
                        &format!(
                            "cannot watch {} for swaps of RUNTIME_ROOT: {e}",
                            parent.display()
                        ),
                    );
                }
            }
            (Some(_), None) if app.settings.runtime_watch_root => log::log(
                Level::Warn,
                &format!(
                    "cannot watch the directory holding RUNTIME_ROOT {}; only its contents are watched",
                    app.settings.runtime_root.display()
                ),
            ),
            _ => {}
        }
        let mut watched = None;
        rearm(watcher.as_mut(), &mut watched, &configured);
        Watch {
            app,
            watcher,
            events,
            watched,
            last,
        }
    }

    /// Runs the reload loop as a task for as long as the runtime lives.
    pub fn spawn(self) {
        tokio::spawn(self.run());
    }

    async fn run(mut self) {
        let configured = self.app.settings.config_dir();
        let poll = self.app.settings.runtime_poll_interval;
        let mut ticker = tokio::time::interval(if poll.is_zero() {
            Duration::from_secs(3600)
        } else {
            poll
        });
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;

        let mut events_open = true;
        let mut first_event: Option<Instant> = None;
        let mut last_event = Instant::now();
        loop {
            let due = first_event.map(|first| (last_event + QUIET).min(first + MAX_DELAY));
            tokio::select! {
                ev = self.events.recv(), if events_open => {
                    if ev.is_none() {
                        // No watcher could be made; polling is all there is.
                        events_open = false;
                        continue;
                    }
                    last_event = Instant::now();
                    first_event.get_or_insert(last_event);
                }
                _ = sleep_until_opt(due) => {
                    first_event = None;
                    self.last = reload(&self.app, &configured).await;
                    rearm(self.watcher.as_mut(), &mut self.watched, &configured);
                }
                _ = ticker.tick(), if !poll.is_zero() => {
                    rearm(self.watcher.as_mut(), &mut self.watched, &configured);
                    if fingerprint(&configured) != self.last {
                        log::log(Level::Info, "rule directory changed without a file event; reloading");
                        self.last = reload(&self.app, &configured).await;
                    }
                }
            }
        }
    }
}

/// Whether an event can mean the rules changed. Our own reads open files, which inotify
/// reports too; those must not cause a reload, or every reload would cause the next.
fn relevant(event: &Event, root: Option<&(PathBuf, std::ffi::OsString)>) -> bool {
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
        EventKind::Access(_) => return false,
        _ => {}
    }
    // In the root's parent only the root itself matters, not its siblings (e.g. the
    // directory a new root symlink will point to, being filled).
    if let Some((parent, name)) = root
        && !event.paths.is_empty()
        && event
            .paths
            .iter()
            .all(|p| p.parent() == Some(parent.as_path()) && p.file_name() != Some(name))
    {
        return false;
    }
    true
}

/// The directory holding `RUNTIME_ROOT` (resolved) and the root's name in it.
fn root_parent(root: &Path) -> Option<(PathBuf, std::ffi::OsString)> {
    let name = root.file_name()?;
    let parent = match root.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let parent = std::fs::canonicalize(parent).ok()?;
    Some((parent, name.to_owned()))
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Reloads off the async threads (reading and compiling a large set takes a while) and
/// returns the fingerprint taken just before reading, so a change made during the read is
/// seen by the next poll.
async fn reload(app: &Arc<App>, configured: &Path) -> Fingerprint {
    let app = app.clone();
    let configured = configured.to_owned();
    tokio::task::spawn_blocking(move || {
        let fp = fingerprint(&configured);
        let _ = load(&app);
        fp
    })
    .await
    .unwrap_or_default()
}

/// Points the directory watch at wherever the rule directory resolves to now.
fn rearm(
    watcher: Option<&mut RecommendedWatcher>,
    watched: &mut Option<(PathBuf, u64)>,
    configured: &Path,
) {
    let Some(w) = watcher else { return };
    let now = resolve(configured);
    if now == *watched {
        return;
    }
    if let Some((old, _)) = watched.take() {
        let _ = w.unwatch(&old);
    }
    if let Some((path, ino)) = now {
        match w.watch(&path, RecursiveMode::NonRecursive) {
            Ok(()) => *watched = Some((path, ino)),
            Err(e) => log::log(
                Level::Warn,
                &format!("cannot watch rule directory {}: {e}", path.display()),
            ),
        }
    }
}
