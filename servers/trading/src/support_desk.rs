//! Support tickets and settings, calendar reminders and article earnings.

use serde_json::{Map, Value, json};
use trading_model::{ApiError, Endpoint, Valid, typed};

use crate::context::{RequestContext, db, for_caller, record_id, refused, round};
use crate::resources::answer;

/// Endpoints answered here.
const PATHS: [&str; 5] = [
    "support/add-ticket",
    "support/update-ticket",
    "support/settings",
    "calendar/add-reminder",
    "calendar/list-schedule",
];

/// Whether this module answers `path`.
pub(crate) fn handles(path: &str) -> bool {
    PATHS.contains(&path) || path == "articles/check-earnings"
}

/// Answers `ep` if this module handles it.
pub(crate) fn call(
    ep: &Endpoint,
    valid: &Valid,
    env: &RequestContext,
) -> Option<Result<Value, ApiError>> {
    for_caller(handles(&ep.path), env, |c| {
        answer_for(&ep.path, valid, env, c.user_id)
    })
}

const TICKET: &str = "support_ticket";
const SUPPORT_SETTINGS: &str = "support_settings";
const REMINDER: &str = "reminder";
const ARTICLE: &str = "article";

const DAY_MS: u64 = 86_400_000;

/// What a published article earns per full day since its publish date, in USD.
pub(crate) const EARNINGS_PER_DAY_USD: f64 = 0.25;

/// Support notification settings and their values before the first change.
const SETTINGS: [(&str, bool); 2] = [("email_on_reply", true), ("email_on_close", true)];

fn period_ms(repeat: &str) -> Option<u64> {
    match repeat {
        "daily" => Some(DAY_MS),
        "weekly" => Some(7 * DAY_MS),
        _ => None,
    }
}

