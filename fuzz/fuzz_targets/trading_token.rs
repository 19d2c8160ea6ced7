//! `Authorization` header values through token parsing, HMAC verification, nonce and
//! strict-mode checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    trading_model::fuzz_token(data);
});
