//! Settings from the command line and `EVENTS_*` environment variables, in the original
//! relay's spellings. A flag overrides its environment variable (`--http-listen` <-
//! `EVENTS_HTTP_LISTEN`); both spellings of the Telegram options are accepted.

use std::collections::HashMap;

/// A settings error, reported before the server starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// A flag this relay does not know.
    #[error("unknown flag --{0} (see --help)")]
    UnknownFlag(String),
    /// A flag without its value.
    #[error("flag --{0} needs a value")]
    MissingValue(String),
    /// A value that does not parse.
    #[error("{0}")]
    Invalid(String),
}

/// Flags taking a value; the environment variable is `EVENTS_` + upper snake case.
const FLAGS: &[&str] = &[
    "http-listen",
    "http-k8s-url",
    "http-alertmanager-url",
    "http-header-trace-id",
    "http-first-byte-timeout",
    "http-read-timeout",
    "template-time-format",
    "stdout-format",
    "stdout-level",
    "stdout-template",
    "telegram-url",
    "telegram-out-id-token",
    "telegram-out-chat-id",
    "telegram-message-template",
    "telegram-out-message",
    "telegram-selector-template",
    "telegram-timeout",
    "telegram-alert-expression",
    "telegram-disable-notification",
    "telegram-ratelimit",
    "slack-url",
    "slack-message-template",
    "slack-selector-template",
    "slack-timeout",
    "slack-alert-expression",
    "workchat-url",
    "workchat-message-template",
    "workchat-selector-template",
    "workchat-timeout",
    "workchat-alert-expression",
    "workchat-notification-type",
    "grafana-url",
    "grafana-api-key",
    "grafana-timeout",
    "grafana-datasource",
    "grafana-org",
    "grafana-period",
    "grafana-image-width",
    "grafana-image-height",
    "nats-url",
    "nats-subject",
    "nats-message-template",
    "nats-selector-template",
    "nats-timeout",
    "collector-address",
    "collector-message-template",
    "collector-selector-template",
    "output-queue-size",
    "output-retries",
    "output-backoff-ms",
    "output-max-retry-after",
    "output-drain-timeout",
    "prometheus-url",
    "opentelemetry-endpoint",
    "opentelemetry-service-name",
    "opentelemetry-flush-ms",
];

/// Which chat product a channel talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// Telegram Bot API.
    Telegram,
    /// Slack.
    Slack,
    /// Workplace chat.
    Workchat,
    /// NATS subject (publish).
    Nats,
    /// The original's monitoring collector: one UDP datagram per event.
    Collector,
}

impl ChannelKind {
    /// The prefix of its flags and template names (`telegram-message`).
    pub fn name(self) -> &'static str {
        match self {
            ChannelKind::Telegram => "telegram",
            ChannelKind::Slack => "slack",
            ChannelKind::Workchat => "workchat",
            ChannelKind::Nats => "nats",
            ChannelKind::Collector => "collector",
        }
    }

    /// Whether the channel can carry an alert image.
    pub fn is_chat(self) -> bool {
        matches!(
            self,
            ChannelKind::Telegram | ChannelKind::Slack | ChannelKind::Workchat
        )
    }
}

/// One configured chat channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    /// The product.
    pub kind: ChannelKind,
    /// Default target (a selector may choose others): the chat URL, the NATS subject or
    /// the collector's `host:port`.
    pub url: String,
    /// The NATS server URL (NATS only).
    pub server: String,
    /// Message template: a file path if such a file exists, else the template text.
    pub message_template: String,
    /// Selector template (same rule), empty for none.
    pub selector_template: String,
    /// The output's options as `getVar` sees them (`URL`, `Timeout`, ...).
    pub vars: HashMap<String, String>,
}

/// How stdout lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdoutFormat {
    /// `time level message key=value...`
    Text,
    /// One JSON object per line.
    Json,
    /// `EVENTS_STDOUT_TEMPLATE` over `{msg, time, level, file, ...}`.
    Template,
}

