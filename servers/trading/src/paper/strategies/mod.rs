//! Strategies: one per profile (the strategy id is the profile id), driven by the pure
//! state machine of `trading_model::strategy`, and the worker that runs their slices as
//! paper orders on the injected clock.

mod lifecycle;
mod listing;
mod profiles;
mod rows;
mod worker;

pub(super) use lifecycle::apply_stop;
pub(super) use listing::{TxQuery, describe, transactions};
pub(super) use rows::running_using_key;
pub(super) use worker::run_due;

use serde_json::{Value, json};
use trading_model::strategy::Event;
use trading_model::{ApiError, typed};

use super::call_context::Cx;
use crate::context::refused;
use lifecycle::{hard_reset, start, stop, stop_all};
use listing::{
    books, debug, list_algorithms, list_strategies, list_transactions, options, overview,
};
use profiles::{delete_profile, duplicate, edit_component, edit_order, edit_profile};

pub(super) fn call(cx: &Cx<'_>, path: &str) -> Result<Value, ApiError> {
    match path {
        "strategy/edit-profile" => edit_profile(cx),
        "strategy/delete-profile" => delete_profile(cx),
        "strategy/start" => start(cx),
        "strategy/stop" => {
            let p = typed::StrategyStop::from_valid(cx.valid)?;
            let force = p.force.unwrap_or(false);
            stop(cx, &p.id, Event::Stop { force })
        }
        "strategy/soft-stop" => {
            let p = typed::StrategySoftStop::from_valid(cx.valid)?;
            stop(cx, &p.id, Event::SoftStop)
        }
        "strategy/stop-all-strategies" => stop_all(cx),
        "strategy/hard-reset" => hard_reset(cx),
        "strategy/list-strategies" => list_strategies(cx, true),
        "strategy/data/list" => list_strategies(cx, false),
        "strategy/list-strategy-transactions" => list_transactions(cx),
        "strategy/high-level-overview" => overview(cx),
        "strategy/data/debug" => debug(cx),
        "strategy/list-algorithms" => Ok(list_algorithms(cx)),
        "strategy/list-exchanges" => Ok(Value::Array(
            cx.env
                .market
                .exchanges()
                .iter()
                .map(|e| json!({"code": e.code, "name": e.name, "fee": e.fee, "needs_password": e.needs_password}))
                .collect(),
        )),
        "strategy/list-strategy-options" => Ok(options(cx)),
        "strategy/duplicate-strategy" => duplicate(cx),
        "strategy/edit-order" => edit_order(cx),
        "strategy/edit-component" => edit_component(cx),
        "strategy/books" => books(cx),
        _ => Err(refused("path", "unhandled")),
    }
}
