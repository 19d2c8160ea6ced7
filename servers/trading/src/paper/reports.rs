//! Exports (CSV per RFC 4180, `.xls` as SpreadsheetML 2003 XML), account statistics and
//! the finance lists, all computed from the recorded paper orders and transactions.
//!
//! Realised profit and loss uses the average-cost method per trading code, fees
//! subtracted; amounts are in each code's quote asset and converted to US dollars at the
//! current simulated price for totals.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rusqlite::{Connection, params};
use serde_json::{Value, json};
use trading_model::ApiError;
use trading_model::market::{Market, Side};

use super::balances::keys_of;
use super::call_context::{Cx, NO_RECORD, iso, ms, num, paged, refused, sql};
use super::orders::{Order, orders_where};
use super::strategies::{TxQuery, arr, describe, profiles_of, row_of, transactions};

/// Time an export takes to prepare, on the injected clock.
const EXPORT_DELAY_MS: u64 = 3_000;

/// Columns of a strategy transaction record, in the spec's order.
pub(super) const TX_FIELDS: [&str; 41] = [
    "id",
    "time_created",
    "last_updated",
    "c_active",
    "c_order",
    "c_lookup_status",
    "c_lookup_count",
    "c_row",
    "c_symbol_code",
    "c_exchange",
    "c_symbol",
    "c_symbolid",
    "c_type",
    "c_type_orig",
    "c_side",
    "c_amount",
    "c_price",
    "c_price_entry",
    "c_price_offset",
    "c_payload",
    "c_time_requested",
    "c_time_orderplaced",
    "c_time_completed",
    "c_time_journey",
    "c_order_id",
    "c_order_slice",
    "c_order_success",
    "c_order_failed",
    "c_order_status",
    "c_order_remaining",
    "c_order_filled",
    "c_com",
    "c_child_id",
    "c_cancel",
    "c_cancel_time",
    "c_spread_entry",
    "c_trace_order",
    "c_conditions",
    "custom_id",
    "c_max_time",
    "strategy_id",
];

const STRATEGY_FIELDS: [&str; 10] = [
    "id",
    "name",
    "algorithm_id",
    "algorithm",
    "state",
    "slices",
    "slice_delay",
    "executables",
    "transactions",
    "codes",
];

pub(super) fn call(cx: &Cx<'_>, path: &str) -> Result<Value, ApiError> {
    match path {
        "export/request" => export_request(cx),
        "export/list" => export_list(cx),
        "export/fetch" => export_fetch(cx),
        "statistics/account-pnl" => account_pnl(cx),
        "finance/list-commissions-paid" => commissions(cx),
        "finance/list-recent-transactions" => recent(cx),
        "finance/list-top-strategy-pnl" => top_strategies(cx),
        "finance/import-orders-list" => import_list(cx),
        "finance/import-orders-settings" => import_settings(cx),
        _ => Err(refused("path", "unhandled")),
    }
}

/// One CSV field per RFC 4180: quoted when it holds a comma, quote, CR or LF.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

pub(super) fn csv(rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for r in rows {
        out.push_str(&r.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(","));
        out.push_str("\r\n");
    }
    out
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            // XML 1.0 cannot carry other control characters at all.
            c if (c as u32) < 0x20 => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A SpreadsheetML 2003 workbook (Excel and LibreOffice open it as `.xls`); all cells are
/// strings, as the transaction records are.
pub(super) fn spreadsheet(rows: &[Vec<String>], sheet: &str) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<?mso-application progid=\"Excel.Sheet\"?>\n\
         <Workbook xmlns=\"urn:schemas-microsoft-com:office:spreadsheet\" \
         xmlns:ss=\"urn:schemas-microsoft-com:office:spreadsheet\">\n",
    );
    out.push_str(&format!(
        " <Worksheet ss:Name=\"{}\">\n  <Table>\n",
        xml_escape(sheet)
    ));
    for r in rows {
        out.push_str("   <Row>");
        for f in r {
            out.push_str(&format!(
                "<Cell><Data ss:Type=\"String\">{}</Data></Cell>",
                xml_escape(f)
            ));
        }
        out.push_str("</Row>\n");
    }
    out.push_str("  </Table>\n </Worksheet>\n</Workbook>\n");
    out
}

