//! Pieces the market answers here share: the page asked for, the refusal of unknown
//! exchanges, and (from `trading_model::market::public`) paged records, symbol records and
//! rounding.

use serde_json::json;
use trading_model::market::Market;
use trading_model::{ApiError, Endpoint, Page, Valid};

use crate::context::refused_with;

pub(crate) use trading_model::market::public::{paged, r8, symbol_record};

/// The page of a paged endpoint (validation filled the defaults).
pub(crate) fn page(ep: &Endpoint, valid: &Valid) -> Page {
    Page::of(ep, valid).unwrap_or(Page {
        limit: 10,
        pagenumber: 1,
    })
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
