//! The message store of the mutation example: shared by every request, safe across threads.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard},
};

use juniper::{FieldError, IntoFieldError, ScalarValue, graphql_value};

/// A stored message. Fields are optional because the example's `MessageInput` has optional
/// fields.
#[derive(Clone, Debug, PartialEq, Eq, juniper::GraphQLObject)]
#[graphql(description = "A message created through the mutation example.")]
pub struct Message {
    /// Assigned by the store: decimal, increasing, never reused.
    pub id: juniper::ID,
    /// Text of the message.
    pub content: Option<String>,
    /// Who wrote it.
    pub author: Option<String>,
}

/// The arguments of `createMessage` and `updateMessage`.
#[derive(Clone, Debug, Default, juniper::GraphQLInputObject)]
#[graphql(description = "What a message holds; `updateMessage` replaces both fields.")]
pub struct MessageInput {
    /// Text of the message.
    pub content: Option<String>,
    /// Who wrote it.
    pub author: Option<String>,
}

/// Why a message operation failed. Each maps to a GraphQL error with a stable `code`
/// extension.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageError {
    /// No message has this id.
    #[error("no message with id {0:?}")]
    NotFound(String),
    /// The store holds its maximum number of messages.
    #[error("the message store is full ({0} messages); restart the server to empty it")]
    Full(usize),
    /// A field is longer than the store accepts.
    #[error("{field} is {len} bytes long; the limit is {max} bytes")]
    TooLong {
        /// `content` or `author`.
        field: &'static str,
        /// Length given.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// A mutation was called without its `input` argument.
    #[error("{0} needs an `input` argument")]
    MissingInput(&'static str),
}

impl MessageError {
    fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "MESSAGE_NOT_FOUND",
            Self::Full(_) => "MESSAGE_STORE_FULL",
            Self::TooLong { .. } => "MESSAGE_TOO_LONG",
            Self::MissingInput(_) => "MISSING_INPUT",
        }
    }
}

impl<S: ScalarValue> IntoFieldError<S> for MessageError {
    fn into_field_error(self) -> FieldError<S> {
        let code = self.code();
        FieldError::new(self, graphql_value!({ "code": code }))
    }
}

/// Bounds on the store, so that a client cannot grow the server's memory without limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreLimits {
    /// Most messages kept.
    pub max_messages: usize,
    /// Longest `content` or `author`, in bytes.
    pub max_field_bytes: usize,
}

impl Default for StoreLimits {
    fn default() -> Self {
        Self {
            max_messages: 10_000,
            max_field_bytes: 4096,
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    last_id: u64,
    messages: HashMap<String, Message>,
}

/// In-memory messages behind one lock: each operation is short and touches one entry, so a
/// single mutex is simpler than sharding and never the bottleneck of a demo.
#[derive(Debug, Default)]
pub struct MessageStore {
    inner: Mutex<Inner>,
    limits: StoreLimits,
}

impl MessageStore {
    /// An empty store with these limits.
    pub fn new(limits: StoreLimits) -> Self {
        Self {
            inner: Mutex::default(),
            limits,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // No code path panics while holding the lock, and the map stays consistent at every
        // await-free step, so a poisoned lock is still safe to use.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn check(&self, input: &MessageInput) -> Result<(), MessageError> {
        for (field, value) in [("content", &input.content), ("author", &input.author)] {
            let len = value.as_deref().map_or(0, str::len);
            if len > self.limits.max_field_bytes {
                return Err(MessageError::TooLong {
                    field,
                    len,
                    max: self.limits.max_field_bytes,
                });
            }
        }
        Ok(())
    }

    /// Stores a new message and returns it with its id.
    pub fn create(&self, input: MessageInput) -> Result<Message, MessageError> {
        self.check(&input)?;
        let mut inner = self.lock();
        if inner.messages.len() >= self.limits.max_messages {
            return Err(MessageError::Full(self.limits.max_messages));
        }
        inner.last_id += 1;
        let id = inner.last_id.to_string();
        let message = Message {
            id: juniper::ID::new(id.clone()),
            content: input.content,
            author: input.author,
        };
        inner.messages.insert(id, message.clone());
        Ok(message)
    }

    /// Replaces both fields of an existing message.
    pub fn update(&self, id: &str, input: MessageInput) -> Result<Message, MessageError> {
        self.check(&input)?;
        let mut inner = self.lock();
        let message = inner
            .messages
            .get_mut(id)
            .ok_or_else(|| MessageError::NotFound(id.to_owned()))?;
        message.content = input.content;
        message.author = input.author;
        Ok(message.clone())
    }

    /// The message with this id.
    pub fn get(&self, id: &str) -> Result<Message, MessageError> {
        self.lock()
            .messages
            .get(id)
            .cloned()
            .ok_or_else(|| MessageError::NotFound(id.to_owned()))
    }

    /// How many messages are stored.
    pub fn len(&self) -> usize {
        self.lock().messages.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, thread};

    use super::*;

    fn input(content: &str) -> MessageInput {
        MessageInput {
            content: Some(content.into()),
            author: Some("me".into()),
        }
    }

    #[test]
    fn create_update_get() {
        let store = MessageStore::default();
        let m = store.create(input("hi")).unwrap();
        assert_eq!(store.get(&m.id).unwrap().content.as_deref(), Some("hi"));
        let u = store.update(&m.id, MessageInput::default()).unwrap();
        assert_eq!(u.content, None);
        assert_eq!(
            store.get("nope").unwrap_err(),
            MessageError::NotFound("nope".into())
        );
        assert!(matches!(
            store.update("nope", input("x")),
            Err(MessageError::NotFound(_))
        ));
    }

    #[test]
    fn limits_hold() {
        let store = MessageStore::new(StoreLimits {
            max_messages: 2,
            max_field_bytes: 3,
        });
        assert!(matches!(
            store.create(input("long")),
            Err(MessageError::TooLong {
                field: "content",
                len: 4,
                max: 3
            })
        ));
        store.create(input("a")).unwrap();
        store.create(input("b")).unwrap();
        assert_eq!(store.create(input("c")), Err(MessageError::Full(2)));
    }

    #[test]
    fn concurrent_creates_get_distinct_ids() {
        let store = Arc::new(MessageStore::default());
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let store = Arc::clone(&store);
                thread::spawn(move || {
                    (0..200)
                        .map(|i| {
                            store
                                .create(input(&format!("{t}-{i}")))
                                .unwrap()
                                .id
                                .to_string()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut ids: Vec<_> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 1600);
        assert_eq!(store.len(), 1600);
    }
}
