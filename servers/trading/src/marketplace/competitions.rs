//! Weekly competitions: signal developers enrol, and the week's board ranks them by the
//! summed results of their signals' iterations closed during the week.

use serde_json::{Map, Value, json};
use trading_model::{ApiError, Valid, typed};

use crate::context::{RequestContext, db, record_id, refused, round};

/// Answers `competitions/*`.
pub(super) fn call(
    path: &str,
    valid: &Valid,
    env: &RequestContext,
    user: i64,
) -> Result<Value, ApiError> {
    match path {
        "competitions/list" => competitions(env, user),
        _ => enrol(env, user, valid, path),
    }
}

/// Length of one competition; competitions follow each other without gap.
pub(crate) const COMPETITION_MS: u64 = 7 * 86_400_000;

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
    // `join` and `leave` take the same parameters.
    let id = record_id("id", &typed::CompetitionsJoin::from_valid(valid)?.id)?;
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
