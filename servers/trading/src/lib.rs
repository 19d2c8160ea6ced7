//! HTTP shell of the trading API v2 sandbox (bin `trading-api`).
//!
//! It wires `trading-model` to hyper: every catalogue path is served under `/api/v2/`,
//! each request goes through routing, authentication, body reading and validation, and
//! every answer (success or error) is the `{data, meta}` envelope with `meta.status` equal
//! to the HTTP status. `/api/v2/openapi.json` serves the generated OpenAPI document.
//!
//! Endpoints that need a key authenticate with the original SDKs' `Key` + `Authorization`
//! headers (see `trading_model::auth`), against keys kept in an SQLite store in the data
//! directory (`trading-api create-key`). Nonces are remembered per key across restarts.
//!
//! Requests are limited per key and per address by `ratelimit-core`, embedded in-process.
//! Every catalogue endpoint has a handler (`handlers` dispatches to the feature modules
//! `paper`, `market`, `account`, `extras` and then the generic `resources`); account data
//! lives in SQLite and survives restarts, and the market is the pure, seeded simulation of
//! `trading_model::market`, read at the server's one clock.
//!
//! What it deliberately does not do: talk to real exchanges or news sources, send e-mail,
//! or move money; everything is simulated and deterministic for a seed and a clock.

#![forbid(unsafe_code)]

mod account;
mod authenticate;
mod context;
mod dispatch;
mod extras;
mod limiting;
mod market;
mod paper;
mod resources;
mod server;
mod settings;
pub mod store;
mod system;

pub use server::serve;
pub use settings::{Clock, SandboxClock, Settings, system_clock};
