//! The signal marketplace and the weekly competitions ranked by signal results.
//!
//! A signal belongs to its developer (the caller who added it). Triggering `open` starts an
//! iteration at the simulated market's mid price, `close` ends it; an iteration's result is
//! the price change in the direction of its side. Everyone sees every signal, but other
//! accounts see iterations only [`FEED_DELAY_MS`] after they happen (the feed is delayed
//! for everybody, the owner included, so that it is the same feed for all).

use rusqlite::{OptionalExtension, params};
use serde_json::{Map, Value, json};
use trading_model::signal_payload::{CUSTOM_FIELDS, SignalPayload};
use trading_model::{ApiError, Endpoint, Page, Valid};

use crate::context::{RequestContext, round};
use crate::context::{db, id_param, ms, opt_id, refused};
use crate::store::{Store, StoreError};

/// How long after it happens an iteration opening or closing becomes visible to other
/// accounts and in the feed.
pub(crate) const FEED_DELAY_MS: u64 = 60_000;

/// Length of one competition; competitions follow each other without gap.
pub(crate) const COMPETITION_MS: u64 = 7 * 86_400_000;

/// Most points `signals-iteration-price-movement` samples along an iteration.
const MOVEMENT_POINTS: u64 = 20;

/// Signals `featured` shows.
const FEATURED: usize = 10;

#[derive(Debug, Clone)]
struct Signal {
    id: i64,
    user_id: i64,
    name: String,
    code: String,
    side: String,
    description: String,
    custom: Vec<String>,
    created_ms: u64,
    updated_ms: u64,
}

#[derive(Debug, Clone)]
struct Iteration {
    id: i64,
    signal_id: i64,
    number: i64,
    side: String,
    opened_ms: u64,
    open_price: f64,
    closed_ms: Option<u64>,
    close_price: Option<f64>,
}

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

const SIGNAL_COLUMNS: &str =
    "id, user_id, name, code, side, description, custom, created_ms, updated_ms";

fn signal_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Signal> {
    let custom: String = r.get(6)?;
    Ok(Signal {
        id: r.get(0)?,
        user_id: r.get(1)?,
        name: r.get(2)?,
        code: r.get(3)?,
        side: r.get(4)?,
        description: r.get(5)?,
        custom: serde_json::from_str(&custom).unwrap_or_default(),
        created_ms: u64::try_from(r.get::<_, i64>(7)?).unwrap_or(0),
        updated_ms: u64::try_from(r.get::<_, i64>(8)?).unwrap_or(0),
    })
}

fn iteration_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Iteration> {
    Ok(Iteration {
        id: r.get(0)?,
        signal_id: r.get(1)?,
        number: r.get(2)?,
        side: r.get(3)?,
        opened_ms: u64::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
        open_price: r.get(5)?,
        closed_ms: r
            .get::<_, Option<i64>>(6)?
            .map(|v| u64::try_from(v).unwrap_or(0)),
        close_price: r.get(7)?,
    })
}

