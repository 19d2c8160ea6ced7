//! GraphQL request bodies and query documents through juniper's parser with the demo's
//! depth, complexity and token limits, validation and execution.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gql_demo::fuzz::query(data);
});
