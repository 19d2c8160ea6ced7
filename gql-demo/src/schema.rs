//! The GraphQL schema: root types and resolvers. Resolver names are the field names of
//! `type Query` and `type Mutation`, as in the original demo.

use std::sync::Arc;

use juniper::{
    EmptySubscription, FieldError, ID, IntoFieldError, RootNode, ScalarValue, graphql_object,
    graphql_value,
};

use crate::{
    data::{Attacks, Creature, Dataset, Dimension, Evolution},
    messages::{Message, MessageError, MessageInput, MessageStore},
};

/// What every resolver can reach: the read-only data set and the shared message store.
#[derive(Clone, Debug)]
pub struct Context {
    /// The creatures.
    pub data: Arc<Dataset>,
    /// The messages of the mutation example.
    pub messages: Arc<MessageStore>,
}

impl juniper::Context for Context {}

/// The schema type of the demo.
pub type Schema = RootNode<Query, Mutation, EmptySubscription<Context>>;

/// `type Query`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Query;

#[graphql_object(context = Context)]
impl Query {
    /// Every creature of the data set.
    fn creatures(context: &Context) -> &[Creature] {
        context.data.creatures()
    }

    /// The creature with this id ("7" also finds "007") or exactly this name (case-sensitive),
    /// or null. Give exactly one of the two.
    fn creature(
        context: &Context,
        id: Option<ID>,
        name: Option<String>,
    ) -> Result<Option<&Creature>, LookupError> {
        match (id, name) {
            (Some(id), None) => Ok(context.data.by_id(&id)),
            (None, Some(name)) => Ok(context.data.by_name(&name)),
            (Some(_), Some(_)) => Err(LookupError::Both),
            (None, None) => Err(LookupError::Neither),
        }
    }

    /// The creature with this id ("7" also finds "007"), or null. Same as `creature(id:)`.
    fn creature_by_id(context: &Context, id: ID) -> Option<&Creature> {
        context.data.by_id(&id)
    }

    /// A message stored by `createMessage`; an unknown id is an error.
    fn get_message(context: &Context, id: ID) -> Result<Option<Message>, MessageError> {
        context.messages.get(&id).map(Some)
    }
}

/// Why `creature` could not choose how to look up: it takes exactly one of `id` and `name`.
/// Both arguments are nullable in the schema, so only the resolver can tell; an explicit
/// `null` (or an unset variable) counts as not given.
#[derive(Clone, Copy, Debug, thiserror::Error, PartialEq, Eq)]
pub enum LookupError {
    /// Both `id` and `name` were given.
    #[error("creature takes exactly one of \"id\" and \"name\"; both were given")]
    Both,
    /// Neither was given.
    #[error("creature takes exactly one of \"id\" and \"name\"; neither was given")]
    Neither,
}

impl<S: ScalarValue> IntoFieldError<S> for LookupError {
    fn into_field_error(self) -> FieldError<S> {
        FieldError::new(self, graphql_value!({ "code": "INVALID_ARGUMENTS" }))
    }
}

/// `type Mutation`: the message example of the original demo. Results are nullable, as in
/// that example, so that an error leaves `null` in its field and keeps sibling fields.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mutation;

#[graphql_object(context = Context)]
impl Mutation {
    /// Stores a new message and returns it with its id.
    fn create_message(
        context: &Context,
        input: Option<MessageInput>,
    ) -> Result<Option<Message>, MessageError> {
        let input = input.ok_or(MessageError::MissingInput("createMessage"))?;
        context.messages.create(input).map(Some)
    }

    /// Replaces content and author of a stored message; an unknown id is an error.
    fn update_message(
        context: &Context,
        id: ID,
        input: Option<MessageInput>,
    ) -> Result<Option<Message>, MessageError> {
        let input = input.ok_or(MessageError::MissingInput("updateMessage"))?;
        context.messages.update(&id, input).map(Some)
    }
}

#[graphql_object(context = Context, description = "A creature of the data set.")]
impl Creature {
    /// Zero-padded id, "001".
    fn id(&self) -> ID {
        ID::new(self.id.clone())
    }

    /// Unique name.
    fn name(&self) -> &str {
        &self.name
    }

    /// Weight range, unit included ("5.4kg").
    fn weight(&self) -> &Dimension {
        &self.weight
    }

    /// Fast and special attacks.
    fn attacks(&self) -> &Attacks {
        &self.attacks
    }

    /// Later stages of the family, nearest first; empty for a final stage.
    fn evolutions(&self) -> &[Evolution] {
        &self.evolutions
    }
}

#[graphql_object(
    context = Context,
    description = "A link to a later stage: its id and name, and the full record."
)]
impl Evolution {
    /// Id of the later stage, in the same form as `Creature.id`.
    fn id(&self) -> ID {
        ID::new(self.id.clone())
    }

    /// Name of the later stage.
    fn name(&self) -> &str {
        &self.name
    }

    /// The later stage's full record.
    fn creature<'c>(&self, context: &'c Context) -> &'c Creature {
        context.data.evolution_target(self)
    }
}

/// Builds the schema. Introspection stays on: the explorer and outside clients build their
/// view of the schema from it.
pub fn schema() -> Schema {
    Schema::new(Query, Mutation, EmptySubscription::new())
}
