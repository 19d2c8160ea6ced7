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

mod balances;
mod call_context;
mod exchange;
mod exports;
mod orders;
mod reports;
mod strategies;

use serde_json::Value;
use trading_model::{ApiError, Endpoint, Valid};

use crate::context::{RequestContext, for_caller};
use crate::store::Store;
use call_context::Cx;

/// Serialises ticks: the timer and request threads may tick at once, and two ticks must
/// not both fill the same order.
static TICK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs the background work that is due at `now_ms` (strategies, delayed and repeated
/// orders, resting limit orders). Called before every request's handler and once a
/// second; when nothing is due it costs one indexed query.
pub(crate) fn tick(store: &Store, market: &trading_model::market::Market, now_ms: u64) {
    let _guard = TICK.lock().unwrap_or_else(|p| p.into_inner());
    let Ok(Some(due)) = store.paper().next_due_ms() else {
        return;
    };
    if due > now_ms {
        return;
    }
    // A failing tick must not fail the request that triggered it; the next tick retries.
    let _ = strategies::run_due(store, market, now_ms);
    let _ = orders::run_due(store, market, now_ms);
}

/// Strategies of `user_id` that are running now (account rules refuse some changes while
/// any run, such as disabling the server they run on).
// Used by the account module once servers can be disabled.
#[allow(dead_code)]
pub(crate) fn running_strategies(
    store: &Store,
    user_id: i64,
) -> Result<u64, crate::store::StoreError> {
    store.paper().running_strategies(user_id)
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

/// Answers `ep` if this module handles it.
pub(crate) fn call(
    ep: &Endpoint,
    valid: &Valid,
    env: &RequestContext,
) -> Option<Result<Value, ApiError>> {
    for_caller(handles(&ep.path), env, |caller| {
        let cx = Cx {
            ep,
            valid,
            env,
            caller,
        };
        let path = ep.path.as_str();
        if path.starts_with("exchange-") {
            exchange::call(&cx, path)
        } else if path.starts_with("strategy/") {
            strategies::call(&cx, path)
        } else if path.starts_with("export/") {
            exports::call(&cx, path)
        } else {
            reports::call(&cx, path)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_in_the_catalogue() {
        let cat = trading_model::Catalogue::builtin();
        for p in PATHS {
            assert!(cat.get(p).is_some(), "{p}");
        }
    }
}
