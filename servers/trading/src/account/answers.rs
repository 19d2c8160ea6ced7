//! What the account endpoints' answers are built from: record fields, refusals, pages.

use serde_json::{Value, json};
use trading_model::{ApiError, Endpoint, ErrorCode, Page, Valid};

use crate::context::{db, refused};
use crate::resources::answer;
use crate::store::{Record, Store};

pub(crate) fn text(r: &Record, field: &str) -> String {
    r.fields
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn no_record(param: &str) -> ApiError {
    refused(param, "No such record on this account.")
}

pub(crate) fn page_json(rows: Vec<Value>, page: &Page, total: u64) -> Value {
    json!({"records": rows, "page": page.pagenumber, "showing": rows.len(), "total": total})
}

/// The first page of 100 for list endpoints the catalogue gives no paging parameters.
pub(crate) const WHOLE: Page = Page {
    limit: 100,
    pagenumber: 1,
};

pub(crate) fn list(store: &Store, kind: &str, user: i64, page: &Page) -> Result<Value, ApiError> {
    let (rows, total) = store
        .list_records(kind, user, page.limit, page.offset())
        .map_err(db)?;
    Ok(page_json(rows.iter().map(answer).collect(), page, total))
}

pub(crate) fn paging(ep: &Endpoint, valid: &Valid) -> Page {
    Page::of(ep, valid).unwrap_or(Page {
        limit: 10,
        pagenumber: 1,
    })
}

// ---------------------------------------------------------------------------------------
// Dispatch

pub(crate) fn forbidden(msg: String) -> ApiError {
    ApiError::new(ErrorCode::UnprocessableAuthorization)
        .with_status(403)
        .with_message(msg)
}
