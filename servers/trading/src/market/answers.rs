//! Pieces every market answer is built from: the page asked for, the paged record, the
//! refusals of unknown exchanges and trading codes, symbol records and rounding.

use serde_json::{Value, json};
use trading_model::market::{Market, Symbol};
use trading_model::{ApiError, Endpoint, Page, PageInfo, Valid};

use crate::context::{refused, refused_with};

/// The page of a paged endpoint (validation filled the defaults).
pub(crate) fn page(ep: &Endpoint, valid: &Valid) -> Page {
    Page::of(ep, valid).unwrap_or(Page {
        limit: 10,
        pagenumber: 1,
    })
}

/// `{records, page, showing, total}` as every paged list answers.
pub(crate) fn paged(records: Vec<Value>, info: PageInfo) -> Value {
    json!({"records": records, "page": info.page, "showing": info.showing, "total": info.total})
}

pub(crate) fn unknown_exchange(m: &Market, param: &str) -> ApiError {
    refused_with(
        param,
        "Unsupported exchange; the supported list is attached.",
        Some((
            "supported",
            json!(m.exchanges().iter().map(|e| e.code).collect::<Vec<_>>()),
        )),
    )
}

pub(crate) fn unknown_code(param: &str, code: &str) -> ApiError {
    refused(
        param,
        format!("Unknown trading code {code}; system/symbols lists the codes."),
    )
}

/// A symbol record as the spec shows it.
pub(crate) fn symbol_record(s: &Symbol) -> Value {
    json!({
        "id": s.id, "symbol": s.pair(), "quote": s.quote, "base": s.base,
        "min": s.min, "pp": s.pp, "pa": s.pa,
    })
}

/// Rounds for display without losing the precision a price needs.
pub(crate) fn r8(x: f64) -> f64 {
    (x * 1e8).round() / 1e8
}
