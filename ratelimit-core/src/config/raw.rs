//! The text of the document's string fields as written, which Go's YAML decoder (yaml.v2,
//! upstream's) stores in a string field whatever the scalar resolves to: `value: 0x1F` is
//! the value "0x1F" there, not 31, and `TRUE` stays "TRUE". The YAML tree
//! (`serde_yaml::Value`) keeps only the resolved scalar, so the reader takes a string
//! field's text from this mirror when it has it.
//!
//! The mirror is the same document deserialized into structs whose string fields are
//! `String`, for which `serde_yaml` hands over a plain scalar's text unresolved. It is
//! best effort: a document that does not fit it has no mirror, and the reader falls back
//! to the resolved scalar's text (such a document fails the reader's own checks anyway).

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawRoot {
    pub(super) domain: Option<String>,
    pub(super) descriptors: Option<Vec<RawDescriptor>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawDescriptor {
    pub(super) key: Option<String>,
    pub(super) value: Option<String>,
    pub(super) rate_limit: Option<RawLimit>,
    pub(super) rate_limits: Option<Vec<RawLimit>>,
    pub(super) descriptors: Option<Vec<RawDescriptor>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawLimit {
    pub(super) unit: Option<String>,
    pub(super) name: Option<String>,
    pub(super) algorithm: Option<String>,
    pub(super) replaces: Option<Vec<RawReplace>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawReplace {
    pub(super) name: Option<String>,
}

/// The mirror of the first document of `yaml`, if it fits.
pub(super) fn read(yaml: &str) -> Option<RawRoot> {
    let first = serde_yaml::Deserializer::from_str(yaml).next()?;
    Option::<RawRoot>::deserialize(first).ok().flatten()
}

/// The `i`th element of an optional mirrored list.
pub(super) fn nth<T>(list: Option<&Vec<T>>, i: usize) -> Option<&T> {
    list.and_then(|l| l.get(i))
}