/// Everything the relay needs to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `host:port` to listen on (`:8081` means all interfaces).
    pub http_listen: String,
    /// Paths (without the leading `/`) accepting admission reviews.
    pub k8s_paths: Vec<String>,
    /// Paths accepting Alertmanager notifications.
    pub alertmanager_paths: Vec<String>,
    /// Request header carrying a trace id (32 hex digits) to continue.
    pub trace_header: String,
    /// How long a new connection may send nothing before it is closed.
    pub first_byte_timeout: std::time::Duration,
    /// How long a client may take to send a request's headers (also the wait for the next
    /// request on a kept-alive connection), and then again its body.
    pub read_timeout: std::time::Duration,
    /// Go layout of the event `time` field and of `timeFormat` input.
    pub time_format: String,
    /// stdout line format.
    pub stdout_format: StdoutFormat,
    /// Lowest level written (`debug`, `info`, `warn`, `error`, `panic`).
    pub stdout_level: String,
    /// Template for [`StdoutFormat::Template`].
    pub stdout_template: String,
    /// Enabled outputs.
    pub channels: Vec<Channel>,
    /// Alert images, when `--grafana-url` is set.
    pub grafana: Option<crate::grafana::GrafanaSettings>,
    /// Delivery queue and retries, shared by every output.
    pub delivery: Delivery,
    /// Path of the Prometheus text exposition.
    pub metrics_path: String,
    /// OTLP/HTTP traces, when `--opentelemetry-endpoint` is set.
    pub traces: Option<TraceSettings>,
}

/// How outputs queue and retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Messages waiting per output; more are dropped and counted.
    pub queue_size: usize,
    /// Retries after the first attempt (connection errors, timeouts, 429, 5xx).
    pub retries: u32,
    /// First backoff; it doubles per retry up to 30 s.
    pub backoff: std::time::Duration,
    /// Longest `retry_after`/`Retry-After` honoured; a longer one fails the message.
    pub max_retry_after: std::time::Duration,
    /// On SIGTERM, how long queued messages may still take.
    pub drain: std::time::Duration,
}

/// OTLP trace export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSettings {
    /// Collector base URL; spans go to `<endpoint>/v1/traces`.
    pub endpoint: String,
    /// `service.name` resource attribute.
    pub service_name: String,
    /// How often finished spans are sent.
    pub flush: std::time::Duration,
}

