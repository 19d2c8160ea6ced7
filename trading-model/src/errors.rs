//! Error records as the API sends them in `data`: `{"code": ..., "error": ...}`, each with
//! the HTTP status that goes into both the status line and `meta.status`.

use serde_json::{Value, json};

use crate::validate::ValidationFailure;

/// Every error code the server emits. Numbers and the quoted messages come from the
/// original's error documentation; the HTTP statuses follow the spec's error section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// 1440: required parameters absent, or values too short or wrong (422).
    MissingParameters,
    /// 1500: the IP is banned at the system's discretion (418).
    IpBanned,
    /// 1507: the key's own request allowance is used up (429).
    RateLimitedAccount,
    /// 1508: the per-IP allowance is used up (429).
    RateLimitedFirewall,
    /// 1509: requests continued after 429, so a growing ban applies (418).
    ExtendedBan,
    /// 1820: the `Authorization` header is not a readable token (422).
    UnprocessableAuthorization,
    /// 2000: the `Key` header names no known key (401).
    InvalidKey,
    /// 2001: the `Key` header is missing (401).
    MissingKey,
    /// 2010: the token carries no nonce (401).
    NonceMissing,
    /// 2011: the nonce is not above the last one seen for the key (401).
    NonceTooSmall,
    /// 2012: the nonce is not 17 to 20 digits (401).
    NonceFormat,
    /// 2014: the nonce is more than 60 s ahead of the server clock (401).
    NonceTooBig,
    /// 2100: the `Authorization` header is missing (401).
    MissingAuthorization,
    /// 2300: the request itself could not be read (malformed body) (400).
    MissingInformation,
    /// 2500: no such endpoint (404), or not with this method (405).
    UnknownEndpoint,
    /// 2750: accounts are closed on the website only (403).
    CloseAccountOnWebsite,
    /// 5000: the store failed (500).
    Database,
    /// 5100: a handler produced no data (500).
    EmptyData,
    /// 5200: an internal call timed out (503).
    NetworkTimeout,
}

impl ErrorCode {
    /// Every code, for tables and tests.
    pub const ALL: [ErrorCode; 19] = [
        ErrorCode::MissingParameters,
        ErrorCode::IpBanned,
        ErrorCode::RateLimitedAccount,
        ErrorCode::RateLimitedFirewall,
        ErrorCode::ExtendedBan,
        ErrorCode::UnprocessableAuthorization,
        ErrorCode::InvalidKey,
        ErrorCode::MissingKey,
        ErrorCode::NonceMissing,
        ErrorCode::NonceTooSmall,
        ErrorCode::NonceFormat,
        ErrorCode::NonceTooBig,
        ErrorCode::MissingAuthorization,
        ErrorCode::MissingInformation,
        ErrorCode::UnknownEndpoint,
        ErrorCode::CloseAccountOnWebsite,
        ErrorCode::Database,
        ErrorCode::EmptyData,
        ErrorCode::NetworkTimeout,
    ];

    /// The numeric code.
    pub fn code(self) -> u16 {
        match self {
            ErrorCode::MissingParameters => 1440,
            ErrorCode::IpBanned => 1500,
            ErrorCode::RateLimitedAccount => 1507,
            ErrorCode::RateLimitedFirewall => 1508,
            ErrorCode::ExtendedBan => 1509,
            ErrorCode::UnprocessableAuthorization => 1820,
            ErrorCode::InvalidKey => 2000,
            ErrorCode::MissingKey => 2001,
            ErrorCode::NonceMissing => 2010,
            ErrorCode::NonceTooSmall => 2011,
            ErrorCode::NonceFormat => 2012,
            ErrorCode::NonceTooBig => 2014,
            ErrorCode::MissingAuthorization => 2100,
            ErrorCode::MissingInformation => 2300,
            ErrorCode::UnknownEndpoint => 2500,
            ErrorCode::CloseAccountOnWebsite => 2750,
            ErrorCode::Database => 5000,
            ErrorCode::EmptyData => 5100,
            ErrorCode::NetworkTimeout => 5200,
        }
    }

