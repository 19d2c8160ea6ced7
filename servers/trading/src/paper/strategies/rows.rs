//! The strategy rows (one per profile) and the profiles' stored fields, read and
//! written in SQLite.

use serde_json::{Map, Value};
use trading_model::ApiError;
use trading_model::strategy_profile::Profile;

use crate::context::{NO_RECORD, record_id, refused};
use crate::paper::call_context::{Cx, sql};
use crate::store::{Store, StoreError, Strategies, StrategyRow};

/// Running strategies of `user` whose executables use exchange key `key`.
pub(crate) fn running_using_key(
    store: &Store,
    user: i64,
    key: i64,
) -> Result<Vec<i64>, StoreError> {
    let conn = store.paper();
    let running = conn.strategies(Strategies::RunningOfUser(user))?;
    let mut out = Vec::new();
    for r in running {
        if let Some((p, _)) = conn.profile(user, r.id)? {
            if Profile::new(&p).key_ids().contains(&key) {
                out.push(r.id);
            }
        }
    }
    Ok(out)
}

/// The caller's strategy named by `given`, the value of parameter `param`.
pub(crate) fn own_profile(
    cx: &Cx<'_>,
    param: &str,
    given: &str,
) -> Result<(i64, Map<String, Value>, StrategyRow), ApiError> {
    let id = record_id(param, given)?;
    let conn = cx.store().paper();
    let Some((p, _)) = conn.profile(cx.user(), id).map_err(sql)? else {
        return Err(refused(param, NO_RECORD));
    };
    let row = conn.row_of(cx.user(), id).map_err(sql)?;
    Ok((id, p, row))
}
