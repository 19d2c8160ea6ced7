//! Exports of strategy transactions: requested, prepared on the injected clock, listed
//! and fetched as CSV (RFC 4180) or `.xls` (SpreadsheetML 2003 XML), base64-encoded.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use trading_model::export_files::{self, STRATEGY_FIELDS, TX_FIELDS, csv, spreadsheet};
use trading_model::strategy_profile::Profile;
use trading_model::{ApiError, typed};

use super::call_context::{Cx, paged, sql};
use super::strategies::{TxQuery, describe, transactions};
use crate::context::{NO_RECORD, record_id, refused};
use crate::store::{Export, PaperDb};

pub(super) fn call(cx: &Cx<'_>, path: &str) -> Result<Value, ApiError> {
    match path {
        "export/request" => export_request(cx),
        "export/list" => export_list(cx),
        "export/fetch" => export_fetch(cx),
        _ => Err(refused("path", "unhandled")),
    }
}

/// Time an export takes to prepare, on the injected clock.
const EXPORT_DELAY_MS: u64 = 3_000;

fn export_rows(
    cx: &Cx<'_>,
    conn: &PaperDb<'_>,
    system: &str,
    symbol: &str,
    limit: usize,
) -> Result<Vec<Vec<String>>, ApiError> {
    let mut rows = Vec::new();
    if system == "all_strategies" {
        rows.push(STRATEGY_FIELDS.iter().map(|s| (*s).to_owned()).collect());
        for (id, p) in conn.profiles_of(cx.user()).map_err(sql)?.into_iter().rev() {
            let codes = Profile::new(&p).list("executable_codes");
            if !codes.iter().any(|c| c.trim().eq_ignore_ascii_case(symbol)) {
                continue;
            }
            let r = conn.row_of(cx.user(), id).map_err(sql)?;
            let d = describe(conn, id, &p, &r).map_err(sql)?;
            let cell = |k: &str| match &d[k] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                v => v.to_string(),
            };
            let mut row: Vec<String> = STRATEGY_FIELDS[..9].iter().map(|k| cell(k)).collect();
            row.push(codes.join(" "));
            rows.push(row);
            if rows.len() > limit {
                break;
            }
        }
    } else {
        rows.push(TX_FIELDS.iter().map(|s| (*s).to_owned()).collect());
        let q = TxQuery {
            strategy: None,
            code: Some(symbol),
            filled_only: false,
            limit: limit as u64,
            offset: 0,
        };
        let (txs, _) = transactions(conn, &cx.env.market, cx.user(), &q).map_err(sql)?;
        for (sid, t) in txs {
            let mut row: Vec<String> = TX_FIELDS[..40]
                .iter()
                .map(|k| t[*k].as_str().unwrap_or("").to_owned())
                .collect();
            row.push(sid.to_string());
            rows.push(row);
        }
    }
    Ok(rows)
}

fn export_request(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let given = typed::ExportRequest::from_valid(cx.valid)?;
    let (system, kind) = (given.system, given.r#type);
    let symbol = given.symbol.trim().to_ascii_lowercase();
    if cx.env.market.symbol(&symbol).is_none() {
        return Err(refused("symbol", "Unknown trading code."));
    }
    let plan = cx.plan();
    let cap = plan["strategies"]["export"]["transactions_rows"]
        .as_u64()
        .unwrap_or(10_000);
    let keep_s = plan["strategies"]["export"]["maximum_storage_time"]
        .as_u64()
        .unwrap_or(86_400);
    let limit = given.limit;
    if limit < 1 {
        return Err(refused("limit", "limit is at least 1."));
    }
    let limit = usize::try_from(u64::try_from(limit).unwrap_or(1).min(cap)).unwrap_or(usize::MAX);
    let conn = cx.store().paper();
    let rows = export_rows(cx, &conn, &system, &symbol, limit)?;
    let (content, ext) = if kind == ".xls" {
        (spreadsheet(&rows, &system), "xls")
    } else {
        (csv(&rows), "csv")
    };
    let now = cx.now();
    let ready = now + EXPORT_DELAY_MS;
    let export = Export {
        id: 0,
        system: system.clone(),
        kind: kind.to_string(),
        symbol: symbol.clone(),
        rows: rows.len() as i64 - 1,
        filename: String::new(),
        content: content.into_bytes(),
        created: now,
        ready,
        expires: ready + keep_s * 1000,
    };
    let id = conn.insert_export(cx.user(), &export).map_err(sql)?;
    let filename = format!("{system}-{symbol}-{id}.{ext}");
    conn.set_export_filename(id, &filename).map_err(sql)?;
    Ok(
        json!({"id": id, "status": "preparing", "filename": filename, "rows": rows.len() - 1, "ready_ms": ready}),
    )
}

fn export_list(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let rows = conn.exports(cx.user(), None).map_err(sql)?;
    let now = cx.now();
    Ok(paged(
        cx.ep,
        cx.valid,
        rows.iter()
            .map(|e| {
                json!({
                    "id": e.id, "system": e.system, "type": e.kind, "symbol": e.symbol, "rows": e.rows,
                    "filename": e.filename, "status": export_files::status(e.ready, e.expires, now), "size": e.content.len(),
                    "requested_ms": e.created, "ready_ms": e.ready, "expires_ms": e.expires,
                })
            })
            .collect(),
    ))
}

fn export_fetch(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let id = record_id("id", &typed::ExportFetch::from_valid(cx.valid)?.id)?;
    let conn = cx.store().paper();
    let Some(e) = conn
        .exports(cx.user(), Some(id))
        .map_err(sql)?
        .into_iter()
        .next()
    else {
        return Err(refused("id", NO_RECORD));
    };
    let now = cx.now();
    match export_files::status(e.ready, e.expires, now) {
        "preparing" => Ok(json!({
            "id": e.id, "status": "preparing", "ready_ms": e.ready,
            "message": format!("The export is being prepared; please wait {} ms and fetch again.", e.ready - now),
        })),
        "expired" => Err(refused("id", "The export has expired; request a new one.")),
        _ => Ok(json!({
            "id": e.id,
            "status": "ready",
            "filename": e.filename,
            "content_type": if e.kind == ".xls" { "application/vnd.ms-excel" } else { "text/csv; charset=utf-8" },
            "encoding": "base64",
            "size": e.content.len(),
            "rows": e.rows,
            "content": STANDARD.encode(&e.content),
        })),
    }
}
