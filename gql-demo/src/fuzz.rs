//! The body of the `gql_query` fuzz target, here so that `cargo test` replays its corpus
//! through the same code the fuzzer runs.

use std::sync::LazyLock;

use crate::{Dataset, Demo, OperationPolicy, Reply, Request, Settings, StoreLimits, cycles};

static DEMO: LazyLock<Demo> = LazyLock::new(|| {
    // A small store keeps a long fuzzing run from growing memory through mutations.
    let settings = Settings {
        store: StoreLimits {
            max_messages: 64,
            max_field_bytes: 256,
        },
        ..Settings::default()
    };
    Demo::new(Dataset::builtin(), settings)
});

/// Runs fuzz input through request parsing, juniper's parser with the demo's limits,
/// validation and execution. Input starting with `{"` is a JSON request body; anything else
/// is a raw query document. Returns the reply, or `None` when the body is not a request.
pub fn query(data: &[u8]) -> Option<Reply> {
    let request = if data.starts_with(b"{\"") {
        Request::from_json(data).ok()?
    } else {
        Request::from_query(String::from_utf8_lossy(data))
    };
    let reply = DEMO.execute(&request, OperationPolicy::All);
    // The server sends the body as is: it must always be a JSON object.
    let body = reply.json();
    assert!(
        body.is_object(),
        "reply is not a JSON object: {}",
        reply.body
    );
    // Every cycle juniper finds is found again and reworded by cycles.rs.
    let errors = body["errors"].as_array().map_or(&[][..], Vec::as_slice);
    assert!(
        !errors.iter().any(|e| e["message"]
            .as_str()
            .is_some_and(cycles::is_juniper_cycle_message)),
        "a fragment cycle kept juniper's wording: {}",
        reply.body
    );
    Some(reply)
}
