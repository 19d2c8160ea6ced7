//! The strategy rows (one per profile) and the profiles' stored fields, read and
//! written in SQLite.

use rusqlite::{OptionalExtension, params};
use serde_json::{Map, Value};
use trading_model::strategy::State;

use trading_model::ApiError;
use trading_model::strategy_profile::Profile;

use crate::context::{NO_RECORD, ms, refused};
use crate::paper::call_context::{Cx, sql};
use crate::store::{PaperDb, Store};

/// The strategy row of a profile.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) id: i64,
    pub(crate) user_id: i64,
    pub(crate) state: State,
    pub(crate) started_ms: u64,
    pub(crate) next_due_ms: u64,
    pub(crate) slice: u64,
    pub(crate) position: i64,
    pub(crate) stopped_ms: u64,
    pub(crate) note: String,
}

pub(crate) fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn row_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        user_id: r.get(1)?,
        state: State::parse(&r.get::<_, String>(2)?),
        started_ms: u(r.get(3)?),
        next_due_ms: u(r.get(4)?),
        slice: u(r.get(5)?),
        position: r.get(6)?,
        stopped_ms: u(r.get(7)?),
        note: r.get(8)?,
    })
}

const ROW_COLS: &str =
    "id, user_id, state, started_ms, next_due_ms, slice, position, stopped_ms, note";

pub(crate) fn rows_where(
    conn: &PaperDb<'_>,
    cond: &str,
    args: &[&dyn rusqlite::ToSql],
) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {ROW_COLS} FROM paper_strategies WHERE {cond}"
    ))?;
    let rows = stmt.query_map(args, row_from)?;
    rows.collect()
}

pub(crate) fn save_row(conn: &PaperDb<'_>, r: &Row) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO paper_strategies (id, user_id, state, started_ms, next_due_ms, slice, position, stopped_ms, note)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (id) DO UPDATE SET state = ?3, started_ms = ?4, next_due_ms = ?5, slice = ?6,
             position = ?7, stopped_ms = ?8, note = ?9",
        params![
            r.id,
            r.user_id,
            r.state.as_str(),
            ms(r.started_ms),
            ms(r.next_due_ms),
            ms(r.slice),
            r.position,
            ms(r.stopped_ms),
            r.note
        ],
    )?;
    Ok(())
}

/// The row of profile `id` (a fresh stopped one when it never ran).
pub(crate) fn row_of(conn: &PaperDb<'_>, user: i64, id: i64) -> rusqlite::Result<Row> {
    Ok(rows_where(conn, "id = ?1 AND user_id = ?2", &[&id, &user])?
        .into_iter()
        .next()
        .unwrap_or(Row {
            id,
            user_id: user,
            state: State::Stopped,
            started_ms: 0,
            next_due_ms: 0,
            slice: 0,
            position: id,
            stopped_ms: 0,
            note: String::new(),
        }))
}

pub(crate) fn profile(
    conn: &PaperDb<'_>,
    user: i64,
    id: i64,
) -> rusqlite::Result<Option<(Map<String, Value>, u64)>> {
    let row: Option<(String, i64)> = conn
        .query_row(
            "SELECT fields, created_ms FROM records WHERE kind = 'strategy_profile' AND user_id = ?1 AND id = ?2",
            params![user, id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(row.and_then(|(t, c)| match serde_json::from_str(&t) {
        Ok(Value::Object(m)) => Some((m, u(c))),
        _ => None,
    }))
}

pub(crate) fn profiles_of(
    conn: &PaperDb<'_>,
    user: i64,
) -> rusqlite::Result<Vec<(i64, Map<String, Value>)>> {
    conn.records_of("strategy_profile", user)
}

/// Running strategies of `user` whose executables use exchange key `key`.
pub(crate) fn running_using_key(store: &Store, user: i64, key: i64) -> rusqlite::Result<Vec<i64>> {
    let conn = store.paper();
    let running = rows_where(&conn, "user_id = ?1 AND state = 'running'", &[&user])?;
    let mut out = Vec::new();
    for r in running {
        if let Some((p, _)) = profile(&conn, user, r.id)? {
            if Profile::new(&p).key_ids().contains(&key) {
                out.push(r.id);
            }
        }
    }
    Ok(out)
}

pub(crate) fn own_profile(
    cx: &Cx<'_>,
    param: &str,
) -> Result<(i64, Map<String, Value>, Row), ApiError> {
    let id = cx.id(param)?;
    let conn = cx.store().paper();
    let Some((p, _)) = profile(&conn, cx.user(), id).map_err(sql)? else {
        return Err(refused(param, NO_RECORD));
    };
    let row = row_of(&conn, cx.user(), id).map_err(sql)?;
    Ok((id, p, row))
}