fn export_rows(
    cx: &Cx<'_>,
    conn: &Connection,
    system: &str,
    symbol: &str,
    limit: usize,
) -> Result<Vec<Vec<String>>, ApiError> {
    let mut rows = Vec::new();
    if system == "all_strategies" {
        rows.push(STRATEGY_FIELDS.iter().map(|s| (*s).to_owned()).collect());
        for (id, p) in profiles_of(conn, cx.user()).map_err(sql)?.into_iter().rev() {
            let codes = arr(&p, "executable_codes");
            if !codes.iter().any(|c| c.trim().eq_ignore_ascii_case(symbol)) {
                continue;
            }
            let r = row_of(conn, cx.user(), id).map_err(sql)?;
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
    let system = cx
        .valid
        .text("system")
        .unwrap_or("strategy_transactions")
        .to_owned();
    let kind = cx.valid.text("type").unwrap_or(".csv").to_owned();
    let symbol = cx
        .valid
        .text("symbol")
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
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
    let limit = cx.valid.integer("limit").unwrap_or(100);
    if limit < 1 {
        return Err(refused("limit", "limit is at least 1."));
    }
    let limit = usize::try_from(u64::try_from(limit).unwrap_or(1).min(cap)).unwrap_or(usize::MAX);
    let conn = cx.store().conn();
    let rows = export_rows(cx, &conn, &system, &symbol, limit)?;
    let (content, ext) = if kind == ".xls" {
        (spreadsheet(&rows, &system), "xls")
    } else {
        (csv(&rows), "csv")
    };
    let now = cx.now();
    let ready = now + EXPORT_DELAY_MS;
    conn.execute(
        "INSERT INTO paper_exports (user_id, system, type, symbol, rows, filename, content, created_ms, ready_ms, expires_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, '', ?6, ?7, ?8, ?9)",
        params![cx.user(), system, kind, symbol, rows.len() as i64 - 1, content.as_bytes(), ms(now), ms(ready), ms(ready + keep_s * 1000)],
    )
    .map_err(sql)?;
    let id = conn.last_insert_rowid();
    let filename = format!("{system}-{symbol}-{id}.{ext}");
    conn.execute(
        "UPDATE paper_exports SET filename = ?2 WHERE id = ?1",
        params![id, filename],
    )
    .map_err(sql)?;
    Ok(
        json!({"id": id, "status": "preparing", "filename": filename, "rows": rows.len() - 1, "ready_ms": ready}),
    )
}

struct Export {
    id: i64,
    system: String,
    kind: String,
    symbol: String,
    rows: i64,
    filename: String,
    content: Vec<u8>,
    created: u64,
    ready: u64,
    expires: u64,
}

fn exports(conn: &Connection, user: i64, id: Option<i64>) -> rusqlite::Result<Vec<Export>> {
    let mut stmt = conn.prepare(
        "SELECT id, system, type, symbol, rows, filename, content, created_ms, ready_ms, expires_ms
         FROM paper_exports WHERE user_id = ?1 AND (?2 IS NULL OR id = ?2) ORDER BY id DESC",
    )?;
    let u = |v: i64| u64::try_from(v).unwrap_or(0);
    let rows = stmt.query_map(params![user, id], |r| {
        Ok(Export {
            id: r.get(0)?,
            system: r.get(1)?,
            kind: r.get(2)?,
            symbol: r.get(3)?,
            rows: r.get(4)?,
            filename: r.get(5)?,
            content: r.get(6)?,
            created: u(r.get(7)?),
            ready: u(r.get(8)?),
            expires: u(r.get(9)?),
        })
    })?;
    rows.collect()
}

fn status(e: &Export, now: u64) -> &'static str {
    if now < e.ready {
        "preparing"
    } else if now >= e.expires {
        "expired"
    } else {
        "ready"
    }
}

fn export_list(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let rows = exports(&conn, cx.user(), None).map_err(sql)?;
    let now = cx.now();
    Ok(paged(
        cx.ep,
        cx.valid,
        rows.iter()
            .map(|e| {
                json!({
                    "id": e.id, "system": e.system, "type": e.kind, "symbol": e.symbol, "rows": e.rows,
                    "filename": e.filename, "status": status(e, now), "size": e.content.len(),
                    "requested_ms": e.created, "ready_ms": e.ready, "expires_ms": e.expires,
                })
            })
            .collect(),
    ))
}

fn export_fetch(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let id = cx.id("id")?;
    let conn = cx.store().conn();
    let Some(e) = exports(&conn, cx.user(), Some(id))
        .map_err(sql)?
        .into_iter()
        .next()
    else {
        return Err(refused("id", NO_RECORD));
    };
    let now = cx.now();
    match status(&e, now) {
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

/// Average-cost books per trading code.
#[derive(Default, Debug, Clone)]
struct Position {
    qty: f64,
    avg: f64,
    bought: f64,
    sold: f64,
    realised: f64,
    fees: f64,
}

impl Position {
    fn trade(&mut self, side: Side, qty: f64, price: f64, fee: f64) {
        let d = if side == Side::Buy { qty } else { -qty };
        if side == Side::Buy {
            self.bought += qty;
        } else {
            self.sold += qty;
        }
        self.fees += fee;
        if self.qty == 0.0 || self.qty.signum() == d.signum() {
            let total = self.qty.abs() + qty;
            self.avg = (self.avg * self.qty.abs() + price * qty) / total;
            self.qty += d;
            return;
        }
        let closed = qty.min(self.qty.abs());
        self.realised += closed * (price - self.avg) * self.qty.signum();
        self.qty += d;
        if self.qty.abs() < trading_model::orders::DUST {
            self.qty = 0.0;
            self.avg = 0.0;
        } else if qty > closed {
            self.avg = price;
        }
    }
}

/// Fills of `orders` oldest first as `(time, order, trade)`.
fn fills(orders: &[Order]) -> Vec<(u64, &Order, &Value)> {
    let mut out: Vec<(u64, &Order, &Value)> = orders
        .iter()
        .flat_map(|o| {
            o.trades
                .iter()
                .map(move |t| (t["timestamp"].as_u64().unwrap_or(0), o, t))
        })
        .collect();
    out.sort_by_key(|(t, o, _)| (*t, o.id));
    out
}

fn positions(orders: &[Order]) -> BTreeMap<String, Position> {
    let mut out: BTreeMap<String, Position> = BTreeMap::new();
    for (_, o, t) in fills(orders) {
        let p = out.entry(o.code.clone()).or_default();
        p.trade(
            o.side,
            t["amount"].as_f64().unwrap_or(0.0),
            t["price"].as_f64().unwrap_or(0.0),
            t["fee"]["cost"].as_f64().unwrap_or(0.0),
        );
    }
    out
}

fn usd(market: &Market, code: &str, amount: f64, now: u64) -> f64 {
    let rate = market
        .symbol(code)
        .and_then(|s| market.asset_usd(s.quote, now))
        .unwrap_or(1.0);
    amount * rate
}

fn account_pnl(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let orders = orders_where(&conn, "user_id = ?1 ORDER BY id", &[&cx.user()]).map_err(sql)?;
    let market = &cx.env.market;
    let now = cx.now();
    let mut symbols = Vec::new();
    let (mut r_usd, mut f_usd, mut u_usd) = (0.0, 0.0, 0.0);
    for (code, p) in positions(&orders) {
        let mid = market.mid(&code, now).unwrap_or(0.0);
        let unrealised = if p.qty == 0.0 {
            0.0
        } else {
            (mid - p.avg) * p.qty
        };
        let sym = market.symbol(&code);
        r_usd += usd(market, &code, p.realised - p.fees, now);
        f_usd += usd(market, &code, p.fees, now);
        u_usd += usd(market, &code, unrealised, now);
        symbols.push(json!({
            "code": code,
            "symbol": sym.map(|s| s.pair()),
            "currency": sym.map(|s| s.quote),
            "bought": num(p.bought),
            "sold": num(p.sold),
            "position": num(p.qty),
            "average_cost": num(p.avg),
            "realised": num(p.realised),
            "fees": num(p.fees),
            "realised_net": num(p.realised - p.fees),
            "mark_price": num(mid),
            "unrealised": num(unrealised),
        }));
    }
    Ok(json!({
        "method": "average cost per trading code; fees subtracted from realised",
        "time_ms": now,
        "orders": orders.len(),
        "fills": fills(&orders).len(),
        "symbols": symbols,
        "total_usd": {"realised_net": num(r_usd), "fees": num(f_usd), "unrealised": num(u_usd)},
    }))
}

fn commissions(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let sub = cx
        .valid
        .text("subaccount_id")
        .unwrap_or("")
        .trim()
        .to_owned();
    let conn = cx.store().conn();
    // `0` names the primary account itself; sub-accounts hold no exchange keys in this
    // sandbox, so they have paid no commissions.
    let orders = if sub == "0" {
        orders_where(
            &conn,
            "user_id = ?1 AND fee > 0 ORDER BY id DESC",
            &[&cx.user()],
        )
        .map_err(sql)?
    } else {
        let id: i64 = sub
            .parse()
            .map_err(|_| refused("subaccount_id", NO_RECORD))?;
        let n: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM records WHERE kind = 'subaccount' AND user_id = ?1 AND id = ?2",
                params![cx.user(), id],
                |r| r.get(0),
            )
            .map_err(sql)?;
        if n == 0 {
            return Err(refused("subaccount_id", NO_RECORD));
        }
        Vec::new()
    };
    let market = &cx.env.market;
    let rows = orders
        .iter()
        .map(|o| {
            json!({
                "order": o.id.to_string(),
                "code": o.code,
                "exchange": o.exchange,
                "side": o.side.as_str(),
                "fee": num(o.fee),
                "currency": market.symbol(&o.code).map(|s| s.quote),
                "fee_usd": num(usd(market, &o.code, o.fee, o.done_ms.max(o.send_ms))),
                "strategy_id": o.strategy_id.map(|s| s.to_string()),
                "time_ms": o.done_ms.max(o.send_ms),
            })
        })
        .collect();
    Ok(paged(cx.ep, cx.valid, rows))
}

fn recent(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let orders = orders_where(&conn, "user_id = ?1 ORDER BY id", &[&cx.user()]).map_err(sql)?;
    let rows: Vec<Value> = fills(&orders)
        .into_iter()
        .rev()
        .map(|(t, o, tr)| {
            json!({
                "id": tr["id"], "order": o.id.to_string(), "code": o.code, "exchange": o.exchange,
                "symbol": tr["symbol"], "side": o.side.as_str(), "price": tr["price"], "amount": tr["amount"],
                "cost": tr["cost"], "fee": tr["fee"], "strategy_id": o.strategy_id.map(|s| s.to_string()),
                "time_ms": t, "datetime": iso(t),
            })
        })
        .collect();
    Ok(paged(cx.ep, cx.valid, rows))
}

fn top_strategies(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let market = &cx.env.market;
    let now = cx.now();
    let mut rows = Vec::new();
    for (id, p) in profiles_of(&conn, cx.user()).map_err(sql)? {
        let orders = orders_where(&conn, "strategy_id = ?1 ORDER BY id", &[&id]).map_err(sql)?;
        let (mut realised, mut fees) = (0.0, 0.0);
        for (code, pos) in positions(&orders) {
            realised += usd(market, &code, pos.realised - pos.fees, now);
            fees += usd(market, &code, pos.fees, now);
        }
        rows.push((
            realised,
            id,
            json!({
                "id": id,
                "name": p.get("name").cloned().unwrap_or(Value::Null),
                "realised_net_usd": num(realised),
                "fees_usd": num(fees),
                "orders": orders.len(),
                "filled_orders": orders.iter().filter(|o| o.filled > 0.0).count(),
            }),
        ));
    }
    // Best first; the paging convention's "newest first" has no meaning for a ranking.
    rows.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok(paged(
        cx.ep,
        cx.valid,
        rows.into_iter().map(|(_, _, v)| v).collect(),
    ))
}

fn import_list(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let orders = orders_where(
        &conn,
        "user_id = ?1 AND strategy_id IS NULL ORDER BY id DESC",
        &[&cx.user()],
    )
    .map_err(sql)?;
    Ok(Value::Array(
        orders.iter().map(|o| o.to_json(&cx.env.market)).collect(),
    ))
}

fn import_settings(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().conn();
    let mut out = Vec::new();
    for (id, f) in keys_of(&conn, cx.user()).map_err(sql)? {
        let n: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM paper_orders WHERE apikey_id = ?1 AND strategy_id IS NULL",
                [id],
                |r| r.get(0),
            )
            .map_err(sql)?;
        let status = f
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("active")
            .to_owned();
        out.push(json!({
            "apikey": id,
            "exchange": f.get("exchange"),
            "label": f.get("label"),
            "status": status,
            "import_enabled": status == "active",
            "orders_available": n,
        }));
    }
    Ok(Value::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_per_rfc4180() {
        let rows = vec![vec![
            "a".into(),
            "b,c".into(),
            "say \"hi\"".into(),
            "x\ny".into(),
        ]];
        assert_eq!(csv(&rows), "a,\"b,c\",\"say \"\"hi\"\"\",\"x\ny\"\r\n");
    }

    #[test]
    fn average_cost_realises_on_sells() {
        let mut p = Position::default();
        p.trade(Side::Buy, 1.0, 10.0, 0.1);
        p.trade(Side::Buy, 1.0, 20.0, 0.1);
        p.trade(Side::Sell, 1.0, 30.0, 0.1);
        assert!((p.realised - 15.0).abs() < 1e-9);
        assert!((p.qty - 1.0).abs() < 1e-9 && (p.avg - 15.0).abs() < 1e-9);
        assert!((p.fees - 0.3).abs() < 1e-9);
    }

    #[test]
    fn spreadsheet_escapes() {
        let x = spreadsheet(&[vec!["<a&b>".into()]], "s");
        assert!(x.contains("&lt;a&amp;b&gt;"));
    }
}
