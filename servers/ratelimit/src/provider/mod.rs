//! Rule delivery: where the rules come from after start, and what a load does to health.
//!
//! Two sources, picked by `CONFIG_TYPE`: rule files watched for changes ([`file`](mod@file)) and an
//! xDS management server ([`xds`]). Both end in [`install`], so a load from either source
//! has the same effects: the new rule set replaces the old one in a single atomic swap
//! (requests in flight finish on the set they started with), the configuration health
//! component follows upstream's state table, and `config_load_success` / `config_load_error`
//! are counted. A rejected load changes nothing but the error counter and the log.

pub mod file;
pub mod xds;

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use ratelimit_core::RuleSet;
use tokio::sync::watch;

use crate::app::App;
use crate::log::{self, Level};
use crate::settings::ConfigType;

/// Installs the outcome of a load. `source` says where it came from, for the log.
///
/// Health (only with `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`): a loaded set with at least
/// one domain makes the configuration component healthy, one with none makes it unhealthy;
/// a failed load leaves it as it was.
pub fn install(app: &App, source: &str, outcome: Result<RuleSet, String>) -> bool {
    match outcome {
        Ok(rules) => {
            let domains = rules.domain_count();
            let count = rules.rules().len();
            app.limiter.set_rules(rules);
            if app.settings.healthy_with_at_least_one_config_loaded {
                app.health.set_config(domains > 0);
            }
            log::log(
                Level::Info,
                &format!(
                    "loaded rate limit configuration from {source}: {domains} domain(s), {count} rule(s)"
                ),
            );
            true
        }
        Err(e) => {
            app.limiter.stats().config_load_error.fetch_add(1, Relaxed);
            log::log(
                Level::Error,
                &format!(
                    "error loading rate limit configuration from {source}, keeping the previous rules: {e}"
                ),
            );
            false
        }
    }
}

/// Starts the configured rule source. Returns once the listeners may start: at once with
/// `FORCE_START_WITHOUT_INITIAL_CONFIG=true`, otherwise after the first successful load.
///
/// With files, a first load that fails stops the server (unless forced), as a typo caught
/// at deploy time is better than a server that never serves; later failures keep the
/// rules in force. With xDS, the server waits for the management server as long as it takes.
pub async fn start(app: Arc<App>) -> Result<(), String> {
    let force = app.settings.force_start_without_initial_config;
    match app.settings.config_type {
        ConfigType::File => {
            let watch = file::Watch::new(app.clone());
            if let Err(e) = file::load(&app)
                && !force
            {
                return Err(format!("error loading rate limit configuration: {e}"));
            }
            watch.spawn();
            Ok(())
        }
        ConfigType::GrpcXdsSotw => {
            let (loaded_tx, mut loaded) = watch::channel(false);
            let client = xds::Client::new(app.clone(), loaded_tx)?;
            tokio::spawn(client.run());
            if !force {
                log::log(
                    Level::Info,
                    &format!(
                        "waiting for the initial rate limit configuration from {}",
                        app.settings.xds_server_url
                    ),
                );
                loaded
                    .wait_for(|l| *l)
                    .await
                    .map_err(|_| "the xDS client stopped".to_owned())?;
            }
            Ok(())
        }
    }
}
