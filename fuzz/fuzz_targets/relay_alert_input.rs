//! Any body on the Alertmanager path: events or a clear error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use relay_templates::event::{Arrival, parse_alertmanager};

fuzz_target!(|data: &[u8]| {
    let at = Arrival::new("/alertmanager", chrono::DateTime::UNIX_EPOCH);
    if let Ok(events) = parse_alertmanager(data, &at) {
        for e in events {
            let _ = e.to_value();
        }
    }
});