    /// The HTTP status normally sent with the code.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::MissingParameters | ErrorCode::UnprocessableAuthorization => 422,
            ErrorCode::IpBanned | ErrorCode::ExtendedBan => 418,
            ErrorCode::RateLimitedAccount | ErrorCode::RateLimitedFirewall => 429,
            ErrorCode::InvalidKey
            | ErrorCode::MissingKey
            | ErrorCode::NonceMissing
            | ErrorCode::NonceTooSmall
            | ErrorCode::NonceFormat
            | ErrorCode::NonceTooBig
            | ErrorCode::MissingAuthorization => 401,
            ErrorCode::MissingInformation => 400,
            ErrorCode::UnknownEndpoint => 404,
            ErrorCode::CloseAccountOnWebsite => 403,
            ErrorCode::Database | ErrorCode::EmptyData => 500,
            ErrorCode::NetworkTimeout => 503,
        }
    }

    /// The message sent when the caller has nothing more specific.
    pub fn message(self) -> &'static str {
        match self {
            ErrorCode::MissingParameters => {
                "Missing POST parameter(s) required to proceed, review 'missing_parameters' for more information."
            }
            ErrorCode::IpBanned => "IP address banned.",
            ErrorCode::RateLimitedAccount => "Ratelimit reached for this key.",
            ErrorCode::RateLimitedFirewall => "Ratelimited.",
            ErrorCode::ExtendedBan => "Ratelimited. Extended ban applied.",
            ErrorCode::UnprocessableAuthorization => "Unprocessable Entity",
            ErrorCode::InvalidKey => "Invalid Key",
            ErrorCode::MissingKey => "Missing Key",
            ErrorCode::NonceMissing => "Nonce missing",
            ErrorCode::NonceTooSmall => "Nonce too small",
            ErrorCode::NonceFormat => "Nonce incorrectly formatted",
            ErrorCode::NonceTooBig => "Nonce too big",
            ErrorCode::MissingAuthorization => "Missing Authorization",
            ErrorCode::MissingInformation => "The request could not be read.",
            ErrorCode::UnknownEndpoint => "Unknown endpoint.",
            ErrorCode::CloseAccountOnWebsite => "Please use the website to close your account.",
            ErrorCode::Database => "Internal database error.",
            ErrorCode::EmptyData => "Empty endpoint data.",
            ErrorCode::NetworkTimeout => "Internal network timeout.",
        }
    }

    /// Looks a numeric code up.
    pub fn from_code(code: u16) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.code() == code)
    }
}

/// One error answer: the record for `data`, its HTTP status, and for validation failures
/// the three diagnostic lists that sit beside `data` at the top level.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// Which error.
    pub code: ErrorCode,
    /// Text for the `error` field.
    pub message: String,
    /// HTTP status (also `meta.status`).
    pub status: u16,
    /// Set for 1440 answers.
    pub validation: Option<ValidationFailure>,
}

impl ApiError {
    /// The code with its usual message and status.
    ///
    /// ```
    /// use trading_model::{ApiError, ErrorCode};
    /// let e = ApiError::new(ErrorCode::CloseAccountOnWebsite);
    /// assert_eq!(e.status, 403);
    /// assert_eq!(e.data()["code"], 2750);
    /// ```
    pub fn new(code: ErrorCode) -> ApiError {
        ApiError {
            code,
            message: code.message().to_owned(),
            status: code.status(),
            validation: None,
        }
    }

    /// Replaces the message.
    pub fn with_message(mut self, message: impl Into<String>) -> ApiError {
        self.message = message.into();
        self
    }

    /// Replaces the HTTP status (e.g. 405 for a known path with the wrong method).
    pub fn with_status(mut self, status: u16) -> ApiError {
        self.status = status;
        self
    }

    /// The 1440 answer for a failed validation.
    pub fn validation(failure: ValidationFailure) -> ApiError {
        ApiError {
            validation: Some(failure),
            ..ApiError::new(ErrorCode::MissingParameters)
        }
    }

    /// A 1440 answer naming the one parameter at fault, for checks validation cannot do.
    pub fn refused(param: &str, error: impl Into<String>) -> ApiError {
        ApiError::validation(ValidationFailure {
            missing_information: vec![json!({"parameter": param, "error": error.into()})],
            ..ValidationFailure::default()
        })
    }

    /// The `data` object: `{"code": ..., "error": ...}`.
    pub fn data(&self) -> Value {
        json!({"code": self.code.code(), "error": self.message})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorCode::ALL {
            assert!(seen.insert(c.code()));
            assert_eq!(ErrorCode::from_code(c.code()), Some(c));
            assert!((400..600).contains(&c.status()));
            // Code ranges: 1xxx network and limits, 2xxx input and auth, 5xxx internal.
            let family = c.code() / 1000;
            assert!(matches!(family, 1 | 2 | 5));
            assert_eq!(family == 5, c.status() >= 500, "{c:?}");
        }
        assert_eq!(ErrorCode::from_code(9999), None);
    }
}
