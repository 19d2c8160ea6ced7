//! Integration tests: the Go conformance table, the default-style relay templates over
//! the sample payloads, fuzz-corpus replay and robustness properties.

use std::collections::HashMap;
use std::path::PathBuf;

use relay_templates::relay::{RelayContext, relay_funcs};
use relay_templates::{Error, Renderer, TemplateSet, Value};

mod conformance;
mod defaults;
mod robustness;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn context() -> RelayContext {
    let env = HashMap::from([(
        "EVENTS_TELEGRAM_BOT_PLATFORM".to_string(),
        "123:abc=-100200".to_string(),
    )]);
    let vars = HashMap::from([(
        "URL".to_string(),
        "https://api.telegram.org/bot%s/sendMessage?chat_id=%s".to_string(),
    )]);
    RelayContext::from_maps(env, vars)
}

/// Parses `text` under `name` with the relay functions and renders `exec` over `data`.
fn render(name: &str, text: &str, exec: &str, data: &Value) -> Result<String, Error> {
    let mut set = TemplateSet::new(relay_funcs(context()));
    set.parse(name, text)?;
    set.render(exec, data)
}
