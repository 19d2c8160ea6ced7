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
            let text = read_bounded(p).map_err(|source| LoadError::Read {
                path: p.clone(),
                source,
            })?;
            Ok((p.display().to_string(), text))
        })
        .collect()
}

/// Reads a rule file when it is a regular file the loader could accept: a FIFO would block
/// the watcher's runtime thread, and a device or a huge file would fill the memory.
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind, Read};
    let max = ratelimit_core::Limits::DEFAULT.max_bytes as u64;
    if !std::fs::metadata(path)?.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("larger than the {max} bytes a rule file may have"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| Error::new(ErrorKind::InvalidData, "not valid UTF-8"))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `path` on its own thread, so that a read that blocks fails the test instead of
    /// hanging it.
    fn read_within_seconds(path: PathBuf) -> Result<Vec<(String, String)>, LoadError> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read_files(&[path]));
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the read should not block")
    }

    #[test]
    fn only_regular_files_are_read() {
        let dir = test_support::net::temp_dir("rl-tower", "reload");
        let fifo = test_support::net::fifo(&dir, "rules.yaml");
        for path in [fifo, PathBuf::from("/dev/zero")] {
            let err = read_within_seconds(path.clone()).unwrap_err();
            assert!(err.to_string().ends_with("not a regular file"), "{err}");
        }
        let ok = dir.join("ok.yaml");
        std::fs::write(&ok, "domain: d\n").unwrap();
        assert_eq!(read_within_seconds(ok).unwrap()[0].1, "domain: d\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
