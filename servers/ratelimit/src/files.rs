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
pub fn read_rule_files(settings: &Settings) -> Result<Vec<(String, String)>, LoadError> {
    let dir = settings.config_dir();
    let entries = std::fs::read_dir(&dir)
        .map_err(|e| LoadError(format!("cannot read rule directory {}: {e}", dir.display())))?;
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
            let text = read_text(&path)?;
            Ok((format!("{prefix}{name}"), text))
        })
        .collect()
}

fn runtime_key_prefix(settings: &Settings) -> String {
    let mut p = settings.runtime_appdirectory.replace('/', ".");
    if !p.is_empty() {
        p.push('.');
    }
    p
}

fn read_text(path: &Path) -> Result<String, LoadError> {
    let bytes = std::fs::read(path)
        .map_err(|e| LoadError(format!("cannot read {}: {e}", path.display())))?;
    String::from_utf8(bytes).map_err(|_| LoadError(format!("{}: not valid UTF-8", path.display())))
}
