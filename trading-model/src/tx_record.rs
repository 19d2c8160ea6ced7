//! Strategy transaction records as the spec shows them: every field a string, the
//! order's progress written next to what the strategy stored when it placed it. What it
//! deliberately does not do: no reading of orders or strategies; the server passes in the
//! stored fields and the order's facts.

use serde_json::{Map, Value};

/// What a transaction record shows of its order.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderFacts<'a> {
    /// Order id.
    pub id: i64,
    /// `pending`, `open`, `closed`, `canceled`, `expired` or `rejected`.
    pub status: &'a str,
    /// How often the engine looked the order up.
    pub checks: i64,
    /// Limit price; `None` for market orders.
    pub price: Option<f64>,
    /// Amount ordered.
    pub amount: f64,
    /// Amount filled.
    pub filled: f64,
    /// Quote spent or received on the fills.
    pub cost: f64,
    /// Fees paid.
    pub fee: f64,
    /// When it was sent to the exchange.
    pub send_ms: u64,
    /// When it reached a final status (0 while live).
    pub done_ms: u64,
    /// Time of its last fill, if any.
    pub last_trade_ms: Option<u64>,
    /// The order as `exchange-query/order-check` shows it, as JSON text.
    pub payload: String,
}

/// Text of a number for the string-only transaction records and files, rounded to 10
/// decimals so float dust does not show: the difference of two prices near 100,000 is
/// off by about 1e-11 (19.699999999997 for 19.7).
pub fn text(v: f64) -> String {
    let r = (v * 1e10).round() / 1e10;
    if r == r.trunc() && r.abs() < 1e15 {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// A strategy transaction record: every field of the spec's record, all strings.
/// `fields` are those the strategy stored when it placed the order; `o` is the order
/// as it stands (`None`: the order is gone, and the record says so).
pub fn render(
    id: i64,
    fields: &Map<String, Value>,
    created: u64,
    o: Option<&OrderFacts<'_>>,
) -> Value {
    let s = |k: &str| {
        fields.get(k).map_or_else(String::new, |v| {
            v.as_str().map_or_else(|| v.to_string(), str::to_owned)
        })
    };
    let mut m = Map::new();
    let mut put = |k: &str, v: String| {
        m.insert(k.to_owned(), Value::String(v));
    };
    put("id", id.to_string());
    put("time_created", (created / 1000).to_string());
    let updated = o.map_or(created, |o| {
        o.done_ms.max(o.last_trade_ms.unwrap_or(0)).max(created)
    });
    put("last_updated", (updated / 1000).to_string());
    let live = o.is_some_and(|o| o.status == "open" || o.status == "pending");
    put("c_active", if live { "1" } else { "0" }.into());
    for k in [
        "c_order",
        "c_row",
        "c_symbol_code",
        "c_exchange",
        "c_symbol",
        "c_symbolid",
        "c_type",
        "c_type_orig",
        "c_side",
        "c_amount",
        "c_price_entry",
        "c_price_offset",
        "c_time_requested",
        "c_order_slice",
        "c_child_id",
        "c_spread_entry",
        "c_trace_order",
        "c_conditions",
        "custom_id",
        "c_max_time",
    ] {
        put(k, s(k));
    }
    match o {
        Some(o) => {
            let final_ = !live;
            put("c_lookup_status", if final_ { "1" } else { "0" }.into());
            put("c_lookup_count", o.checks.to_string());
            let price = o.price.unwrap_or(if o.filled > 0.0 {
                o.cost / o.filled
            } else {
                0.0
            });
            put("c_price", text(price));
            put("c_payload", o.payload.clone());
            put("c_time_orderplaced", o.send_ms.to_string());
            put("c_time_completed", o.done_ms.to_string());
            let requested: u64 = s("c_time_requested").parse().unwrap_or(o.send_ms);
            put(
                "c_time_journey",
                o.send_ms.saturating_sub(requested).to_string(),
            );
            put("c_order_id", o.id.to_string());
            put(
                "c_order_success",
                if o.status == "rejected" { "0" } else { "1" }.into(),
            );
            put(
                "c_order_failed",
                if o.status == "rejected" { "1" } else { "0" }.into(),
            );
            put("c_order_status", o.status.to_owned());
            put("c_order_remaining", text((o.amount - o.filled).max(0.0)));
            put("c_order_filled", text(o.filled));
            put("c_com", text(o.fee));
            let cancelled = o.status == "canceled" || o.status == "expired";
            put("c_cancel", if cancelled { "1" } else { "0" }.into());
            put(
                "c_cancel_time",
                if cancelled {
                    o.done_ms.to_string()
                } else {
                    "0".into()
                },
            );
        }
        None => {
            for k in [
                "c_lookup_status",
                "c_lookup_count",
                "c_price",
                "c_time_orderplaced",
                "c_time_completed",
                "c_time_journey",
                "c_order_id",
                "c_order_success",
                "c_order_remaining",
                "c_order_filled",
                "c_com",
                "c_cancel",
                "c_cancel_time",
            ] {
                put(k, "0".into());
            }
            put("c_payload", "{}".into());
            put("c_order_failed", "1".into());
            put("c_order_status", "unknown".into());
        }
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(status: &str) -> OrderFacts<'_> {
        OrderFacts {
            id: 7,
            status,
            checks: 2,
            price: None,
            amount: 1.0,
            filled: 0.25,
            cost: 25.0,
            fee: 0.1,
            send_ms: 5_000,
            done_ms: 9_000,
            last_trade_ms: Some(12_000),
            payload: "{}".into(),
        }
    }

    #[test]
    fn numbers_as_text() {
        assert_eq!(text(2.0), "2");
        assert_eq!(text(0.1 + 0.2), "0.3");
        assert_eq!(text(43_210.5 - 43_190.8), "19.7");
        assert_eq!(text(-1.5), "-1.5");
    }

    #[test]
    fn an_order_fills_in_its_progress() {
        let mut stored = Map::new();
        stored.insert("c_time_requested".into(), Value::String("4000".into()));
        stored.insert("c_row".into(), serde_json::json!(3));
        let r = render(1, &stored, 3_000, Some(&facts("canceled")));
        assert_eq!(r["last_updated"], "12");
        assert_eq!(r["c_row"], "3");
        assert_eq!(r["c_price"], "100");
        assert_eq!(r["c_time_journey"], "1000");
        assert_eq!(r["c_order_remaining"], "0.75");
        assert_eq!(
            (&r["c_cancel"], &r["c_cancel_time"]),
            (&"1".into(), &"9000".into())
        );
        assert_eq!(r["c_active"], "0");
    }

    #[test]
    fn a_missing_order_is_marked_failed() {
        let r = render(1, &Map::new(), 3_000, None);
        assert_eq!(
            (&r["c_order_status"], &r["c_order_failed"]),
            (&"unknown".into(), &"1".into())
        );
        assert_eq!(r["c_payload"], "{}");
        assert_eq!(r["last_updated"], "3");
    }
}
