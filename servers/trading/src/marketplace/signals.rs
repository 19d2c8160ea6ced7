//! The signal marketplace: signals, their iterations, the delayed feed, subscriptions
//! and the featured list.
//!
//! A signal belongs to its developer (the caller who added it). Triggering `open` starts an
//! iteration at the simulated market's mid price, `close` ends it; an iteration's result is
//! the price change in the direction of its side. Everyone sees every signal, but other
//! accounts see iterations only [`FEED_DELAY_MS`] after they happen (the feed is delayed
//! for everybody, the owner included, so that it is the same feed for all).

use serde_json::{Map, Value, json};
use trading_model::signal_payload::CUSTOM_FIELDS;
use trading_model::{ApiError, Endpoint, Page, Valid, typed};

use crate::context::{IdValue, RequestContext, db, opt_record_id, record_id, refused, round};
use crate::store::{Iteration, Signal};

/// How long after it happens an iteration opening or closing becomes visible to other
/// accounts and in the feed.
pub(crate) const FEED_DELAY_MS: u64 = 60_000;

/// Most points `signals-iteration-price-movement` samples along an iteration.
const MOVEMENT_POINTS: u64 = 20;

/// Signals `featured` shows.
const FEATURED: usize = 10;

impl Iteration {
    /// Result in percent in the direction of the side (a buy gains when the price rises).
    fn result_pct(&self, price: f64) -> f64 {
        let change = (price / self.open_price - 1.0) * 100.0;
        if self.side == "sell" { -change } else { change }
    }

    fn answer(&self) -> Value {
        json!({
            "id": self.id,
            "signal_id": self.signal_id,
            "number": self.number,
            "side": self.side,
            "status": if self.closed_ms.is_some() { "closed" } else { "open" },
            "opened_ms": self.opened_ms,
            "open_price": self.open_price,
            "closed_ms": self.closed_ms,
            "close_price": self.close_price,
            "result_pct": self.close_price.map(|p| round(self.result_pct(p), 4)),
        })
    }
}

/// The iteration as `viewer` may see it at `now`: the owner sees everything at once,
/// others (and the feed) only what happened at least [`FEED_DELAY_MS`] ago.
fn view(it: &Iteration, live: bool, now: u64) -> Option<Iteration> {
    if live {
        return Some(it.clone());
    }
    let horizon = now.saturating_sub(FEED_DELAY_MS);
    if it.opened_ms > horizon {
        return None;
    }
    let mut seen = it.clone();
    if it.closed_ms.is_some_and(|c| c > horizon) {
        seen.closed_ms = None;
        seen.close_price = None;
    }
    Some(seen)
}

fn viewed(its: &[Iteration], live: bool, now: u64) -> Vec<Iteration> {
    its.iter().filter_map(|i| view(i, live, now)).collect()
}

/// Figures of a signal over the iterations a viewer sees.
fn stats(its: &[Iteration]) -> Value {
    let results: Vec<f64> = its
        .iter()
        .filter_map(|i| i.close_price.map(|p| i.result_pct(p)))
        .collect();
    let wins = results.iter().filter(|r| **r > 0.0).count();
    let compounded = results.iter().fold(1.0, |acc, r| acc * (1.0 + r / 100.0));
    json!({
        "iterations": its.len(),
        "closed": results.len(),
        "open": its.iter().any(|i| i.closed_ms.is_none()),
        "wins": wins,
        "losses": results.len() - wins,
        "return_pct": round(results.iter().sum(), 4),
        "compounded_pct": round((compounded - 1.0) * 100.0, 4),
    })
}

fn signal_answer(s: &Signal, its: &[Iteration]) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(s.id));
    out.insert("name".into(), json!(s.name));
    out.insert("code".into(), json!(s.code));
    out.insert("side".into(), json!(s.side));
    out.insert("description".into(), json!(s.description));
    for (i, name) in CUSTOM_FIELDS.iter().enumerate() {
        out.insert(
            (*name).into(),
            json!(s.custom.get(i).cloned().unwrap_or_default()),
        );
    }
    out.insert("developer".into(), json!(s.user_id));
    out.insert("statistics".into(), stats(its));
    out.insert("time_created".into(), json!(s.created_ms / 1000));
    out.insert("time_updated".into(), json!(s.updated_ms / 1000));
    Value::Object(out)
}

fn not_yours() -> ApiError {
    refused("id", "No such signal on this account.")
}

