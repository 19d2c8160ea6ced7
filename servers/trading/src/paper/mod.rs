//! Paper trading and strategies: exchange queries and orders filled against the simulated
//! books, strategy profiles and their state machine, the strategy worker, exports,
//! statistics and finance.
//!
//! Everything is driven by the injected clock: [`tick`] runs what is due (delayed and
//! repeated orders, resting limit orders, strategy slices) and evaluates each at its own
//! scheduled time, so the result depends only on the seed and the clock, not on how often
//! ticks happen. What it deliberately does not do: no real exchange traffic, no margin or
//! leverage (the `executable_leverage` values are stored, not applied), no order-book
//! depletion between orders (see `trading_model::orders`).

mod exchange;
mod reports;
mod strategies;

use serde_json::{Value, json};
use trading_model::{ApiError, Endpoint, ErrorCode, Valid, ValidationFailure};

use crate::context::RequestContext;
use crate::store::Store;

/// Serialises ticks: the timer and request threads may tick at once, and two ticks must
/// not both fill the same order.
static TICK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs the background work that is due at `now_ms` (strategies, delayed and repeated
/// orders, resting limit orders). Called before every request's handler and once a
/// second; when nothing is due it costs one indexed query.
pub(crate) fn tick(store: &Store, market: &trading_model::market::Market, now_ms: u64) {
    let _guard = TICK.lock().unwrap_or_else(|p| p.into_inner());
    let due = store.conn().query_row(
        "SELECT MIN(t) FROM (
             SELECT MIN(due_ms) AS t FROM paper_orders WHERE status IN ('pending', 'open')
             UNION ALL
             SELECT MIN(next_due_ms) AS t FROM paper_strategies WHERE state = 'running')",
        [],
        |r| r.get::<_, Option<i64>>(0),
    );
    let Ok(Some(due)) = due else { return };
    if u64::try_from(due).unwrap_or(0) > now_ms {
        return;
    }
    // A failing tick must not fail the request that triggered it; the next tick retries.
    let _ = strategies::run_due(store, market, now_ms);
    let _ = exchange::run_due(store, market, now_ms);
}

/// Strategies of `user_id` that are running now (account rules refuse some changes while
/// any run, such as disabling the server they run on).
// Used by the account module once servers can be disabled.
#[allow(dead_code)]
pub(crate) fn running_strategies(
    store: &Store,
    user_id: i64,
) -> Result<u64, crate::store::StoreError> {
    let n: i64 = store.conn().query_row(
        "SELECT COUNT(*) FROM paper_strategies WHERE user_id = ?1 AND state = 'running'",
        [user_id],
        |r| r.get(0),
    )?;
    Ok(u64::try_from(n).unwrap_or(0))
}

const PATHS: &[&str] = &[
    "exchange-api-keys/test",
    "exchange-api-keys/delete",
    "exchange-query/order-create",
    "exchange-query/list-open-orders",
    "exchange-query/list-closed-orders",
    "exchange-query/order-check",
    "exchange-query/order-cancel",
    "exchange-query/list-balances",
    "exchange-query/list-exchange-requests",
    "exchange-query/create-query",
    "strategy/edit-profile",
    "strategy/delete-profile",
    "strategy/start",
    "strategy/stop",
    "strategy/soft-stop",
    "strategy/stop-all-strategies",
    "strategy/hard-reset",
    "strategy/list-strategies",
    "strategy/list-strategy-transactions",
    "strategy/high-level-overview",
    "strategy/data/list",
    "strategy/data/debug",
    "strategy/list-algorithms",
    "strategy/list-exchanges",
    "strategy/list-strategy-options",
    "strategy/duplicate-strategy",
    "strategy/edit-order",
    "strategy/edit-component",
    "strategy/books",
    "export/request",
    "export/list",
    "export/fetch",
    "statistics/account-pnl",
    "finance/list-commissions-paid",
    "finance/list-recent-transactions",
    "finance/list-top-strategy-pnl",
    "finance/import-orders-list",
    "finance/import-orders-settings",
];

/// Whether this module answers `path`.
pub(crate) fn handles(path: &str) -> bool {
    PATHS.contains(&path)
}

/// One call as the handlers see it.
pub(super) struct Cx<'a> {
    pub ep: &'a Endpoint,
    pub valid: &'a Valid,
    pub env: &'a RequestContext,
    pub caller: &'a crate::context::Caller,
}

impl Cx<'_> {
    fn user(&self) -> i64 {
        self.caller.user_id
    }
    fn now(&self) -> u64 {
        self.env.now_ms
    }
    fn store(&self) -> &Store {
        &self.env.store
    }
    /// The caller's plan limits (`subscriptions/details` shape).
    fn plan(&self) -> Value {
        trading_model::plans::plan_details(&self.caller.plan)
    }
    /// A record id parameter (positive integer) or the standard "no such record" refusal.
    fn id(&self, param: &str) -> Result<i64, ApiError> {
        self.valid
            .text(param)
            .and_then(|s| s.trim().parse::<i64>().ok())
            .filter(|&i| i > 0)
            .ok_or_else(|| refused(param, NO_RECORD))
    }
}

pub(super) const NO_RECORD: &str = "No such record on this account.";

/// Answers `ep` if this module handles it.
pub(crate) fn call(
    ep: &Endpoint,
    valid: &Valid,
    env: &RequestContext,
) -> Option<Result<Value, ApiError>> {
    if !handles(&ep.path) {
        return None;
    }
    let Some(caller) = env.caller.as_ref() else {
        return Some(Err(ApiError::new(ErrorCode::MissingKey)));
    };
    let cx = Cx {
        ep,
        valid,
        env,
        caller,
    };
    let path = ep.path.as_str();
    Some(if path.starts_with("exchange-") {
        exchange::call(&cx, path)
    } else if path.starts_with("strategy/") {
        strategies::call(&cx, path)
    } else {
        reports::call(&cx, path)
    })
}

/// A 1440 refusal naming the parameter at fault.
pub(super) fn refused(param: &str, error: impl Into<String>) -> ApiError {
    ApiError::validation(ValidationFailure {
        missing_information: vec![json!({"parameter": param, "error": error.into()})],
        ..ValidationFailure::default()
    })
}

pub(super) fn db(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Database).with_message(format!("Internal database error: {e}"))
}

pub(super) fn sql(e: rusqlite::Error) -> ApiError {
    db(e)
}

pub(super) fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A number rounded to 12 significant decimals so float dust does not show in answers.
pub(super) fn num(v: f64) -> Value {
    let r = (v * 1e12).round() / 1e12;
    json!(if r == 0.0 { 0.0 } else { r })
}

/// Text of a number for the string-only transaction records and files.
pub(super) fn text(v: f64) -> String {
    let r = (v * 1e12).round() / 1e12;
    if r == r.trunc() && r.abs() < 1e15 {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// ISO-8601 UTC text of a millisecond time (ccxt's `datetime`).
pub(super) fn iso(ms_time: u64) -> String {
    i64::try_from(ms_time)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// A page of `rows` (already newest first) as `{records, page, showing, total}`.
pub(super) fn paged(ep: &Endpoint, valid: &Valid, rows: Vec<Value>) -> Value {
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

    #[test]
    fn numbers_as_text() {
        assert_eq!(text(2.0), "2");
        assert_eq!(text(0.1 + 0.2), "0.3");
        assert_eq!(text(-1.5), "-1.5");
    }

    #[test]
    fn every_path_is_in_the_catalogue() {
        let cat = trading_model::Catalogue::builtin();
        for p in PATHS {
            assert!(cat.get(p).is_some(), "{p}");
        }
    }
}
