//! Trending news: the answers come from `trading_model::market::trending` (pure, over the
//! invented archive); this module reads the parameters, the caller's plan and the keywords
//! users added (stored by the generic resources as `news_keyword` records). Nothing is
//! written here.

use serde_json::Value;
use trading_model::market::trending;
use trading_model::{ApiError, Valid, typed};

use crate::context::RequestContext;

/// Whether the caller's plan includes every impact horizon: a signed call on a paid
/// plan (`subscription.pro_version`). Anonymous and Free callers see the public one.
fn subscribed(env: &RequestContext) -> bool {
    env.caller.as_ref().is_some_and(|c| {
        trading_model::plans::plan_details(&c.plan)["subscription"]["pro_version"] == true
    })
}

pub(super) fn call(path: &str, valid: &Valid, env: &RequestContext) -> Result<Value, ApiError> {
    let m = &*env.market;
    let now_s = env.now_ms / 1000;
    match path {
        "public/trending-news-data" => {
            let p = typed::PublicTrendingNewsData::from_valid(valid)?;
            trending::news_data(m, now_s, &p, subscribed(env))
        }
        "public/trending-news-watchlist" => {
            let p = typed::PublicTrendingNewsWatchlist::from_valid(valid)?;
            Ok(trending::watchlist_records(m, now_s, watchlist(env)?, &p))
        }
        "public/trending-news-sources" => Ok(trending::source_names()),
        "public/trending-news-statistics" => Ok(trending::statistics(m, now_s, &watchlist(env)?)),
        "public/trending-news-source-impact" => {
            let p = typed::PublicTrendingNewsSourceImpact::from_valid(valid)?;
            trending::source_impact(m, now_s, &p)
        }
        _ => Err(ApiError::new(trading_model::ErrorCode::EmptyData)),
    }
}

/// The watchlist with the keywords users added.
fn watchlist(env: &RequestContext) -> Result<Vec<(i64, String, String)>, ApiError> {
    let keywords = env
        .store
        .records_of_everyone("news_keyword")
        .map_err(crate::context::db)?;
    Ok(trending::watchlist(keywords.iter().filter_map(|(_, k)| {
        let name = k.fields.get("name").and_then(Value::as_str)?;
        Some((k.id, name))
    })))
}

/// News of the last 60 days about either asset of a trading code, newest first.
pub(super) fn relevant(
    m: &trading_model::market::Market,
    now: u64,
    valid: &Valid,
) -> Result<Value, ApiError> {
    let p = typed::ExchangeindexRelevantNews::from_valid(valid)?;
    trending::relevant(m, now, &p)
}
