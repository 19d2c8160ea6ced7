//! Any text as the server's environment, one `NAME=value` a line (a later line wins):
//! `Settings::from_lookup` gives settings, or an error that names a variable it read and
//! says what it expected, never a panic. Shared by the cargo-fuzz target and the stable
//! corpus replay test (`servers/ratelimit/tests/fuzz_corpus.rs`), which include this file
//! by path.

use std::cell::RefCell;

use ratelimit_server::settings::Settings;

/// Read by `from_lookup` as a file path: hidden, so the fuzzer reads no file (the
/// `prometheus_render` target fuzzes that file's text).
const FILE_PATHS: &[&str] = &["PROMETHEUS_MAPPER_YAML"];

/// Returns whether the environment gave settings.
pub fn run(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let vars: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(name, _)| !FILE_PATHS.contains(name))
        .collect();
    let read = RefCell::new(Vec::new());
    let settings = Settings::from_lookup(|name| {
        read.borrow_mut().push(name.to_owned());
        vars.iter()
            .rev()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    });
    match settings {
        Ok(_) => true,
        Err(e) => {
            assert!(
                read.borrow().contains(&e.name),
                "the error names {:?}, which was never read",
                e.name
            );
            assert!(!e.expected.is_empty(), "{e:?}");
            false
        }
    }
}