/// A signal of the caller (owner-only endpoints), named by `given` (the `id` parameter).
fn own_signal(
    env: &RequestContext,
    user: i64,
    given: &(impl IdValue + ?Sized),
) -> Result<Signal, ApiError> {
    let id = record_id("id", given).map_err(|_| not_yours())?;
    env.store
        .signal(id)
        .map_err(db)?
        .filter(|s| s.user_id == user)
        .ok_or_else(not_yours)
}

/// Any signal (marketplace endpoints).
fn any_signal(env: &RequestContext, id: i64) -> Result<Signal, ApiError> {
    env.store
        .signal(id)
        .map_err(db)?
        .ok_or_else(|| refused("id", "No such signal."))
}

pub(super) fn call(
    path: &str,
    ep: &Endpoint,
    valid: &Valid,
    env: &RequestContext,
    user: i64,
) -> Result<Value, ApiError> {
    let now = env.now_ms;
    match path {
        "marketplace/signals-add" => {
            let given = typed::MarketplaceSignalsAdd::from_valid(valid)?;
            let key = given.key.trim();
            let p = trading_model::signal_payload::parse(&given.payload)
                .map_err(|e| refused("payload", e))?;
            if env.market.symbol(&p.code).is_none() {
                return Err(refused(
                    "payload",
                    format!(
                        "{} is not listed on the market (see public/symbols).",
                        p.code
                    ),
                ));
            }
            let id = env.store.insert_signal(user, key, &p, now).map_err(db)?;
            let s = any_signal(env, id)?;
            Ok(signal_answer(&s, &[]))
        }
        "marketplace/signals-edit" => {
            let p = typed::MarketplaceSignalsEdit::from_valid(valid)?;
            let mut s = own_signal(env, user, &p.id)?;
            if let Some(name) = p.name.as_deref().map(str::trim) {
                if name.chars().count() < 3 || name.chars().count() > 64 {
                    return Err(refused("name", "name needs 3 to 64 characters."));
                }
                s.name = name.to_owned();
            }
            s.custom.resize(CUSTOM_FIELDS.len(), String::new());
            let custom = [&p.custom_1, &p.custom_2, &p.custom_3, &p.custom_4];
            for (i, (field, v)) in CUSTOM_FIELDS.iter().zip(custom).enumerate() {
                if let Some(v) = v {
                    if v.chars().count() > 256 {
                        return Err(refused(field, "at most 256 characters."));
                    }
                    s.custom[i] = v.trim().to_owned();
                }
            }
            env.store.update_signal(&s, now).map_err(db)?;
            let s = any_signal(env, s.id)?;
            let its = env.store.iterations(s.id).map_err(db)?;
            Ok(signal_answer(&s, &its))
        }
        "marketplace/signals-trigger" => trigger(env, user, valid),
        "marketplace/signals-position" => {
            let p = typed::MarketplaceSignalsPosition::from_valid(valid)?;
            let only = opt_record_id("id", p.id.as_ref()).map_err(|_| not_yours())?;
            let mine = env.store.signals(Some(user)).map_err(db)?;
            if only.is_some_and(|id| !mine.iter().any(|s| s.id == id)) {
                return Err(not_yours());
            }
            let mut out = Vec::new();
            for s in mine.iter().filter(|s| only.is_none_or(|id| id == s.id)) {
                let its = env.store.iterations(s.id).map_err(db)?;
                let open = its.iter().rev().find(|i| i.closed_ms.is_none());
                let price = env.market.mid(&s.code, now);
                out.push(json!({
                    "id": s.id,
                    "name": s.name,
                    "code": s.code,
                    "position": match open.map(|i| i.side.as_str()) {
                        Some("buy") => "long",
                        Some(_) => "short",
                        None => "flat",
                    },
                    "iteration": open.map(Iteration::answer),
                    "current_price": price,
                    "result_pct": open.zip(price).map(|(i, p)| round(i.result_pct(p), 4)),
                    "statistics": stats(&its),
                }));
            }
            Ok(Value::Array(out))
        }
        "marketplace/signal-developer" => {
            let given = typed::MarketplaceSignalDeveloper::from_valid(valid)?;
            let dev =
                record_id("id", &given.id).map_err(|_| refused("id", "No such developer."))?;
            let account = env
                .store
                .user(dev)
                .map_err(db)?
                .ok_or_else(|| refused("id", "No such developer."))?;
            let live = dev == user;
            let mut signals = Vec::new();
            let mut all = Vec::new();
            for s in env.store.signals(Some(dev)).map_err(db)? {
                let its = viewed(&env.store.iterations(s.id).map_err(db)?, live, now);
                signals.push(signal_answer(&s, &its));
                all.extend(its);
            }
            Ok(json!({
                "id": dev,
                "name": account.name,
                "member_since": account.created_ms / 1000,
                "signals": signals,
                "statistics": stats(&all),
            }))
        }
        "marketplace/signal-reset" => {
            let given = typed::MarketplaceSignalReset::from_valid(valid)?;
            let s = own_signal(env, user, &given.id)?;
            let n = env.store.delete_iterations(s.id).map_err(db)?;
            Ok(json!({"id": s.id, "reset": true, "iterations_deleted": n}))
        }
        "marketplace/signal-delete" => {
            let given = typed::MarketplaceSignalDelete::from_valid(valid)?;
            let s = own_signal(env, user, &given.id)?;
            env.store.delete_signal(s.id).map_err(db)?;
            Ok(json!({"id": s.id, "deleted": true}))
        }
        "marketplace/signals-feed" => feed(ep, env, valid),
        "marketplace/signals-iteration-price-movement" => movement(env, user, valid),
        "marketplace/subscription-manage" => {
            let p = typed::MarketplaceSubscriptionManage::from_valid(valid)?;
            let s = any_signal(env, record_id("id", &p.id)?)?;
            let subscribe = p.action == "subscribe";
            if subscribe && s.user_id == user {
                return Err(refused("id", "You cannot subscribe to your own signal."));
            }
            let changed = env
                .store
                .set_subscription(user, s.id, subscribe.then_some(now))
                .map_err(db)?;
            if !changed {
                return Err(refused(
                    "action",
                    if subscribe {
                        "Already subscribed to this signal."
                    } else {
                        "Not subscribed to this signal."
                    },
                ));
            }
            Ok(json!({
                "id": s.id,
                "subscribed": subscribe,
                "subscribers": env.store.subscribers(s.id).map_err(db)?,
            }))
        }
        "marketplace/subscription-information" => {
            let p = typed::MarketplaceSubscriptionInformation::from_valid(valid)?;
            let only = opt_record_id("id", p.id.as_ref())?;
            let mut out = Vec::new();
            for (sid, since) in subscribed(env, user, only)? {
                let Some(s) = env.store.signal(sid).map_err(db)? else {
                    continue;
                };
                let its = viewed(&env.store.iterations(s.id).map_err(db)?, false, now);
                let since_then: Vec<Iteration> =
                    its.into_iter().filter(|i| i.opened_ms >= since).collect();
                out.push(json!({
                    "signal_id": s.id,
                    "name": s.name,
                    "code": s.code,
                    "developer": s.user_id,
                    "subscribed_ms": since,
                    "days_subscribed": now.saturating_sub(since) / 86_400_000,
                    "latest_iteration": since_then.last().map(Iteration::answer),
                    "statistics_since_subscribing": stats(&since_then),
                }));
            }
            Ok(Value::Array(out))
        }
        "marketplace/backtested-subscriptions" => {
            let p = typed::MarketplaceBacktestedSubscriptions::from_valid(valid)?;
            let only = opt_record_id("id", p.id.as_ref())?;
            let mut out = Vec::new();
            for (sid, since) in subscribed(env, user, only)? {
                let Some(s) = env.store.signal(sid).map_err(db)? else {
                    continue;
                };
                let its = viewed(&env.store.iterations(s.id).map_err(db)?, false, now);
                out.push(backtest(&s, since, &its));
            }
            Ok(Value::Array(out))
        }
        "marketplace/featured" => {
            let mut rows = Vec::new();
            for s in env.store.signals(None).map_err(db)? {
                let its = viewed(&env.store.iterations(s.id).map_err(db)?, false, now);
                let st = stats(&its);
                let score = st["compounded_pct"].as_f64().unwrap_or(0.0);
                let closed = st["closed"].as_u64().unwrap_or(0);
                let mut a = signal_answer(&s, &its);
                a["subscribers"] = json!(env.store.subscribers(s.id).map_err(db)?);
                rows.push((closed > 0, score, its.len(), a));
            }
            // Signals with results first, best compounded result first; then the busiest.
            rows.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)).then(b.2.cmp(&a.2)));
            Ok(Value::Array(
                rows.into_iter()
                    .take(FEATURED)
                    .enumerate()
                    .map(|(i, mut r)| {
                        r.3["rank"] = json!(i + 1);
                        r.3
                    })
                    .collect(),
            ))
        }
        _ => Err(ApiError::new(trading_model::ErrorCode::EmptyData).with_status(501)),
    }
}