fn paths(s: &str) -> Vec<String> {
    s.split(',')
        .map(|p| p.trim().trim_start_matches('/').to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

impl Settings {
    /// Reads settings from `args` (without the program name and without `--help`/`version`,
    /// which the binary handles) and `env`.
    pub fn parse(
        args: &[String],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Settings, SettingsError> {
        let mut given: HashMap<&'static str, String> = HashMap::new();
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            let Some(flag) = a.strip_prefix("--") else {
                return Err(SettingsError::Invalid(format!("unexpected argument {a:?}")));
            };
            let (name, inline) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (flag, None),
            };
            let Some(known) = FLAGS.iter().find(|f| **f == name) else {
                return Err(SettingsError::UnknownFlag(name.to_string()));
            };
            let value = match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    args.get(i)
                        .cloned()
                        .ok_or_else(|| SettingsError::MissingValue(name.to_string()))?
                }
            };
            given.insert(known, value);
            i += 1;
        }
        let get = |name: &str, default: &str| -> String {
            if let Some(v) = given.get(name) {
                return v.clone();
            }
            let key = format!("EVENTS_{}", name.to_uppercase().replace('-', "_"));
            match env(&key) {
                Some(v) if !v.is_empty() => v,
                _ => default.to_string(),
            }
        };
        let number = |name: &str, default: &str| -> Result<u64, SettingsError> {
            let v = get(name, default);
            v.trim().parse::<u64>().map_err(|_| {
                SettingsError::Invalid(format!("--{name} {v:?}: expected a whole number"))
            })
        };
        let stdout_format = match get("stdout-format", "text").as_str() {
            "text" => StdoutFormat::Text,
            "json" => StdoutFormat::Json,
            "template" => StdoutFormat::Template,
            other => {
                return Err(SettingsError::Invalid(format!(
                    "--stdout-format {other:?}: expected text, json or template"
                )));
            }
        };
        let stdout_level = get("stdout-level", "info");
        if !["debug", "info", "warn", "error", "panic"].contains(&stdout_level.as_str()) {
            return Err(SettingsError::Invalid(format!(
                "--stdout-level {stdout_level:?}: expected debug, info, warn, error or panic"
            )));
        }
        let mut channels = Vec::new();
        for kind in [
            ChannelKind::Telegram,
            ChannelKind::Slack,
            ChannelKind::Workchat,
            ChannelKind::Nats,
            ChannelKind::Collector,
        ] {
            let n = kind.name();
            let mut server = String::new();
            let mut url = match kind {
                ChannelKind::Nats => {
                    server = get("nats-url", "");
                    if server.is_empty() {
                        String::new()
                    } else {
                        get("nats-subject", "events")
                    }
                }
                ChannelKind::Collector => get("collector-address", ""),
                _ => get(&format!("{n}-url"), ""),
            };
            let mut message = get(&format!("{n}-message-template"), "");
            if kind == ChannelKind::Telegram {
                // The newer spelling: bot token and chat id instead of a full URL.
                let token = get("telegram-out-id-token", "");
                let chat = get("telegram-out-chat-id", "");
                if url.is_empty() && !token.is_empty() {
                    if chat.is_empty() {
                        return Err(SettingsError::Invalid(
                            "--telegram-out-id-token needs --telegram-out-chat-id".into(),
                        ));
                    }
                    url = format!("https://api.telegram.org/bot{token}/sendMessage?chat_id={chat}");
                }
                if message.is_empty() {
                    message = get("telegram-out-message", "");
                }
            }
            if url.is_empty() {
                continue;
            }
            if message.is_empty() {
                let what = match kind {
                    ChannelKind::Collector => "--collector-address",
                    _ => &format!("--{n}-url"),
                };
                return Err(SettingsError::Invalid(format!(
                    "{what} is set but --{n}-message-template is empty: nothing to send"
                )));
            }
            let selector = get(&format!("{n}-selector-template"), "");
            let mut vars = HashMap::from([
                ("URL".to_string(), url.clone()),
                ("MessageTemplate".to_string(), message.clone()),
                ("SelectorTemplate".to_string(), selector.clone()),
                ("Timeout".to_string(), get(&format!("{n}-timeout"), "30")),
                (
                    "AlertExpression".to_string(),
                    get(&format!("{n}-alert-expression"), "g0.expr"),
                ),
            ]);
            match kind {
                ChannelKind::Telegram => {
                    vars.insert(
                        "DisableNotification".into(),
                        get("telegram-disable-notification", "false"),
                    );
                    // The newer original's default: 18 a minute (Telegram allows 20 a
                    // minute into a group); here per chat rather than for all chats.
                    vars.insert(
                        "RateLimit".into(),
                        number("telegram-ratelimit", "18")?.to_string(),
                    );
                }
                ChannelKind::Workchat => {
                    vars.insert(
                        "NotificationType".into(),
                        get("workchat-notification-type", "REGULAR"),
                    );
                }
                ChannelKind::Nats => {
                    vars.insert("Subject".into(), url.clone());
                    vars.insert("URL".into(), server.clone());
                }
                ChannelKind::Slack | ChannelKind::Collector => {}
            }
            number(&format!("{n}-timeout"), "30")?;
            channels.push(Channel {
                kind,
                url,
                server,
                message_template: message,
                selector_template: selector,
                vars,
            });
        }
        let grafana_url = get("grafana-url", "");
        let grafana = if grafana_url.is_empty() {
            None
        } else {
            Some(crate::grafana::GrafanaSettings {
                url: grafana_url,
                api_key: get("grafana-api-key", "admin:admin"),
                org: get("grafana-org", "1"),
                datasource: get("grafana-datasource", "Prometheus"),
                period_minutes: number("grafana-period", "60")?,
                width: number("grafana-image-width", "1280")? as u32,
                height: number("grafana-image-height", "640")? as u32,
                timeout: std::time::Duration::from_secs(number("grafana-timeout", "60")?),
            })
        };
        let queue_size = number("output-queue-size", "1000")?;
        if queue_size == 0 {
            return Err(SettingsError::Invalid(
                "--output-queue-size must be at least 1".into(),
            ));
        }
        let delivery = Delivery {
            queue_size: queue_size as usize,
            retries: number("output-retries", "3")?.min(100) as u32,
            backoff: std::time::Duration::from_millis(number("output-backoff-ms", "1000")?),
            max_retry_after: std::time::Duration::from_secs(number(
                "output-max-retry-after",
                "300",
            )?),
            drain: std::time::Duration::from_secs(number("output-drain-timeout", "10")?),
        };
        let endpoint = get("opentelemetry-endpoint", "");
        let traces = if endpoint.is_empty() {
            None
        } else {
            Some(TraceSettings {
                endpoint,
                service_name: get("opentelemetry-service-name", "events"),
                flush: std::time::Duration::from_millis(number("opentelemetry-flush-ms", "1000")?),
            })
        };
        let seconds = |name: &str, default: &str| -> Result<std::time::Duration, SettingsError> {
            match number(name, default)? {
                0 => Err(SettingsError::Invalid(format!(
                    "--{name} must be at least 1 (seconds)"
                ))),
                n => Ok(std::time::Duration::from_secs(n)),
            }
        };
        let first_byte_timeout = seconds("http-first-byte-timeout", "10")?;
        let read_timeout = seconds("http-read-timeout", "30")?;
        let mut metrics_path = get("prometheus-url", "/metrics");
        if !metrics_path.starts_with('/') {
            metrics_path.insert(0, '/');
        }
        Ok(Settings {
            grafana,
            delivery,
            metrics_path,
            traces,
            http_listen: get("http-listen", ":80"),
            k8s_paths: paths(&get("http-k8s-url", "")),
            alertmanager_paths: paths(&get("http-alertmanager-url", "")),
            trace_header: get("http-header-trace-id", "X-Trace-ID"),
            first_byte_timeout,
            read_timeout,
            time_format: get(
                "template-time-format",
                relay_templates::relay::DEFAULT_TIME_FORMAT,
            ),
            stdout_format,
            stdout_level,
            stdout_template: get("stdout-template", "{{.file}} {{.msg}}"),
            channels,
        })
    }

    /// The socket address to bind: Go's `:8081` means every interface.
    pub fn listen_addr(&self) -> String {
        if self.http_listen.starts_with(':') {
            format!("0.0.0.0{}", self.http_listen)
        } else {
            self.http_listen.clone()
        }
    }
}