impl Store {
    fn insert_signal(
        &self,
        user: i64,
        key: &str,
        p: &SignalPayload,
        now: u64,
    ) -> Result<i64, StoreError> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO extras_signals (user_id, developer_key, name, code, side, description, custom, created_ms, updated_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
            params![
                user,
                key,
                p.name,
                p.code,
                p.side,
                p.description,
                json!(p.custom).to_string(),
                ms(now)
            ],
        )?;
        Ok(conn.last_insert_rowid())
    }

    fn signal(&self, id: i64) -> Result<Option<Signal>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                &format!("SELECT {SIGNAL_COLUMNS} FROM extras_signals WHERE id = ?1"),
                [id],
                signal_row,
            )
            .optional()?)
    }

    /// Signals oldest first, of one developer or of everybody.
    fn signals(&self, owner: Option<i64>) -> Result<Vec<Signal>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {SIGNAL_COLUMNS} FROM extras_signals WHERE ?1 IS NULL OR user_id = ?1 ORDER BY id"
        ))?;
        let rows = stmt
            .query_map([owner], signal_row)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    fn update_signal(&self, s: &Signal, now: u64) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE extras_signals SET name = ?1, custom = ?2, updated_ms = ?3 WHERE id = ?4",
            params![s.name, json!(s.custom).to_string(), ms(now), s.id],
        )?;
        Ok(())
    }

    /// Iterations of a signal, oldest first.
    fn iterations(&self, signal: i64) -> Result<Vec<Iteration>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, signal_id, number, side, opened_ms, open_price, closed_ms, close_price
             FROM extras_iterations WHERE signal_id = ?1 ORDER BY id",
        )?;
        let rows = stmt
            .query_map([signal], iteration_row)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    fn open_iteration(
        &self,
        signal: i64,
        number: i64,
        side: &str,
        now: u64,
        price: f64,
    ) -> Result<i64, StoreError> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO extras_iterations (signal_id, number, side, opened_ms, open_price)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![signal, number, side, ms(now), price],
        )?;
        Ok(conn.last_insert_rowid())
    }

    fn close_iteration(&self, id: i64, now: u64, price: f64) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE extras_iterations SET closed_ms = ?1, close_price = ?2 WHERE id = ?3",
            params![ms(now), price, id],
        )?;
        Ok(())
    }

    fn delete_iterations(&self, signal: i64) -> Result<usize, StoreError> {
        Ok(self.conn().execute(
            "DELETE FROM extras_iterations WHERE signal_id = ?1",
            [signal],
        )?)
    }

    fn delete_signal(&self, signal: i64) -> Result<(), StoreError> {
        let conn = self.conn();
        conn.execute(
            "DELETE FROM extras_iterations WHERE signal_id = ?1",
            [signal],
        )?;
        conn.execute(
            "DELETE FROM extras_subscriptions WHERE signal_id = ?1",
            [signal],
        )?;
        conn.execute("DELETE FROM extras_signals WHERE id = ?1", [signal])?;
        Ok(())
    }

    /// `(signal id, since)` of a user's subscriptions, oldest first.
    fn subscriptions(&self, user: i64) -> Result<Vec<(i64, u64)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT signal_id, since_ms FROM extras_subscriptions WHERE user_id = ?1 ORDER BY since_ms, signal_id",
        )?;
        let rows = stmt
            .query_map([user], |r| {
                Ok((r.get(0)?, u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0)))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    fn subscribers(&self, signal: i64) -> Result<u64, StoreError> {
        let n: i64 = self.conn().query_row(
            "SELECT COUNT(*) FROM extras_subscriptions WHERE signal_id = ?1",
            [signal],
            |r| r.get(0),
        )?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Subscribes (`Some(since)`) or unsubscribes (`None`); false when nothing changed.
    fn set_subscription(
        &self,
        user: i64,
        signal: i64,
        since: Option<u64>,
    ) -> Result<bool, StoreError> {
        let conn = self.conn();
        let n = match since {
            Some(t) => conn.execute(
                "INSERT OR IGNORE INTO extras_subscriptions (user_id, signal_id, since_ms) VALUES (?1, ?2, ?3)",
                params![user, signal, ms(t)],
            )?,
            None => conn.execute(
                "DELETE FROM extras_subscriptions WHERE user_id = ?1 AND signal_id = ?2",
                params![user, signal],
            )?,
        };
        Ok(n == 1)
    }

    /// Users enrolled in a competition, in order of enrolment.
    fn entrants(&self, competition: i64) -> Result<Vec<i64>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT user_id, fields FROM records WHERE kind = 'competition_entry' ORDER BY id",
        )?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows
            .into_iter()
            .filter(|(_, f)| {
                serde_json::from_str::<Value>(f)
                    .ok()
                    .and_then(|v| v["competition_id"].as_i64())
                    == Some(competition)
            })
            .map(|(u, _)| u)
            .collect())
    }

    /// `(developer, result in percent)` of every iteration closed in `[from, to)`.
    fn closed_results(&self, from: u64, to: u64) -> Result<Vec<(i64, f64)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT s.user_id, i.side, i.open_price, i.close_price FROM extras_iterations i
             JOIN extras_signals s ON s.id = i.signal_id
             WHERE i.closed_ms >= ?1 AND i.closed_ms < ?2",
        )?;
        let rows = stmt
            .query_map(params![ms(from), ms(to)], |r| {
                let side: String = r.get(1)?;
                let open: f64 = r.get(2)?;
                let close: f64 = r.get(3)?;
                let change = (close / open - 1.0) * 100.0;
                Ok((r.get(0)?, if side == "sell" { -change } else { change }))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
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

/// A signal of the caller (owner-only endpoints).
fn own_signal(env: &RequestContext, user: i64, valid: &Valid) -> Result<Signal, ApiError> {
    let id = id_param(valid, "id").map_err(|_| not_yours())?;
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
            let key = valid.text("key").unwrap_or("").trim();
            let payload = valid.text("payload").unwrap_or("");
            let p =
                trading_model::signal_payload::parse(payload).map_err(|e| refused("payload", e))?;
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
            let mut s = own_signal(env, user, valid)?;
            if let Some(name) = valid.text("name").map(str::trim) {
                if name.chars().count() < 3 || name.chars().count() > 64 {
                    return Err(refused("name", "name needs 3 to 64 characters."));
                }
                s.name = name.to_owned();
            }
            s.custom.resize(CUSTOM_FIELDS.len(), String::new());
            for (i, field) in CUSTOM_FIELDS.iter().enumerate() {
                if let Some(v) = valid.text(field) {
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
            let only = opt_id(valid, "id").map_err(|_| not_yours())?;
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
            let dev = id_param(valid, "id").map_err(|_| refused("id", "No such developer."))?;
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
            let s = own_signal(env, user, valid)?;
            let n = env.store.delete_iterations(s.id).map_err(db)?;
            Ok(json!({"id": s.id, "reset": true, "iterations_deleted": n}))
        }
        "marketplace/signal-delete" => {
            let s = own_signal(env, user, valid)?;
            env.store.delete_signal(s.id).map_err(db)?;
            Ok(json!({"id": s.id, "deleted": true}))
        }
        "marketplace/signals-feed" => feed(ep, env, valid),
        "marketplace/signals-iteration-price-movement" => movement(env, user, valid),
        "marketplace/subscription-manage" => {
            let s = any_signal(env, id_param(valid, "id")?)?;
            let subscribe = valid.text("action") == Some("subscribe");
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
            let only = opt_id(valid, "id")?;
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
            let only = opt_id(valid, "id")?;
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
        "competitions/list" => competitions(env, user),
        "competitions/join" | "competitions/leave" => enrol(env, user, valid, path),
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
    let s = own_signal(env, user, valid)?;
    let side = valid.text("signal").unwrap_or("buy");
    let action = valid.text("action").unwrap_or("open");
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
    let only = match valid.text("id") {
        Some(t) => Some(
            t.trim()
                .parse::<i64>()
                .map_err(|_| refused("id", "A signal id is a number."))?,
        ),
        None => None,
    };
    let code = valid.text("code").map(|c| c.trim().to_ascii_lowercase());
    let min_iterations = valid.integer("min_iterations").unwrap_or(0);
    let from_iteration = valid.integer("from_iteration").unwrap_or(0);
    let more = valid.boolean("more").unwrap_or(false);
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
    let s = any_signal(
        env,
        id_param(valid, "id").map_err(|_| refused("id", "No such signal."))?,
    )?;
    let iteration = id_param(valid, "iteration")
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

/// The competition running at `t`: its number (the id) and its bounds.
fn competition_at(t: u64) -> i64 {
    i64::try_from(t / COMPETITION_MS).unwrap_or(i64::MAX)
}

fn competition_bounds(id: i64) -> (u64, u64) {
    let start = u64::try_from(id).unwrap_or(0) * COMPETITION_MS;
    (start, start + COMPETITION_MS)
}

fn competition_answer(env: &RequestContext, user: i64, id: i64) -> Result<Value, ApiError> {
    let now = env.now_ms;
    let (start, end) = competition_bounds(id);
    let status = if now >= end {
        "finished"
    } else if now >= start {
        "running"
    } else {
        "upcoming"
    };
    let entrants = env.store.entrants(id).map_err(db)?;
    let results = if now > start {
        env.store
            .closed_results(start, end.min(now + 1))
            .map_err(db)?
    } else {
        Vec::new()
    };
    let mut board: Vec<(i64, f64, usize)> = entrants
        .iter()
        .map(|&u| {
            let mine: Vec<f64> = results
                .iter()
                .filter(|(who, _)| *who == u)
                .map(|r| r.1)
                .collect();
            (u, mine.iter().sum(), mine.len())
        })
        .collect();
    board.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
    let mut leaderboard = Vec::new();
    for (rank, (u, score, n)) in board.into_iter().enumerate() {
        let name = env.store.user(u).map_err(db)?.map(|x| x.name);
        leaderboard.push(json!({
            "rank": rank + 1,
            "user_id": u,
            "name": name,
            "return_pct": round(score, 4),
            "iterations_closed": n,
        }));
    }
    Ok(json!({
        "id": id,
        "name": format!("Weekly signal cup #{id}"),
        "rules": "Sum of the results (percent) of the entrants' signal iterations closed during the week.",
        "starts_ms": start,
        "ends_ms": end,
        "status": status,
        "enrolled": entrants.contains(&user),
        "participants": entrants.len(),
        "leaderboard": leaderboard,
    }))
}

/// The last finished competition, the running one and the next two.
fn competitions(env: &RequestContext, user: i64) -> Result<Value, ApiError> {
    let current = competition_at(env.now_ms);
    let mut out = Vec::new();
    for id in (current - 1)..=(current + 2) {
        if id >= 0 {
            out.push(competition_answer(env, user, id)?);
        }
    }
    Ok(Value::Array(out))
}

fn enrol(env: &RequestContext, user: i64, valid: &Valid, path: &str) -> Result<Value, ApiError> {
    let id = id_param(valid, "id")?;
    let current = competition_at(env.now_ms);
    if id > current + 2 {
        return Err(refused(
            "id",
            "No such competition (enrolment opens two weeks ahead).",
        ));
    }
    if id < current {
        return Err(refused("id", "This competition has finished."));
    }
    let (entries, _) = env
        .store
        .list_records("competition_entry", user, trading_model::MAX_LIMIT, 0)
        .map_err(db)?;
    let mine = entries
        .iter()
        .find(|r| r.fields.get("competition_id").and_then(Value::as_i64) == Some(id));
    if path == "competitions/join" {
        if mine.is_some() {
            return Err(refused("id", "Already enrolled in this competition."));
        }
        let mut f = Map::new();
        f.insert("competition_id".into(), json!(id));
        env.store
            .insert_record("competition_entry", user, &f, None, env.now_ms)
            .map_err(db)?;
    } else {
        let Some(entry) = mine else {
            return Err(refused("id", "Not enrolled in this competition."));
        };
        env.store
            .delete_record("competition_entry", user, entry.id)
            .map_err(db)?;
    }
    competition_answer(env, user, id)
}
