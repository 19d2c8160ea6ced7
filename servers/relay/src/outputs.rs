//! Outputs: render each event with the output's message template and choose targets with
//! its selector template. Delivery is in `deliver`.

use std::sync::Arc;

use relay_templates::relay::{self, Lookup, RelayContext, relay_funcs};
use relay_templates::{Renderer, TemplateSet, Value};

use crate::settings::{Channel, ChannelKind};

/// One message for one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Output name (`telegram`, `slack`, `workchat`, `nats`, `collector`).
    pub output: &'static str,
    /// Target URL (tokens redacted when logged).
    pub target: String,
    /// Rendered message.
    pub message: String,
}

/// Why an event produced nothing for a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// The message rendered blank: the template filtered the event out.
    Blank,
    /// The message template failed.
    Render(String),
    /// The selector chose no target.
    NoTargets,
}

/// A configured channel with its parsed templates.
pub struct ChannelOutput {
    kind: ChannelKind,
    url: String,
    message: TemplateSet,
    selector: Option<TemplateSet>,
}

/// A template option is a file path when such a file exists, else the template text.
fn load(option: &str) -> Result<String, String> {
    let path = std::path::Path::new(option);
    if option.len() < 4096 && path.is_file() {
        std::fs::read_to_string(path).map_err(|e| format!("{option}: {e}"))
    } else {
        Ok(option.to_string())
    }
}

impl ChannelOutput {
    /// Loads and parses the channel's templates.
    pub fn new(channel: &Channel, time_format: &str, env: Lookup) -> Result<ChannelOutput, String> {
        let vars = channel.vars.clone();
        let ctx = RelayContext {
            env,
            vars: Arc::new(move |k| vars.get(k).cloned()),
            time_format: time_format.to_string(),
            ..RelayContext::default()
        };
        let name = channel.kind.name();
        let mut message = TemplateSet::new(relay_funcs(ctx.clone()));
        message
            .parse(
                &format!("{name}-message"),
                &load(&channel.message_template)?,
            )
            .map_err(|e| format!("--{name}-message-template: {e}"))?;
        let selector = if channel.selector_template.is_empty() {
            None
        } else {
            let mut s = TemplateSet::new(relay_funcs(ctx));
            s.parse(
                &format!("{name}-selector"),
                &load(&channel.selector_template)?,
            )
            .map_err(|e| format!("--{name}-selector-template: {e}"))?;
            Some(s)
        };
        Ok(ChannelOutput {
            kind: channel.kind,
            url: channel.url.clone(),
            message,
            selector,
        })
    }

    /// The channel's product name.
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// The channel's kind.
    pub fn kind(&self) -> ChannelKind {
        self.kind
    }

    /// Renders one event: the deliveries, or why there are none. `on_selector_error`
    /// hears about a failing selector (the default URL is used instead, as in the original).
    pub fn deliveries(
        &self,
        event: &Value,
        on_selector_error: &dyn Fn(&str),
    ) -> Result<Vec<Delivery>, Skip> {
        let name = self.kind.name();
        let rendered = self
            .message
            .render(&format!("{name}-message"), event)
            .map_err(|e| Skip::Render(e.to_string()))?;
        let Some(message) = relay::message_to_send(&rendered) else {
            return Err(Skip::Blank);
        };
        let targets: Vec<String> = match &self.selector {
            None => vec![self.url.clone()],
            Some(sel) => match sel.render(&format!("{name}-selector"), event) {
                Ok(out) => relay::selector_targets(&out)
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
                Err(e) => {
                    on_selector_error(&e.to_string());
                    vec![self.url.clone()]
                }
            },
        };
        if targets.is_empty() {
            return Err(Skip::NoTargets);
        }
        Ok(targets
            .into_iter()
            .map(|target| Delivery {
                output: name,
                target,
                message: message.to_string(),
            })
            .collect())
    }
}

/// Hides credentials in a channel URL before it is logged: the Telegram bot token in the
/// path and `token`/`access_token` query values.
pub fn redact(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b.to_string(), Some(q)),
        None => (url.to_string(), None),
    };
    let base = match base.find("/bot") {
        Some(i) => {
            let rest = &base[i + 4..];
            let end = rest.find('/').unwrap_or(rest.len());
            format!("{}/bot***{}", &base[..i], &rest[end..])
        }
        None => base,
    };
    match query {
        None => base,
        Some(q) => {
            let q: Vec<String> = q
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k == "token" || k == "access_token" => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect();
            format!("{base}?{}", q.join("&"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_redacted() {
        assert_eq!(
            redact("https://api.telegram.org/bot123:abc/sendMessage?chat_id=-1"),
            "https://api.telegram.org/bot***/sendMessage?chat_id=-1"
        );
        assert_eq!(
            redact("https://slack.com/api/files.upload?token=xoxb-1&channels=C1"),
            "https://slack.com/api/files.upload?token=***&channels=C1"
        );
        assert_eq!(redact("http://127.0.0.1:9/x"), "http://127.0.0.1:9/x");
    }
}
