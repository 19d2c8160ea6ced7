//! Raw query string + body for a fuzz-chosen endpoint through routing, body parsing,
//! query-wins merging, validation, paging and the error envelope. Layout of the input is
//! documented on `trading_model::fuzz_entry`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    trading_model::fuzz_entry(data);
});
