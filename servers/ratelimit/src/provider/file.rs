//! Rule files, reloaded when they change.
//!
//! What is watched (inotify through `notify`):
//! - always the rule directory `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`,
//!   resolved through symlinks: a write, create, chmod, remove or rename of anything in it
//!   reloads every file. That covers plain edits and Kubernetes ConfigMap updates, which
//!   swap the `..data` symlink inside the mounted directory;
//! - each directory on the way from the root to it, for the one entry that leads on, so
//!   that swapping e.g. a `config` symlink inside the root reloads;
//! - with `RUNTIME_WATCH_ROOT=true` also the directory holding `RUNTIME_ROOT`, so that
//!   replacing the root symlink (the runtime layout upstream expects) reloads.
//!
//! Events are debounced (a burst of them gives one reload), and after every reload the
//! path is resolved again: when a swap pointed it elsewhere, the watches move.
//! A low-frequency poll (`RUNTIME_POLL_INTERVAL`) compares the directory with what was
//! last loaded and reloads on a difference, for changes no event reported (a watch that
//! could not be set up, a directory created after start, network file systems).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use ratelimit_core::RuleSet;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::app::App;
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

/// A directory on the way to the rule directory, watched for changes of one entry: the
/// next step of the path (a symlink that may be swapped, a directory that may be replaced).
type Link = (PathBuf, OsString);

/// The watches, set up before the first load so that no change after it can go unseen.
pub struct Watch {
    app: Arc<App>,
    watcher: Option<RecommendedWatcher>,
    events: mpsc::Receiver<()>,
    /// The links in force, shared with the event filter.
    links: Arc<Mutex<Vec<Link>>>,
    link_dirs: Vec<PathBuf>,
    watched: Option<(PathBuf, u64)>,
    last: Fingerprint,
}

impl Watch {
    /// Sets up the watches (failures are logged: the poll still works).
    pub fn new(app: Arc<App>) -> Watch {
        let last = fingerprint(&app.settings.config_dir());
        // One slot: while a notice is waiting, later events need no notice of their own,
        // since the reload it leads to reads the files after them. Memory stays bounded
        // whatever the event rate.
        let (tx, events) = mpsc::channel::<()>(1);
        let links: Arc<Mutex<Vec<Link>>> = Arc::default();
        let filter_links = links.clone();
        let watcher = notify::recommended_watcher(move |res: notify::Result<Event>| match res {
            Ok(ev) => {
                let links = filter_links.lock().unwrap_or_else(|e| e.into_inner());
                if relevant(&ev, &links) {
                    let _ = tx.try_send(());
                }
            }
            Err(e) => {
                // A lost event (queue overflow) is treated as a change.
                log::log(Level::Warn, &format!("rule file watcher: {e}"));
                let _ = tx.try_send(());
            }
        });
        let watcher = match watcher {
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
        let mut w = Watch {
            app,
            watcher,
            events,
            links,
            link_dirs: Vec::new(),
            watched: None,
            last,
        };
        w.rearm();
        w
    }

    /// Points the watches at wherever the path to the rule directory resolves to now.
    fn rearm(&mut self) {
        let Some(w) = self.watcher.as_mut() else {
            return;
        };
        let links = link_chain(&self.app.settings);
        let mut dirs: Vec<PathBuf> = links.iter().map(|(d, _)| d.clone()).collect();
        dirs.dedup();
        if dirs != self.link_dirs {
            for old in &self.link_dirs {
                if !dirs.contains(old) {
                    let _ = w.unwatch(old);
                }
            }
            for new in &dirs {
                if !self.link_dirs.contains(new)
                    && let Err(e) = w.watch(new, RecursiveMode::NonRecursive)
                {
                    log::log(
                        Level::Warn,
                        &format!(
                            "cannot watch {} (on the way to the rule directory): {e}",
                            new.display()
                        ),
                    );
                }
            }
            self.link_dirs = dirs;
        }
        *self.links.lock().unwrap_or_else(|e| e.into_inner()) = links;

        let now = resolve(&self.app.settings.config_dir());
        if now == self.watched {
            return;
        }
        if let Some((old, _)) = self.watched.take() {
            let _ = w.unwatch(&old);
        }
        if let Some((path, ino)) = now {
            match w.watch(&path, RecursiveMode::NonRecursive) {
                Ok(()) => self.watched = Some((path, ino)),
                Err(e) => log::log(
                    Level::Warn,
                    &format!("cannot watch rule directory {}: {e}", path.display()),
                ),
            }
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
                    // Watches first: a change after this is seen by them, one before it
                    // is read by this reload.
                    self.rearm();
                    self.last = reload(&self.app, &configured).await;
                }
                _ = ticker.tick(), if !poll.is_zero() => {
                    self.rearm();
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
/// reports too; those must not cause a reload, or every reload would cause the next. In a
/// directory watched as a link only that one entry matters, not its siblings (e.g. the
/// directory a new root symlink will point to, being filled).
fn relevant(event: &Event, links: &[Link]) -> bool {
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
        EventKind::Access(_) => return false,
        _ => {}
    }
    if event.paths.is_empty() {
        return true;
    }
    event.paths.iter().any(|p| {
        let mut in_link_dir = links
            .iter()
            .filter(|(dir, _)| p.parent() == Some(dir.as_path()))
            .peekable();
        in_link_dir.peek().is_none() || in_link_dir.any(|(_, name)| p.file_name() == Some(name))
    })
}

/// The links from the top of what is watched to the rule directory: with
/// `RUNTIME_WATCH_ROOT` the directory holding `RUNTIME_ROOT` (for swaps of the root), then
/// every directory from the root down to the rule directory's parent.
fn link_chain(settings: &crate::settings::Settings) -> Vec<Link> {
    let root = &settings.runtime_root;
    let mut out = Vec::new();
    if settings.runtime_watch_root
        && let Some(name) = root.file_name()
    {
        let parent = match root.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if let Ok(real) = std::fs::canonicalize(parent) {
            out.push((real, name.to_owned()));
        }
    }
    let mut dir = root.clone();
    let steps = [
        &settings.runtime_subdirectory,
        &settings.runtime_appdirectory,
    ];
    for step in steps
        .iter()
        .flat_map(|s| s.split('/'))
        .filter(|s| !s.is_empty() && *s != ".")
    {
        if let Ok(real) = std::fs::canonicalize(&dir) {
            out.push((real, OsString::from(step)));
        }
        dir.push(step);
    }
    out
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
        // A blocking thread may sit idle for a while: hand the parse's memory back now.
        crate::memory::release_freed_memory();
        fp
    })
    .await
    .unwrap_or_default()
}
