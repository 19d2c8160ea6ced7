//! Rules from files, reloaded when they change: the same YAML files the `ratelimit`
//! servers load, so a service and the fleet can share one rule directory.
//!
//! A watcher polls the files' modification times and sizes; when one changed, every file
//! is read and the limiter's rules are swapped in one step. A file that cannot be read
//! or rules that do not compile leave the rules in force, and the error goes to the hook.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ratelimit_core::{Clock, CounterStore, Limiter};

/// Why rule files could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// The rules do not compile.
    #[error("{0}")]
    Config(#[from] ratelimit_core::ConfigError),
}

/// Reads `paths` as `(name, text)` pairs for [`ratelimit_core::LimiterBuilder::yaml`].
pub fn read_files(paths: &[PathBuf]) -> Result<Vec<(String, String)>, LoadError> {
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).map_err(|source| LoadError::Read {
                path: p.clone(),
                source,
            })?;
            Ok((p.display().to_string(), text))
        })
        .collect()
}

/// Loads `paths` into `limiter`, replacing its rules; on error they stay.
pub fn load<S: CounterStore, C: Clock>(
    limiter: &Limiter<S, C>,
    paths: &[PathBuf],
) -> Result<(), LoadError> {
    let files = read_files(paths)?;
    limiter.reload_yaml(files.iter().map(|(n, t)| (n.as_str(), t.as_str())), false)?;
    Ok(())
}

/// What a file looked like when last read.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(p: &Path) -> Stamp {
    let m = std::fs::metadata(p).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Watches `paths` every `every` and reloads `limiter` when one of them changed, on the
/// current tokio runtime; stops when the task is aborted or the limiter is only held
/// here. `on_error` hears of files that could not be loaded.
pub fn watch<S, C>(
    limiter: Arc<Limiter<S, C>>,
    paths: Vec<PathBuf>,
    every: Duration,
    on_error: impl Fn(&LoadError) + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    S: CounterStore + 'static,
    C: Clock + 'static,
{
    tokio::spawn(async move {
        let mut seen: Vec<Stamp> = paths.iter().map(|p| stamp(p)).collect();
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if Arc::strong_count(&limiter) == 1 {
                return;
            }
            let now: Vec<Stamp> = paths.iter().map(|p| stamp(p)).collect();
            if now == seen {
                continue;
            }
            seen = now;
            if let Err(e) = load(&limiter, &paths) {
                on_error(&e);
            }
        }
    })
}
