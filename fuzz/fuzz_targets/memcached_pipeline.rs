//! Any bytes as what a memcached node sends back to a pipeline of `gets`, `incr`, `decr`,
//! `add` and `cas` (the sliding windows' and token buckets' round trips): the store
//! answers or fails on them, and never panics or hangs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ratelimit_backends::memcached::check_pipeline_replies(data);
});
