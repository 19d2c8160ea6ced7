//! The public market-data endpoints: the answers come from `trading_model::market::public`
//! (pure, from the simulated books); published articles are read from the store here.

use serde_json::{Value, json};
use trading_model::market::public::{self as answers, paged};
use trading_model::{ApiError, Endpoint, Valid, typed};

use super::answers::page;
use crate::context::{RequestContext, refused};

pub(super) fn call(
    path: &str,
    ep: &Endpoint,
    valid: &Valid,
    env: &RequestContext,
) -> Result<Value, ApiError> {
    let m = &*env.market;
    let now = env.now_ms;
    match path {
        "public/spreads/data" => Ok(answers::spreads_data(m, now)),
        "public/fetch-symbol-price" => {
            let p = typed::PublicFetchSymbolPrice::from_valid(valid)?;
            answers::fetch_symbol_price(m, now, &p)
        }
        "public/bitcoin-price-tracker" => {
            let p = typed::PublicBitcoinPriceTracker::from_valid(valid)?;
            Ok(answers::price_tracker(m, now, &p))
        }
        "public/fetch-symbol-trades" => {
            let p = typed::PublicFetchSymbolTrades::from_valid(valid)?;
            answers::fetch_trades(m, now, &p)
        }
        "public/realtime-bitcoin-profit" => {
            let (records, info) = page(ep, valid).apply(&answers::arbitrage(m, now));
            Ok(paged(records, info))
        }
        "public/exchange-information" => Ok(answers::exchange_information(m, now)),
        "public/tradingview-charts" => {
            let p = typed::PublicTradingviewCharts::from_valid(valid)?;
            answers::tradingview(m, &p)
        }
        "public/match-pair" => {
            let p = typed::PublicMatchPair::from_valid(valid)?;
            Ok(answers::match_pair(m, page(ep, valid), &p))
        }
        "public/fetch-spread-data" => {
            let p = typed::PublicFetchSpreadData::from_valid(valid)?;
            answers::fetch_spread_data(m, now, &p)
        }
        "public/spreads-list" => {
            let p = typed::PublicSpreadsList::from_valid(valid)?;
            Ok(answers::spreads_list(m, page(ep, valid), &p))
        }
        "public/bitcoin-information" => Ok(answers::bitcoin_information(m, now)),
        "public/supported-wallets" => Ok(answers::supported_wallets(now)),
        "public/fetch-articles" => fetch_articles(ep, valid, env),
        _ => Err(ApiError::new(trading_model::ErrorCode::EmptyData)),
    }
}

fn fetch_articles(ep: &Endpoint, valid: &Valid, env: &RequestContext) -> Result<Value, ApiError> {
    let p = typed::PublicFetchArticles::from_valid(valid)?;
    let id = p.article_id;
    let title = Some(p.title_contains)
        .filter(|t| t != "0")
        .map(|t| t.to_lowercase());
    let now_s = i64::try_from(env.now_ms / 1000).unwrap_or(i64::MAX);
    let articles = env
        .store
        .records_of_everyone("article")
        .map_err(crate::context::db)?;
    let mut published = Vec::new();
    for (uid, article) in articles {
        let (rid, f) = (article.id, &article.fields);
        let (created, updated) = (article.created_ms, article.updated_ms);
        let publish = f
            .get("publishdate")
            .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
            .unwrap_or(0);
        if publish > now_s || (id != 0 && rid != id) {
            continue;
        }
        let t = f.get("title").and_then(Value::as_str).unwrap_or("");
        if title
            .as_ref()
            .is_some_and(|w| !t.to_lowercase().contains(w))
        {
            continue;
        }
        let mut rec = f.clone();
        rec.insert("id".into(), json!(rid));
        rec.insert("author_uid".into(), json!(uid));
        rec.insert("time_published".into(), json!(publish));
        rec.insert("time_created".into(), json!(created / 1000));
        rec.insert("time_updated".into(), json!(updated / 1000));
        published.push(Value::Object(rec));
    }
    if id != 0 && published.is_empty() {
        return Err(refused("article_id", "No published article has this id."));
    }
    let (records, info) = page(ep, valid).apply(&published);
    Ok(paged(records, info))
}
