//! Reading rule files from the runtime directory.

use std::path::Path;

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
        if settings.runtime_ignore_dotfiles && name.starts_with('.') {
            continue;
        }
        if !(name.ends_with(".yaml") || name.ends_with(".yml")) {
            continue;
        }
        // Follows symlinks, as ConfigMap mounts are symlinks to files.
        if !entry.path().is_file() {
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
            Ok(read_text(&path)?.map(|text| (format!("{prefix}{name}"), text)))
        })
        .filter_map(Result::transpose)
        .collect()
}

fn runtime_key_prefix(settings: &Settings) -> String {
    let mut p = settings.runtime_appdirectory.replace('/', ".");
    if !p.is_empty() {
        p.push('.');
    }
    p
}

fn read_text(path: &Path) -> Result<Option<String>, LoadError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LoadError(format!("cannot read {}: {e}", path.display()))),
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| LoadError(format!("{}: not valid UTF-8", path.display())))
}
