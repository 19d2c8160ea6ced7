//! `marketplace/signals-add` payloads through base64 decoding, JSON parsing and the shape
//! checks of `trading_model::signal_payload`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    trading_model::signal_payload::fuzz(data);
});
