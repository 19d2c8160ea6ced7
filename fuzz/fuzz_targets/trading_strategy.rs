//! Strategy texts (condition values, levels, states) and paper-order matching through
//! `trading_model::strategy::fuzz`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    trading_model::strategy::fuzz(data);
});