/// Usage text for `--help`.
pub const USAGE: &str =
    "event-relay: renders admission reviews and Alertmanager alerts through Go templates
and sends them to chats, NATS and a UDP collector

Flags (each also read from EVENTS_<FLAG_IN_UPPER_SNAKE_CASE>; a flag wins over its variable):
  --http-listen :80                 listen address
  --http-k8s-url /k8s               comma-separated paths for admission reviews
  --http-alertmanager-url /am       comma-separated paths for Alertmanager notifications
  --http-header-trace-id X-Trace-ID header with a trace id to continue
  --http-first-byte-timeout 10      seconds a new connection may send nothing
  --http-read-timeout 30            seconds for a request's headers, and again for its body
  --template-time-format LAYOUT     Go layout of event times (default 2006-01-02T15:04:05.999Z)
  --stdout-format text|json|template, --stdout-level, --stdout-template
Outputs (each enabled by its URL or address; several at once):
  --telegram-url URL | --telegram-out-id-token T --telegram-out-chat-id C
  --telegram-message-template T | --telegram-out-message T, --telegram-selector-template T
  --telegram-timeout 30, --telegram-disable-notification false, --telegram-ratelimit 18 (per chat and minute, 0 = off)
  --slack-url URL --slack-message-template T [--slack-selector-template T] [--slack-timeout 30]
  --workchat-url URL --workchat-message-template T [--workchat-selector-template T]
  --workchat-notification-type REGULAR, --workchat-timeout 30
  --nats-url nats://H:4222 --nats-subject events --nats-message-template T [--nats-selector-template T]
  --collector-address H:P --collector-message-template T (one UDP datagram per event)
  --*-alert-expression g0.expr      label or generatorURL parameter holding the alert's query
Delivery:
  --output-queue-size 1000 --output-retries 3 --output-backoff-ms 1000
  --output-max-retry-after 300 (seconds) --output-drain-timeout 10 (seconds, on SIGTERM)
Alert images (Grafana):
  --grafana-url URL --grafana-api-key KEY|user:password --grafana-org 1 --grafana-datasource Prometheus
  --grafana-period 60 --grafana-image-width 1280 --grafana-image-height 640 --grafana-timeout 60
Observability:
  --prometheus-url /metrics         Prometheus text exposition on the listen address; /healthz too
  --opentelemetry-endpoint URL      OTLP/HTTP (JSON) collector; spans go to URL/v1/traces
  --opentelemetry-service-name events --opentelemetry-flush-ms 1000
A template option is a file path when such a file exists, else the template text itself.
";

#[cfg(test)]
mod tests;