/// The caller's subscriptions, or the one to `only` (refused when there is none).
fn subscribed(
    env: &RequestContext,
    user: i64,
    only: Option<i64>,
) -> Result<Vec<(i64, u64)>, ApiError> {
    let subs = env.store.subscriptions(user).map_err(db)?;
    match only {
        None => Ok(subs),
        Some(id) => {
            let one: Vec<_> = subs.into_iter().filter(|(s, _)| *s == id).collect();
            if one.is_empty() {
                return Err(refused("id", "Not subscribed to this signal."));
            }
            Ok(one)
        }
    }
}

/// Replays a signal's closed iterations on 1000 units of the quote asset, each iteration
/// investing the whole balance: final balance, compounded return and the largest drawdown.
fn backtest(s: &Signal, since: u64, its: &[Iteration]) -> Value {
    const START: f64 = 1000.0;
    let mut balance = START;
    let mut peak = START;
    let mut drawdown: f64 = 0.0;
    let mut trades = Vec::new();
    for i in its {
        let Some(p) = i.close_price else { continue };
        let r = i.result_pct(p);
        balance *= 1.0 + r / 100.0;
        peak = peak.max(balance);
        drawdown = drawdown.max((peak - balance) / peak * 100.0);
        trades.push(
            json!({"iteration": i.id, "result_pct": round(r, 4), "balance": round(balance, 2)}),
        );
    }
    json!({
        "signal_id": s.id,
        "name": s.name,
        "code": s.code,
        "subscribed_ms": since,
        "starting_balance": START,
        "final_balance": round(balance, 2),
        "return_pct": round((balance / START - 1.0) * 100.0, 4),
        "max_drawdown_pct": round(drawdown, 4),
        "trades": trades,
    })
}

