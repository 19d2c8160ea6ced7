//! What is wrong with a layer's settings. A leaf every module may use.

/// A layer that could not be built: what is wrong with its settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BuildError(String);

impl BuildError {
    pub(crate) fn new(message: impl Into<String>) -> BuildError {
        BuildError(message.into())
    }
}
