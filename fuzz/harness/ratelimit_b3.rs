//! Any bytes as a `b3` header: parsed or refused, never a panic, and the single header
//! agrees with the same fields sent as `X-B3-*` headers. Shared by the cargo-fuzz target and
//! the stable corpus replay test (`servers/ratelimit/tests/fuzz_corpus.rs`), which include
//! this file by path.

use ratelimit_server::tracing::b3::{parse_multi, parse_single};

/// Returns whether the input parsed, so the replay test can see its seeds still do.
pub fn run(data: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(data) else {
        return false;
    };
    let single = parse_single(s);
    if let Some(b) = single {
        assert_ne!(b.trace_id, 0, "{s:?}");
        assert_ne!(b.span_id, 0, "{s:?}");
    }
    let parts: Vec<&str> = s.split('-').collect();
    if (2..=4).contains(&parts.len()) {
        // The two forms spell sampling differently: `d` is `X-B3-Flags: 1`, and only the
        // headers take `true` and `false`.
        let (sampled, flags) = match parts.get(2).copied() {
            Some("d") => (None, Some("1")),
            other => (other, None),
        };
        if !matches!(sampled, Some("true" | "false")) {
            let multi = parse_multi(
                Some(parts[0]),
                Some(parts[1]),
                parts.get(3).copied(),
                sampled,
                flags,
            );
            assert_eq!(single, multi, "{s:?}");
        }
    }
    single.is_some()
}