fn trigger(env: &RequestContext, user: i64, valid: &Valid) -> Result<Value, ApiError> {
    let now = env.now_ms;
    let p = typed::MarketplaceSignalsTrigger::from_valid(valid)?;
    let s = own_signal(env, user, &p.id)?;
    let (side, action) = (p.signal.as_str(), p.action.as_str());
    let its = env.store.iterations(s.id).map_err(db)?;
    let open = its.iter().rev().find(|i| i.closed_ms.is_none()).cloned();
    let price = env
        .market
        .mid(&s.code, now)
        .ok_or_else(|| refused("id", format!("{} has no market price.", s.code)))?;
    let iteration_id = match (action, open) {
        ("open", Some(o)) => {
            return Err(refused(
                "action",
                format!(
                    "Iteration {} is still open; close it (signal {}) first.",
                    o.id,
                    opposite(&o.side)
                ),
            ));
        }
        ("open", None) => {
            if s.side != "both" && s.side != side {
                return Err(refused(
                    "signal",
                    format!("This signal only opens {} iterations.", s.side),
                ));
            }
            let number = its.last().map_or(1, |i| i.number + 1);
            env.store
                .open_iteration(s.id, number, side, now, price)
                .map_err(db)?
        }
        (_, None) => {
            return Err(refused("action", "No iteration is open; open one first."));
        }
        (_, Some(o)) => {
            // Closing a buy is a sell and the other way round: the matching signal.
            if side != opposite(&o.side) {
                return Err(refused(
                    "signal",
                    format!(
                        "Iteration {} is a {}; close it with signal {}.",
                        o.id,
                        o.side,
                        opposite(&o.side)
                    ),
                ));
            }
            env.store.close_iteration(o.id, now, price).map_err(db)?;
            o.id
        }
    };
    let it = env
        .store
        .iterations(s.id)
        .map_err(db)?
        .into_iter()
        .find(|i| i.id == iteration_id)
        .ok_or_else(|| refused("id", "No such signal on this account."))?;
    let mut a = it.answer();
    a["visible_in_feed_ms"] = json!(now + FEED_DELAY_MS);
    Ok(a)
}

fn opposite(side: &str) -> &'static str {
    if side == "buy" { "sell" } else { "buy" }
}

