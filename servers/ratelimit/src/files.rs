//! Reading rule files from the runtime directory.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use ratelimit_core::Limits;

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
/// regular file no larger than the loader accepts is opened (opening a FIFO would wait for
/// a writer).
pub fn read_rule_file(path: &Path) -> Result<Option<String>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match std::fs::symlink_metadata(path) {
                Ok(_) => Err("dangling symlink (its target does not exist)".to_owned()),
                Err(_) => Ok(None),
            };
        }
        Err(e) => return Err(e.to_string()),
    };
    if !meta.is_file() {
        return Err(format!("not a regular file ({})", kind(&meta.file_type())));
    }
    let max = Limits::DEFAULT.max_bytes as u64;
    if meta.len() > max {
        return Err(format!(
            "the file is {} bytes, more than the {max} allowed",
            meta.len()
        ));
    }
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // A file grown since is cut one byte past the bound, which the loader then refuses.
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "not valid UTF-8".to_owned())
}

fn kind(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "an unknown kind"
    }
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
