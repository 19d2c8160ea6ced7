//! Reading a file an operator names (a rule file, a mapper file) without trusting what the
//! path holds: only a regular file of bounded size is read, so a FIFO cannot stall the
//! start and `/dev/zero` cannot take the memory.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// Reads `path`, following symlinks, as UTF-8 of at most `max` bytes; `None` when nothing
/// is there. Anything but a regular file is refused before it is opened (opening a FIFO
/// would wait for a writer).
pub fn read(path: &Path, max: u64) -> Result<Option<String>, String> {
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
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max {
        return Err(format!("the file grew past the {max} bytes allowed"));
    }
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
    fn devices_and_files_past_the_bound_are_refused() {
        assert_eq!(
            read(Path::new("/dev/zero"), 10),
            Err("not a regular file (a device)".to_owned())
        );
        let dir = std::env::temp_dir().join(format!("rl-bounded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, "0123456789").unwrap();
        assert_eq!(read(&file, 10), Ok(Some("0123456789".to_owned())));
        assert_eq!(
            read(&file, 9),
            Err("the file is 10 bytes, more than the 9 allowed".to_owned())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