fn answer_for(
    path: &str,
    valid: &Valid,
    env: &RequestContext,
    user: i64,
) -> Result<Value, ApiError> {
    let now = env.now_ms;
    let store = &env.store;
    match path {
        "support/add-ticket" => {
            let p = typed::SupportAddTicket::from_valid(valid)?;
            let mut f = Map::new();
            f.insert("subject".into(), json!(p.subject.trim()));
            f.insert("message".into(), json!(p.message.trim()));
            if let Some(v) = &p.category {
                f.insert("category".into(), json!(v.trim()));
            }
            f.insert("status".into(), json!("open"));
            f.insert("replies".into(), json!([]));
            let r = store
                .insert_record(TICKET, user, &f, None, now)
                .map_err(db)?;
            Ok(answer(&r))
        }
        "support/update-ticket" => {
            let p = typed::SupportUpdateTicket::from_valid(valid)?;
            let id = record_id("id", &p.id)?;
            let t = store
                .get_record(TICKET, user, id)
                .map_err(db)?
                .ok_or_else(|| refused("id", "No such ticket on this account."))?;
            let message = p.message.as_deref().map(str::trim);
            let status = p.status.as_deref();
            if message.is_none() && status.is_none() {
                return Err(refused("message", "Send a message, a status or both."));
            }
            let current = t
                .fields
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("open");
            if message.is_none() && status == Some(current) {
                return Err(refused(
                    "status",
                    format!("The ticket is already {current}."),
                ));
            }
            let mut f = Map::new();
            if let Some(m) = message {
                let mut replies = t
                    .fields
                    .get("replies")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                replies.push(json!({"from": "customer", "message": m, "time_ms": now}));
                f.insert("replies".into(), json!(replies));
                // A reply to a closed ticket reopens it unless the same call closes it.
                f.insert("status".into(), json!(status.unwrap_or("open")));
            } else if let Some(s) = status {
                f.insert("status".into(), json!(s));
            }
            let r = store
                .update_record(TICKET, user, id, &f, now)
                .map_err(db)?
                .ok_or_else(|| refused("id", "No such ticket on this account."))?;
            Ok(answer(&r))
        }
        "support/settings" => {
            let (rows, _) = store
                .list_records(SUPPORT_SETTINGS, user, 1, 0)
                .map_err(db)?;
            let p = typed::SupportSettings::from_valid(valid)?;
            let mut changes = Map::new();
            let given = [p.email_on_reply, p.email_on_close];
            for ((n, _), b) in SETTINGS.into_iter().zip(given) {
                if let Some(b) = b {
                    changes.insert(n.into(), json!(b));
                }
            }
            let rec = match rows.into_iter().next() {
                Some(r) if changes.is_empty() => r,
                Some(r) => store
                    .update_record(SUPPORT_SETTINGS, user, r.id, &changes, now)
                    .map_err(db)?
                    .unwrap_or(r),
                None if changes.is_empty() => {
                    let mut out = Map::new();
                    for (n, d) in SETTINGS {
                        out.insert(n.into(), json!(d));
                    }
                    out.insert("time_updated".into(), Value::Null);
                    return Ok(Value::Object(out));
                }
                None => {
                    let mut f = Map::new();
                    for (n, d) in SETTINGS {
                        f.insert(n.into(), changes.get(n).cloned().unwrap_or(json!(d)));
                    }
                    store
                        .insert_record(SUPPORT_SETTINGS, user, &f, None, now)
                        .map_err(db)?
                }
            };
            let mut out = Map::new();
            for (n, d) in SETTINGS {
                out.insert(n.into(), rec.fields.get(n).cloned().unwrap_or(json!(d)));
            }
            out.insert("time_updated".into(), json!(rec.updated_ms / 1000));
            Ok(Value::Object(out))
        }
        "calendar/add-reminder" => {
            let p = typed::CalendarAddReminder::from_valid(valid)?;
            let time: u64 = p
                .time
                .trim()
                .parse()
                .map_err(|_| refused("time", "time is milliseconds since the epoch."))?;
            let repeat = p.repeat.as_str();
            if time < now && period_ms(repeat).is_none() {
                return Err(refused(
                    "time",
                    format!("A one-off reminder must be in the future (now is {now})."),
                ));
            }
            let mut f = Map::new();
            f.insert("time_ms".into(), json!(time));
            f.insert("text".into(), json!(p.text.trim()));
            f.insert("repeat".into(), json!(repeat));
            let r = store
                .insert_record(REMINDER, user, &f, None, now)
                .map_err(db)?;
            Ok(schedule_entry(&answer(&r), now))
        }
        "calendar/list-schedule" => {
            let (rows, _) = store
                .list_records(REMINDER, user, trading_model::MAX_LIMIT, 0)
                .map_err(db)?;
            let mut entries: Vec<Value> = rows
                .iter()
                .map(|r| schedule_entry(&answer(r), now))
                .collect();
            // Upcoming first, soonest first; then the past ones, latest first.
            entries.sort_by_key(|e| {
                let past = e["past"].as_bool().unwrap_or(false);
                let t = e["next_ms"].as_u64().unwrap_or(0);
                (past, if past { u64::MAX - t } else { t })
            });
            Ok(Value::Array(entries))
        }
        "articles/check-earnings" => {
            let (rows, _) = store
                .list_records(ARTICLE, user, trading_model::MAX_LIMIT, 0)
                .map_err(db)?;
            let mut total = 0.0;
            let mut articles = Vec::new();
            for r in rows.iter().rev() {
                let publish_s = r
                    .fields
                    .get("publishdate")
                    .and_then(|v| {
                        v.as_str()
                            .map(str::to_owned)
                            .or_else(|| v.as_u64().map(|n| n.to_string()))
                    })
                    .and_then(|s| s.trim().parse::<u64>().ok());
                let (status, days) = match publish_s {
                    None => ("unknown_publishdate", 0),
                    Some(s) if s.saturating_mul(1000) > now => ("scheduled", 0),
                    Some(s) => ("published", (now - s * 1000) / DAY_MS),
                };
                let earned = days as f64 * EARNINGS_PER_DAY_USD;
                total += earned;
                articles.push(json!({
                    "id": r.id,
                    "title": r.fields.get("title"),
                    "publishdate": publish_s,
                    "status": status,
                    "days_published": days,
                    "earnings": round(earned, 2),
                }));
            }
            Ok(json!({
                "currency": "USD",
                "rate_per_day": EARNINGS_PER_DAY_USD,
                "articles": articles,
                "total": round(total, 2),
            }))
        }
        _ => Err(ApiError::new(trading_model::ErrorCode::EmptyData).with_status(501)),
    }
}

/// A reminder with its next occurrence: repeating reminders move on by whole periods; a
/// one-off reminder whose time has passed is flagged `past`.
fn schedule_entry(r: &Value, now: u64) -> Value {
    let time = r["time_ms"].as_u64().unwrap_or(0);
    let repeat = r["repeat"].as_str().unwrap_or("none");
    let next = match period_ms(repeat) {
        Some(p) if time < now => time + (now - time).div_ceil(p) * p,
        _ => time,
    };
    let mut e = r.clone();
    e["next_ms"] = json!(next);
    e["past"] = json!(next < now);
    e["in_ms"] = if next >= now {
        json!(next - now)
    } else {
        Value::Null
    };
    e
}
