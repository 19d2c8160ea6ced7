//! One paper-trading call as its handlers see it ([`Cx`]), and the answer helpers they
//! share: refusals, store errors, numbers and times as the records show them, paging.

use serde_json::{Value, json};
use trading_model::{ApiError, Endpoint, ErrorCode, Valid};

use crate::context::{Caller, RequestContext};
use crate::store::Store;

/// One call as the handlers see it.
pub(crate) struct Cx<'a> {
    pub ep: &'a Endpoint,
    pub valid: &'a Valid,
    pub env: &'a RequestContext,
    pub caller: &'a Caller,
}

impl Cx<'_> {
    pub(crate) fn user(&self) -> i64 {
        self.caller.user_id
    }
    pub(crate) fn now(&self) -> u64 {
        self.env.now_ms
    }
    pub(crate) fn store(&self) -> &Store {
        &self.env.store
    }
    /// The caller's plan limits (`subscriptions/details` shape).
    pub(crate) fn plan(&self) -> Value {
        trading_model::plans::plan_details(&self.caller.plan)
    }
}

pub(crate) fn db(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Database).with_message(format!("Internal database error: {e}"))
}

pub(crate) fn sql(e: crate::store::StoreError) -> ApiError {
    db(e)
}

/// A number rounded to 12 significant decimals so float dust does not show in answers.
pub(crate) fn num(v: f64) -> Value {
    let r = (v * 1e12).round() / 1e12;
    json!(if r == 0.0 { 0.0 } else { r })
}

pub(crate) use trading_model::tx_record::text;

/// ISO-8601 UTC text of a millisecond time (ccxt's `datetime`).
pub(crate) fn iso(ms_time: u64) -> String {
    i64::try_from(ms_time)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// A page of `rows` (already newest first) as `{records, page, showing, total}`.
pub(crate) fn paged(ep: &Endpoint, valid: &Valid, rows: Vec<Value>) -> Value {
    let page = trading_model::Page::of(ep, valid).unwrap_or(trading_model::Page {
        limit: 10,
        pagenumber: 1,
    });
    let total = rows.len();
    let skip = usize::try_from(page.offset()).unwrap_or(usize::MAX);
    let records: Vec<Value> = rows
        .into_iter()
        .skip(skip)
        .take(page.limit as usize)
        .collect();
    json!({
        "records": records,
        "page": page.pagenumber,
        "showing": records.len(),
        "total": total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_592_207_324_028), "2020-06-15T07:48:44.028Z");
        assert_eq!(iso(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
