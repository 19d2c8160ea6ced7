//! Any body on the admission path: a decoded review or a clear error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use relay_templates::event::{Arrival, parse_admission};

fuzz_target!(|data: &[u8]| {
    let at = Arrival::new("/k8s", chrono::DateTime::UNIX_EPOCH);
    if let Ok(review) = parse_admission(data, &at) {
        let _ = review.response();
        let _ = review.event.map(|e| e.to_value());
    }
});