fn feed(ep: &Endpoint, env: &RequestContext, valid: &Valid) -> Result<Value, ApiError> {
    let now = env.now_ms;
    let p = typed::MarketplaceSignalsFeed::from_valid(valid)?;
    let only = match p.id.as_deref() {
        Some(t) => Some(
            t.trim()
                .parse::<i64>()
                .map_err(|_| refused("id", "A signal id is a number."))?,
        ),
        None => None,
    };
    let code = p.code.map(|c| c.trim().to_ascii_lowercase());
    let min_iterations = p.min_iterations.unwrap_or(0);
    let from_iteration = p.from_iteration.unwrap_or(0);
    let more = p.more.unwrap_or(false);
    let page = Page::of(ep, valid).unwrap_or(Page {
        limit: 100,
        pagenumber: 1,
    });
    let mut records = Vec::new();
    for s in env.store.signals(None).map_err(db)?.into_iter().rev() {
        if only.is_some_and(|id| id != s.id) || code.as_ref().is_some_and(|c| *c != s.code) {
            continue;
        }
        let its = viewed(&env.store.iterations(s.id).map_err(db)?, false, now);
        if i64::try_from(its.len()).unwrap_or(i64::MAX) < min_iterations {
            continue;
        }
        let mut children: Vec<Value> = its
            .iter()
            .rev()
            .filter(|i| i.number >= from_iteration)
            .map(Iteration::answer)
            .collect();
        let matching = children.len();
        children = if more {
            let (rows, _) = page.apply(&children.into_iter().rev().collect::<Vec<_>>());
            rows
        } else {
            children.into_iter().take(1).collect()
        };
        let mut a = signal_answer(&s, &its);
        a["iteration_children"] = json!(children);
        a["iteration_children_total"] = json!(matching);
        records.push(a);
    }
    Ok(json!({
        "records": records,
        "showing": records.len(),
        "total": records.len(),
        "page": page.pagenumber,
        "delay_ms": FEED_DELAY_MS,
        "as_of_ms": now.saturating_sub(FEED_DELAY_MS),
    }))
}

fn movement(env: &RequestContext, user: i64, valid: &Valid) -> Result<Value, ApiError> {
    let now = env.now_ms;
    let p = typed::MarketplaceSignalsIterationPriceMovement::from_valid(valid)?;
    let s = any_signal(
        env,
        record_id("id", &p.id).map_err(|_| refused("id", "No such signal."))?,
    )?;
    let iteration = record_id("iteration", &p.iteration)
        .map_err(|_| refused("iteration", "No such iteration of this signal."))?;
    let live = s.user_id == user;
    let it = env
        .store
        .iterations(s.id)
        .map_err(db)?
        .iter()
        .filter(|i| i.id == iteration)
        .find_map(|i| view(i, live, now))
        .ok_or_else(|| refused("iteration", "No such iteration of this signal."))?;
    let horizon = if live {
        now
    } else {
        now.saturating_sub(FEED_DELAY_MS)
    };
    let end = it.closed_ms.unwrap_or(horizon).max(it.opened_ms);
    let span = end - it.opened_ms;
    let n = (span / 1000 + 1).min(MOVEMENT_POINTS);
    let mut points = Vec::new();
    for k in 0..n {
        let t = if n == 1 {
            it.opened_ms
        } else {
            it.opened_ms + span * k / (n - 1)
        };
        if let Some(p) = env.market.mid(&s.code, t) {
            points.push((t, p));
        }
    }
    let last = it
        .close_price
        .or_else(|| points.last().map(|p| p.1))
        .unwrap_or(it.open_price);
    let high = points.iter().map(|p| p.1).fold(it.open_price, f64::max);
    let low = points.iter().map(|p| p.1).fold(it.open_price, f64::min);
    Ok(json!({
        "signal_id": s.id,
        "iteration": it.answer(),
        "code": s.code,
        "from_ms": it.opened_ms,
        "to_ms": end,
        "open_price": it.open_price,
        "last_price": last,
        "high": high,
        "low": low,
        "change": last - it.open_price,
        "change_pct": round((last / it.open_price - 1.0) * 100.0, 4),
        "result_pct": round(it.result_pct(last), 4),
        "points": points.iter().map(|(t, p)| json!({"time_ms": t, "price": p})).collect::<Vec<_>>(),
    }))
}
