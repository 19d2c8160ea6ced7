//! The files `export/request` prepares: their columns, CSV (RFC 4180) and SpreadsheetML
//! 2003 (`.xls`) writers, and the status an export shows at a given time. What it
//! deliberately does not do: no reading of transactions or storing of files; the server
//! collects the rows and keeps the result.

/// Columns of a strategy transaction record, in the spec's order.
pub const TX_FIELDS: [&str; 41] = [
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

/// Columns of an `all_strategies` export: the strategy description, then its codes.
pub const STRATEGY_FIELDS: [&str; 10] = [
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

/// One CSV field per RFC 4180: quoted when it holds a comma, quote, CR or LF.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Rows as CSV, every line ended by CRLF.
pub fn csv(rows: &[Vec<String>]) -> String {
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
pub fn spreadsheet(rows: &[Vec<String>], sheet: &str) -> String {
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

/// Where an export stands at `now_ms`: `preparing` until `ready_ms`, `ready` until
/// `expires_ms`, then `expired`.
pub fn status(ready_ms: u64, expires_ms: u64, now_ms: u64) -> &'static str {
    if now_ms < ready_ms {
        "preparing"
    } else if now_ms >= expires_ms {
        "expired"
    } else {
        "ready"
    }
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
    fn status_follows_the_clock() {
        let at = |now| status(10, 20, now);
        assert_eq!(
            [at(9), at(10), at(19), at(20)],
            ["preparing", "ready", "ready", "expired"]
        );
    }

    #[test]
    fn spreadsheet_escapes() {
        let x = spreadsheet(&[vec!["<a&b>".into()]], "s");
        assert!(x.contains("&lt;a&amp;b&gt;"));
        // SpreadsheetML 2003 names its rows `Row`.
        assert!(x.contains("<Row><Cell>") && x.contains("</Row>"), "{x}");
    }
}
