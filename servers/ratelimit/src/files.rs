//! Reading rule files from the runtime directory.

use std::path::Path;

use ratelimit_core::Limits;

use crate::bounded_file;
use crate::settings::Settings;

/// Why the rule files could not be read.
#[derive(Debug)]
pub struct LoadError(pub String);

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

/// Reads every `*.yaml` / `*.yml` file of the config directory, sorted by name. Each is
/// named as upstream's runtime key: its path below `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY`
/// with `/` turned into `.` (e.g. `config.basic.yaml`), so error messages read the same.
///
/// The directory is resolved once, so that when the root (or the directory) is a symlink
/// swapped during the read, every file comes from the same side of the swap. A file that
/// disappears between listing and reading is skipped: its removal triggers another reload.
/// An entry with a rule file's name that cannot be read as a file (a dangling symlink, a
/// symlink loop, a FIFO) fails the load, naming it; directories are not rule files.
pub fn read_rule_files(settings: &Settings) -> Result<Vec<(String, String)>, LoadError> {
    let configured = settings.config_dir();
    let dir = std::fs::canonicalize(&configured).unwrap_or_else(|_| configured.clone());
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        LoadError(format!(
            "cannot read rule directory {}: {e}",
            configured.display()
        ))
    })?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| LoadError(format!("cannot list {}: {e}", dir.display())))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_rule_file_name(&name, settings.runtime_ignore_dotfiles) || entry.path().is_dir() {
            continue;
        }
        names.push(name);
    }
    names.sort();
    let prefix = runtime_key_prefix(settings);
    names
        .into_iter()
        .map(|name| {
            let path = dir.join(&name);
            read_rule_file(&path)
                .map(|text| text.map(|text| (format!("{prefix}{name}"), text)))
                .map_err(|e| LoadError(format!("cannot read {}: {e}", path.display())))
        })
        .filter_map(Result::transpose)
        .collect()
}

/// Whether a directory entry named `name` holds rules (when it is a file).
pub fn is_rule_file_name(name: &str, ignore_dotfiles: bool) -> bool {
    !(ignore_dotfiles && name.starts_with('.'))
        && (name.ends_with(".yaml") || name.ends_with(".yml"))
}

fn runtime_key_prefix(settings: &Settings) -> String {
    let mut p = settings.runtime_appdirectory.replace('/', ".");
    if !p.is_empty() {
        p.push('.');
    }
    p
}

/// Reads one rule file, following symlinks; `None` when nothing is there any more. Only a
/// regular file no larger than the loader accepts is read.
pub fn read_rule_file(path: &Path) -> Result<Option<String>, String> {
    bounded_file::read(path, Limits::DEFAULT.max_bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_bound_are_read() {
        let dir = std::env::temp_dir().join(format!("rl-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ok = dir.join("ok.yaml");
        std::fs::write(&ok, "domain: d\n").unwrap();
        assert_eq!(read_rule_file(&ok), Ok(Some("domain: d\n".to_owned())));
        assert_eq!(read_rule_file(&dir.join("gone.yaml")), Ok(None));
        let big = dir.join("big.yaml");
        // Sparse: no 16 MiB written.
        std::fs::File::create(&big)
            .unwrap()
            .set_len(Limits::DEFAULT.max_bytes as u64 + 1)
            .unwrap();
        assert_eq!(
            read_rule_file(&big),
            Err("the file is 16777217 bytes, more than the 16777216 allowed".to_owned())
        );
        assert_eq!(
            read_rule_file(&dir),
            Err("not a regular file (a directory)".to_owned())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
