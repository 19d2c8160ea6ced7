//! Typed parameters: one struct per endpoint that has parameters, its fields that
//! endpoint's parameters with Rust types from their catalogue kinds, built from a
//! [`Valid`] in one call (`typed::ExchangeQueryOrderCreate::from_valid(&valid)`).
//! Endpoints with the same parameter list share one struct through a type alias.
//!
//! The structs live in a checked-in file, `typed/generated.rs`, written from
//! `data/endpoints.json` by the `typed_params` test, which fails when the file and the
//! catalogue differ (`UPDATE_TYPED=1 cargo test -p trading-model --test typed_params`
//! rewrites it). Checked in rather than written by a build script so the structs can be
//! read, grepped and reviewed like any other source, and the crate keeps no build step.
//!
//! Types: `string`, `date`, `enum` and `decimal` (kept as written) are `String`,
//! `integer` is `i64`, `boolean` is `bool`, `csv` and `array` are `Vec<String>`.
//! Required parameters and those with a catalogue default are always present after
//! validation, so they are plain `T`; the others are `Option<T>`.

use crate::errors::ApiError;
use crate::validate::{Valid, ValidationFailure};

/// Reading one field from a [`Valid`]. Validation already guaranteed presence and kind,
/// so the error is only reachable with a `Valid` of another endpoint; it is then the
/// same 1440 answer a missing parameter gets, never a panic.
trait Field: Sized {
    fn read(valid: &Valid, name: &str) -> Result<Self, ApiError>;
}

fn missing(name: &str) -> ApiError {
    ApiError::validation(ValidationFailure {
        missing_parameters: vec![name.to_owned()],
        ..ValidationFailure::default()
    })
}

impl Field for String {
    fn read(valid: &Valid, name: &str) -> Result<Self, ApiError> {
        valid
            .text(name)
            .map(str::to_owned)
            .ok_or_else(|| missing(name))
    }
}

impl Field for i64 {
    fn read(valid: &Valid, name: &str) -> Result<Self, ApiError> {
        valid.integer(name).ok_or_else(|| missing(name))
    }
}

impl Field for bool {
    fn read(valid: &Valid, name: &str) -> Result<Self, ApiError> {
        valid.boolean(name).ok_or_else(|| missing(name))
    }
}

impl Field for Vec<String> {
    fn read(valid: &Valid, name: &str) -> Result<Self, ApiError> {
        valid
            .list(name)
            .map(<[String]>::to_vec)
            .ok_or_else(|| missing(name))
    }
}

impl<T: Field> Field for Option<T> {
    fn read(valid: &Valid, name: &str) -> Result<Self, ApiError> {
        match valid.get(name) {
            None => Ok(None),
            Some(_) => T::read(valid, name).map(Some),
        }
    }
}

/// Declares the structs; `generated.rs` is one invocation of it.
macro_rules! endpoint_params {
    ($(
        $(#[$doc:meta])*
        $name:ident {
            $( $(#[$fdoc:meta])* $field:ident : $ty:ty = $key:literal, )*
        }
    )*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct $name {
            $( $(#[$fdoc])* pub $field: $ty, )*
        }

        impl $name {
            /// The parameters of a call that passed validation for this endpoint.
            pub fn from_valid(valid: &Valid) -> Result<Self, ApiError> {
                Ok(Self {
                    $( $field: Field::read(valid, $key)?, )*
                })
            }
        }
    )*};
}

/// Declares the structs of endpoints that share an earlier endpoint's parameter list.
macro_rules! endpoint_aliases {
    ($( $(#[$doc:meta])* $name:ident = $target:ident; )*) => {$(
        $(#[$doc])*
        pub type $name = $target;
    )*};
}

include!("typed/generated.rs");
