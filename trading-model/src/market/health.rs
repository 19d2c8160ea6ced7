//! Exchange health: seeded incidents per three-day window, each exchange's status and
//! rating, `system/exchange-health` and `system/status`.

use serde_json::{Value, json};

use super::{Exchange, Market};

/// Simulated incidents: one per three-day window at a seeded second, on a seeded
/// exchange, lasting 10 to 40 minutes. They drive exchange-health, the status of the
/// exchanges, their rating and the maintenance announcements.
pub const INCIDENT_WINDOW_S: u64 = 3 * 86_400;

/// One simulated incident: an exchange's order book updates stall for a while.
#[derive(Debug, Clone, Copy)]
pub struct Incident {
    /// When it starts, in seconds.
    pub start_s: u64,
    /// When it ends, in seconds.
    pub end_s: u64,
    /// The exchange it hits.
    pub exchange: &'static Exchange,
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Uniform in [0, 1) from the seed, a stream tag and an index.
pub fn unit(seed: u64, stream: u64, index: u64) -> f64 {
    let h = mix(mix(seed ^ 0x7379_7374_656d_0000 ^ stream).wrapping_add(index));
    (mix(h) >> 11) as f64 / (1u64 << 53) as f64
}

/// The incident of three-day window number `window`.
pub fn incident(m: &Market, window: u64) -> Incident {
    let start_s = window * INCIDENT_WINDOW_S
        + (unit(m.seed(), 1, window) * (INCIDENT_WINDOW_S - 3600) as f64) as u64;
    let minutes = 10 + (unit(m.seed(), 2, window) * 30.0) as u64;
    let ex = m.exchanges();
    Incident {
        start_s,
        end_s: start_s + minutes * 60,
        exchange: &ex[(unit(m.seed(), 3, window) * ex.len() as f64) as usize % ex.len()],
    }
}

/// Incidents that started at or before `now_s`, newest first, going back `count` windows.
pub fn incidents_before(m: &Market, now_s: u64, windows: u64) -> Vec<Incident> {
    let w = now_s / INCIDENT_WINDOW_S;
    (0..=windows)
        .filter_map(|back| w.checked_sub(back))
        .map(|win| incident(m, win))
        .filter(|i| i.start_s <= now_s)
        .collect()
}

/// The incident `code` is in at `now_s`, if any.
pub fn active_incident(m: &Market, code: &str, now_s: u64) -> Option<Incident> {
    incidents_before(m, now_s, 1)
        .into_iter()
        .find(|i| i.exchange.code == code && now_s < i.end_s)
}

/// `system/exchange-health` at `now` (ms): the last incident and whether it is over.
pub fn exchange_health(m: &Market, now: u64) -> Value {
    let now_s = now / 1000;
    let last = incidents_before(m, now_s, 1).into_iter().next();
    json!({
        "last_issue": last.map(|i| i.start_s),
        "last_issue_exchange": last.map(|i| i.exchange.code),
        "last_issue_resolved": last.map(|i| i.end_s <= now_s),
        "time_now": now_s,
    })
}

/// An exchange's status at `now_s` and its issue text (`"None"` when running).
pub fn exchange_status(m: &Market, code: &str, now_s: u64) -> (&'static str, String) {
    match active_incident(m, code, now_s) {
        Some(i) => (
            "degraded",
            format!(
                "Order book updates delayed since {}; expected to recover by {}.",
                i.start_s, i.end_s
            ),
        ),
        None => ("running", "None".to_owned()),
    }
}

/// `system/status` at `now` (ms): the API, the feed and every exchange.
pub fn status(m: &Market, now: u64) -> Value {
    let now_s = now / 1000;
    let mut out = vec![
        json!({"name": "api", "status": "running", "last_checked": now, "issues": "None"}),
        json!({"name": "market-feed", "status": "running", "last_checked": now, "issues": "None"}),
    ];
    for e in m.exchanges() {
        let (status, issues) = exchange_status(m, e.code, now_s);
        out.push(json!({
            "name": format!("exchange:{}", e.code), "status": status,
            "last_checked": now, "issues": issues,
        }));
    }
    Value::Array(out)
}

/// Incidents in the last 30 days of `code`, and a rating out of 10 from its fee, typical
/// spread and that count (cheaper, tighter and steadier rates higher).
pub fn rating(m: &Market, e: &Exchange, now_s: u64) -> (usize, f64) {
    let incidents = incidents_before(m, now_s, 10)
        .iter()
        .filter(|i| i.exchange.code == e.code && i.start_s + 30 * 86_400 > now_s)
        .count();
    let score = 10.0 - e.fee * 400.0 - e.spread_bps * 0.2 - incidents as f64 * 0.5;
    (incidents, (score.clamp(1.0, 10.0) * 10.0).round() / 10.0)
}
