//! Line-oriented stdout records in the original's three formats (`text`, `json`,
//! `template`), with a level filter. Rendered messages go through here too: stdout is the
//! relay's always-available output.

use std::collections::BTreeMap;
use std::io::Write;
use std::panic::Location;
use std::sync::{Arc, Mutex};

use relay_templates::relay::{RelayContext, relay_funcs};
use relay_templates::{Renderer, TemplateSet, Value};

use crate::settings::StdoutFormat;

/// Severity, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Diagnostics.
    Debug,
    /// Normal operation, including every rendered message.
    Info,
    /// Something was skipped or dropped.
    Warn,
    /// Something failed.
    Error,
    /// Only panics (effectively silent).
    Panic,
}

impl Level {
    fn parse(s: &str) -> Level {
        match s {
            "debug" => Level::Debug,
            "warn" => Level::Warn,
            "error" => Level::Error,
            "panic" => Level::Panic,
            _ => Level::Info,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
            Level::Panic => "panic",
        }
    }
}

/// Where finished lines go.
pub trait Sink: Send + Sync {
    /// Writes one line (without its newline).
    fn line(&self, line: &str);
}

/// The process's stdout.
pub struct Stdout;

impl Sink for Stdout {
    fn line(&self, line: &str) {
        let mut out = std::io::stdout().lock();
        // A closed stdout must not take the relay down.
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// Collects lines in memory (tests).
#[derive(Default)]
pub struct Memory {
    lines: Mutex<Vec<String>>,
}

impl Memory {
    /// Lines written so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl Sink for Memory {
    fn line(&self, line: &str) {
        if let Ok(mut l) = self.lines.lock() {
            l.push(line.to_string());
        }
    }
}

/// Formats and filters records.
pub struct Logger {
    sink: Arc<dyn Sink>,
    format: StdoutFormat,
    level: Level,
    template: Option<TemplateSet>,
}

impl Logger {
    /// A logger writing `format` lines at `level` and above; `template` is used by the
    /// template format and must parse.
    pub fn new(
        sink: Arc<dyn Sink>,
        format: StdoutFormat,
        level: &str,
        template: &str,
    ) -> Result<Logger, String> {
        let template = if format == StdoutFormat::Template {
            let mut set = TemplateSet::new(relay_funcs(RelayContext::default()));
            set.parse("stdout", template)
                .map_err(|e| format!("--stdout-template: {e}"))?;
            Some(set)
        } else {
            None
        };
        Ok(Logger {
            sink,
            format,
            level: Level::parse(level),
            template,
        })
    }

    /// Writes a record if `level` passes the filter.
    #[track_caller]
    pub fn log(&self, level: Level, msg: &str, fields: &[(&str, &str)]) {
        if level < self.level {
            return;
        }
        let loc = Location::caller();
        let file = format!(
            "{}:{}",
            loc.file().rsplit('/').next().unwrap_or(""),
            loc.line()
        );
        let time = crate::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
        let line = match self.format {
            StdoutFormat::Json => {
                let mut m = serde_json::Map::new();
                m.insert("time".into(), time.into());
                m.insert("level".into(), level.as_str().into());
                m.insert("msg".into(), msg.into());
                m.insert("file".into(), file.into());
                for (k, v) in fields {
                    m.insert((*k).into(), (*v).into());
                }
                serde_json::Value::Object(m).to_string()
            }
            StdoutFormat::Text => {
                let mut s = format!("{time} {} {file} {msg:?}", level.as_str());
                for (k, v) in fields {
                    s.push_str(&format!(" {k}={v:?}"));
                }
                s
            }
            StdoutFormat::Template => {
                let mut m: BTreeMap<String, Value> = BTreeMap::new();
                m.insert("time".into(), Value::from(time));
                m.insert("level".into(), Value::from(level.as_str()));
                m.insert("msg".into(), Value::from(msg));
                m.insert("file".into(), Value::from(file));
                for (k, v) in fields {
                    m.insert((*k).into(), Value::from(*v));
                }
                let data = Value::map(m);
                match self.template.as_ref().map(|t| t.render("stdout", &data)) {
                    Some(Ok(s)) => s,
                    Some(Err(e)) => format!("stdout template failed: {e}; msg={msg:?}"),
                    None => msg.to_string(),
                }
            }
        };
        self.sink.line(&line);
    }
}
