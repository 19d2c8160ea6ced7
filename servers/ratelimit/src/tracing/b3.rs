//! Zipkin's B3 trace context: the single `b3` header and the `X-B3-*` headers. Extraction
//! only: the server starts spans but calls nobody who would need the context passed on.
//! Ids are lowercase hex and never all zeros, as the B3 specification writes them; anything
//! else is no context at all, never an error.

/// Where a caller stands in a B3 trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct B3 {
    /// 128 bits; a 64-bit id is the low half.
    pub trace_id: u128,
    /// The caller's span, the parent of ours.
    pub span_id: u64,
    /// `Some(true)` sampled (or debug), `Some(false)` not sampled, `None` deferred: the
    /// receiver decides.
    pub sampled: Option<bool>,
}

/// The `b3` header: `{trace}-{span}[-{sampling}[-{parent}]]`. A header holding only a
/// sampling state carries no trace to continue, so it gives `None` as well.
pub fn parse_single(value: &str) -> Option<B3> {
    let mut parts = value.split('-');
    let trace_id = parts.next()?;
    let span_id = parts.next()?;
    let sampled = match parts.next() {
        None => None,
        Some("1" | "d") => Some(true),
        Some("0") => Some(false),
        Some(_) => return None,
    };
    if let Some(parent) = parts.next() {
        span_hex(parent)?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(B3 {
        trace_id: trace_hex(trace_id)?,
        span_id: span_hex(span_id)?,
        sampled,
    })
}

/// The `X-B3-TraceId`, `X-B3-SpanId`, `X-B3-ParentSpanId`, `X-B3-Sampled` and `X-B3-Flags`
/// headers, each `None` when absent. `X-B3-Flags: 1` is debug, which implies sampled.
pub fn parse_multi(
    trace_id: Option<&str>,
    span_id: Option<&str>,
    parent_span_id: Option<&str>,
    sampled: Option<&str>,
    flags: Option<&str>,
) -> Option<B3> {
    let sampled = match sampled {
        None => None,
        Some("1" | "true") => Some(true),
        Some("0" | "false") => Some(false),
        Some(_) => return None,
    };
    let sampled = if flags == Some("1") {
        Some(true)
    } else {
        sampled
    };
    if let Some(parent) = parent_span_id {
        span_hex(parent)?;
    }
    Some(B3 {
        trace_id: trace_hex(trace_id?)?,
        span_id: span_hex(span_id?)?,
        sampled,
    })
}

fn trace_hex(s: &str) -> Option<u128> {
    if s.len() != 16 && s.len() != 32 {
        return None;
    }
    lower_hex(s).filter(|&v| v != 0)
}

fn span_hex(s: &str) -> Option<u64> {
    if s.len() != 16 {
        return None;
    }
    lower_hex(s)
        .and_then(|v| u64::try_from(v).ok())
        .filter(|&v| v != 0)
}

/// At most 32 digits; `from_str_radix` alone would also take `+` and uppercase.
fn lower_hex(s: &str) -> Option<u128> {
    if s.len() > 32 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u128::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T128: &str = "80f198ee56343ba864fe8b2a57d3eff7";
    const T64: &str = "64fe8b2a57d3eff7";
    const SPAN: &str = "e457b5a2e4d86bd1";
    const PARENT: &str = "05e3ac9a4f6e3b90";

    fn b3(trace_id: u128, sampled: Option<bool>) -> Option<B3> {
        Some(B3 {
            trace_id,
            span_id: 0xe457b5a2e4d86bd1,
            sampled,
        })
    }

    #[test]
    fn single_header_forms() {
        let t = 0x80f198ee56343ba864fe8b2a57d3eff7;
        assert_eq!(parse_single(&format!("{T128}-{SPAN}")), b3(t, None));
        assert_eq!(parse_single(&format!("{T128}-{SPAN}-1")), b3(t, Some(true)));
        assert_eq!(parse_single(&format!("{T128}-{SPAN}-d")), b3(t, Some(true)));
        assert_eq!(
            parse_single(&format!("{T128}-{SPAN}-0-{PARENT}")),
            b3(t, Some(false))
        );
        // A 64-bit trace id is the low half of the 128-bit one.
        assert_eq!(
            parse_single(&format!("{T64}-{SPAN}-1")),
            b3(0x64fe8b2a57d3eff7, Some(true))
        );
    }

    #[test]
    fn single_header_rejects() {
        let cases: &[&str] = &[
            "",
            "1",
            "0",
            "d",
            T128,
            &format!("{T128}-{SPAN}-x"),
            &format!("{T128}-{SPAN}-1-{PARENT}-extra"),
            &format!("{T128}-{SPAN}-1-abc"),
            &format!("{}-{SPAN}", T128.to_uppercase()),
            &format!("{}-{SPAN}", &T128[1..]),
            &format!("{T128}-0000000000000000"),
            &format!("{}-{SPAN}", "0".repeat(32)),
            &format!("+{}-{SPAN}", &T64[1..]),
            &format!("{T128}-{SPAN}-"),
            "é457b5a2e4d86bd-e457b5a2e4d86bd1",
        ];
        for bad in cases {
            assert_eq!(parse_single(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn multi_headers() {
        let t = 0x80f198ee56343ba864fe8b2a57d3eff7;
        assert_eq!(
            parse_multi(Some(T128), Some(SPAN), None, None, None),
            b3(t, None)
        );
        assert_eq!(
            parse_multi(Some(T128), Some(SPAN), Some(PARENT), Some("1"), None),
            b3(t, Some(true))
        );
        assert_eq!(
            parse_multi(Some(T128), Some(SPAN), None, Some("false"), None),
            b3(t, Some(false))
        );
        assert_eq!(
            parse_multi(Some(T128), Some(SPAN), None, Some("0"), Some("1")),
            b3(t, Some(true)),
            "debug wins"
        );
        assert_eq!(parse_multi(Some(T128), None, None, Some("1"), None), None);
        assert_eq!(parse_multi(None, Some(SPAN), None, Some("1"), None), None);
        assert_eq!(
            parse_multi(Some(T128), Some(SPAN), None, Some("yes"), None),
            None
        );
        assert_eq!(
            parse_multi(Some(T128), Some(SPAN), Some("x"), None, None),
            None
        );
    }
}
