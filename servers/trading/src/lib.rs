//! HTTP shell of the trading API v2 sandbox (bin `trading-api`): it parses, calls the
//! pure model (`trading-model`), stores and answers.
//!
//! Layers, from the bottom (no module imports one above it; `scripts/check-shape.py`
//! checks that no two files import each other in a cycle):
//!
//! * `settings` (what the server starts with, the one clock) and `store` (the data layer:
//!   one SQLite database, a repository per feature, each registering its tables);
//! * `context`: one request as handlers see it (caller, clock reading, store, market), the
//!   head every signed feature module shares (`for_caller`) and the answers they share
//!   (refusals, record ids, store failures);
//! * the feature modules: `resources` (generic account records), `paper` (paper trading
//!   and strategies), `market`, `account`, `marketplace`, `algorithm_creator`,
//!   `support_desk` and `system`;
//! * `dispatch` (asks the feature modules in order), `authenticate` (the SDKs' `Key` +
//!   `Authorization` headers, the key's replay memory) and `limiting` (`ratelimit-core`
//!   embedded, per key and per address);
//! * `server`: hyper, and the order a request passes through (routing, body,
//!   authentication, limits, validation, handler); every answer is the `{data, meta}`
//!   envelope with `meta.status` equal to the HTTP status.
//!
//! Every catalogue endpoint answers GET and POST, as the original SDKs send them. Handlers
//! read their parameters through `trading_model::typed`, the struct generated for their
//! endpoint, and leave checks and shaping that need no I/O to the model.
//!
//! What it deliberately does not do: talk to real exchanges or news sources, send e-mail,
//! or move money; everything is simulated and deterministic for a seed and a clock.

#![forbid(unsafe_code)]

mod account;
mod algorithm_creator;
mod authenticate;
mod context;
mod dispatch;
mod limiting;
mod market;
mod marketplace;
mod paper;
mod resources;
mod server;
mod settings;
pub mod store;
mod support_desk;
mod system;

pub use server::serve;
pub use settings::{Clock, SandboxClock, Settings, system_clock};
