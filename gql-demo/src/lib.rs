//! The GraphQL demo: a schema of invented `creature` records and a message store, built with
//! juniper, meant to be read and extended (see docs/gql-extending.md).
//!
//! It serves `creatures`, `creature(id:)` or `creature(name:)`, `creatureById(id:)` and the
//! message example (`getMessage`, `createMessage`, `updateMessage`), applies depth,
//! complexity and token limits while parsing, and turns every request into a JSON [`Reply`]
//! with a [`Status`].
//! It deliberately does no I/O and knows no transport: `servers/gql` owns HTTP, the
//! explorer page and request size limits. The one entry point is [`Demo::execute`].
//!
//! ```
//! use gql_demo::{Demo, OperationPolicy, Request};
//!
//! let demo = Demo::builtin();
//! let reply = demo.execute(
//!     &Request::from_query("{ creatures { name } }"),
//!     OperationPolicy::QueriesOnly,
//! );
//! assert!(reply.json()["data"]["creatures"].as_array().unwrap().len() >= 50);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cycles;
mod data;
mod defaults;
mod exec;
pub mod fuzz;
mod messages;
mod schema;

use std::sync::Arc;

pub use data::{
    Attack, Attacks, BUILTIN_JSON, Creature, Dataset, Dimension, Evolution, EvolutionRequirement,
};
pub use exec::{Limits, OperationPolicy, Reply, Request, Status};
pub use messages::{Message, MessageError, MessageInput, MessageStore, StoreLimits};
pub use schema::{Context, LookupError, Mutation, Query, Schema, schema};

/// Why data could not be loaded or a request could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The data file is not JSON of the expected shape.
    #[error("creature data is not valid JSON of the expected shape: {0}")]
    DataJson(#[source] serde_json::Error),
    /// The data file parses but breaks a rule (duplicate id, dangling evolution, ...).
    #[error("creature data is invalid: {0}")]
    DataInvalid(String),
    /// The request body or its variables cannot be used.
    #[error("{0}")]
    BadRequest(String),
}

/// Settings of a [`Demo`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settings {
    /// Document limits.
    pub limits: Limits,
    /// Message store limits.
    pub store: StoreLimits,
}

/// A ready schema with its data and message store: one per server, shared by all requests.
pub struct Demo {
    schema: Schema,
    context: Context,
    limits: Limits,
}

impl Demo {
    /// A demo over `data` with `settings`; the message store starts empty.
    pub fn new(data: Dataset, settings: Settings) -> Self {
        let limits = settings.limits;
        let schema = schema::schema()
            .limit_depth(limits.max_depth)
            .limit_fields(limits.max_complexity)
            .limit_tokens(limits.max_tokens);
        Self {
            schema,
            context: Context {
                data: Arc::new(data),
                messages: Arc::new(MessageStore::new(settings.store)),
            },
            limits,
        }
    }

    /// The shipped data set with default settings.
    pub fn builtin() -> Self {
        Self::new(Dataset::builtin(), Settings::default())
    }

    /// The schema in SDL, for `--print-schema` and for checking a schema change.
    pub fn sdl(&self) -> String {
        self.schema.as_sdl()
    }

    /// The resolvers' context (data set and message store).
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The limits this demo enforces.
    pub fn limits(&self) -> Limits {
        self.limits
    }
}

impl std::fmt::Debug for Demo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Demo")
            .field("creatures", &self.context.data.creatures().len())
            .field("messages", &self.context.messages.len())
            .field("limits", &self.limits)
            .finish()
    }
}
