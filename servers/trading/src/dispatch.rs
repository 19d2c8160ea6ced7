//! The dispatcher: runs the due background work, records the access history, then asks
//! the feature modules in order which one answers the endpoint; the generic account
//! resources come last.

use serde_json::{Value, json};
use trading_model::{ApiError, Endpoint, ErrorCode, Valid};

use crate::context::{RequestContext, caller_of, db};
use crate::{
    account, algorithm_creator, market, marketplace, paper, resources, support_desk, system,
};

/// Access-history entries kept per account (older ones are dropped).
const ACCESS_HISTORY_KEPT: u32 = 1000;

/// Whether `path` has a handler (the others answer 501 after validation).
pub(crate) fn implemented(path: &str) -> bool {
    resources::find(path).is_some() || MODULES.iter().any(|(handles, _)| handles(path))
}

type Handles = fn(&str) -> bool;
type Call = fn(&Endpoint, &Valid, &RequestContext) -> Option<Result<Value, ApiError>>;

/// Feature modules, asked in order before the generic resources: the first that handles a
/// path answers it (so a module can take over a resource endpoint, such as deleting an
/// exchange key that a running strategy uses).
const MODULES: [(Handles, Call); 7] = [
    (paper::handles, paper::call),
    (market::handles, market::call),
    (account::handles, account::call),
    (marketplace::handles, marketplace::call),
    (algorithm_creator::handles, algorithm_creator::call),
    (support_desk::handles, support_desk::call),
    (system::handles, system::call),
];

/// Runs the endpoint's handler. Called on a blocking thread: handlers use SQLite.
pub(crate) fn call(ep: &Endpoint, valid: &Valid, env: &RequestContext) -> Result<Value, ApiError> {
    let now = env.now_ms;
    paper::tick(&env.store, &env.market, now);
    if let Some(c) = &env.caller {
        // Every authenticated call that got this far is part of the access history.
        let mut entry = serde_json::Map::new();
        entry.insert("endpoint".into(), json!(ep.path));
        entry.insert("address".into(), json!(env.address));
        env.store
            .insert_record("access", c.user_id, &entry, None, now)
            .map_err(db)?;
        env.store
            .trim_records("access", c.user_id, ACCESS_HISTORY_KEPT)
            .map_err(db)?;
    }
    for (handles, answer) in MODULES {
        if handles(&ep.path) {
            if let Some(result) = answer(ep, valid, env) {
                return result;
            }
        }
    }
    if let Some((spec, action)) = resources::find(&ep.path) {
        let caller = caller_of(env)?;
        return resources::run(spec, action, ep, valid, &env.store, caller, now);
    }
    debug_assert!(!implemented(&ep.path), "{} listed but unhandled", ep.path);
    Err(ApiError::new(ErrorCode::EmptyData)
        .with_status(501)
        .with_message(format!(
            "{} is not implemented by this sandbox yet; its parameters were valid.",
            ep.path
        )))
}
