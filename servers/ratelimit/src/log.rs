//! Minimal structured logging in upstream's two formats: text (`time`, `level`, `msg`) and
//! JSON (`@timestamp`, `@message`, `level`). Written to stderr.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// Log line format (`LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `time=... level=... msg=...`
    Text,
    /// `{"@timestamp":...,"@message":...,"level":...}`
    Json,
}

/// Severity, most verbose first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Per-request detail.
    Debug,
    /// Lifecycle events.
    Info,
    /// Something an operator should look at.
    Warn,
    /// Something failed.
    Error,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warning",
            Level::Error => "error",
        }
    }
}

struct Config {
    min: Level,
    format: LogFormat,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Sets the level and format once at startup; later calls are ignored.
pub fn init(level: &str, format: LogFormat) {
    let min = match level {
        "trace" | "debug" => Level::Debug,
        "info" => Level::Info,
        "warn" | "warning" => Level::Warn,
        _ => Level::Error,
    };
    let _ = CONFIG.set(Config { min, format });
}

/// Whether a message at `level` would be written.
pub fn enabled(level: Level) -> bool {
    CONFIG.get().map_or(Level::Info, |c| c.min) <= level
}

/// Writes one log line.
pub fn log(level: Level, msg: &str) {
    if !enabled(level) {
        return;
    }
    let format = CONFIG.get().map_or(LogFormat::Text, |c| c.format);
    let ts = rfc3339_now();
    let line = match format {
        LogFormat::Text => format!(
            "time=\"{ts}\" level={} msg={}",
            level.name(),
            serde_json::to_string(msg).unwrap_or_default()
        ),
        LogFormat::Json => serde_json::json!({
            "@timestamp": ts,
            "@message": msg,
            "level": level.name(),
        })
        .to_string(),
    };
    eprintln!("{line}");
}

/// Current UTC time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn rfc3339_now() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{:03}Z",
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamp_shape() {
        let t = super::rfc3339_now();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.starts_with("20"), "{t}");
        assert!(t.ends_with('Z'));
    }
}
