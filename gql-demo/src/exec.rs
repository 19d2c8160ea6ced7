//! One request in, one reply out: parsing, limits, the GET-cannot-mutate rule and the JSON
//! shape of results and errors. No transport: the server maps [`Status`] to HTTP.

use std::borrow::Cow;

use juniper::{GraphQLError, InputValue, OperationType, ValidatedOperation, parser::ParseError};
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::{Demo, Error, cycles, defaults};

/// Document limits, checked while parsing, before validation or execution.
///
/// Depth counts nested selection sets, fragment spreads, nested input values and list types.
/// Complexity is the number of fields an operation selects with every fragment spread expanded
/// (juniper's field count): it bounds the work of execution and the size of the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting allowed.
    pub max_depth: usize,
    /// Most fields an operation may select, fragments expanded.
    pub max_complexity: usize,
    /// Most tokens a document may have.
    pub max_tokens: usize,
}

impl Limits {
    /// Default depth. The standard introspection query nests 18 levels (its `ofType`
    /// chain), so the default leaves room for it and little more.
    pub const DEFAULT_MAX_DEPTH: usize = 20;
    /// Default complexity: the standard introspection query selects about 230 fields.
    pub const DEFAULT_MAX_COMPLEXITY: usize = 500;
    /// Default token count: the standard introspection query has about 190 tokens.
    pub const DEFAULT_MAX_TOKENS: usize = 2000;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_depth: Self::DEFAULT_MAX_DEPTH,
            max_complexity: Self::DEFAULT_MAX_COMPLEXITY,
            max_tokens: Self::DEFAULT_MAX_TOKENS,
        }
    }
}

/// Which operations a request may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OperationPolicy {
    /// Queries and mutations (POST).
    All,
    /// Queries only: a GET must not change state.
    QueriesOnly,
}

/// A GraphQL request in the GraphQL-over-HTTP shape. Unknown keys (some clients send `id`
/// or `extensions`) are ignored.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Request {
    /// The document.
    pub query: Option<String>,
    /// The operation to run when the document has several.
    #[serde(rename = "operationName")]
    pub operation_name: Option<String>,
    /// Variables: a JSON object, or a string holding one (as form posts send it).
    pub variables: Option<Json>,
}

impl Request {
    /// A request with only a document.
    pub fn from_query(query: impl Into<String>) -> Self {
        Self {
            query: Some(query.into()),
            ..Self::default()
        }
    }

    /// Parses a JSON request body: `{"query": ..., "operationName": ..., "variables": ...}`.
    ///
    /// ```
    /// let r = gql_demo::Request::from_json(br#"{"query": "{ creatures { id } }"}"#)?;
    /// assert_eq!(r.query.as_deref(), Some("{ creatures { id } }"));
    /// assert!(gql_demo::Request::from_json(b"[]").is_err());
    /// # Ok::<(), gql_demo::Error>(())
    /// ```
    pub fn from_json(body: &[u8]) -> Result<Self, Error> {
        let value: Json = serde_json::from_slice(body)
            .map_err(|e| Error::BadRequest(format!("request body is not valid JSON: {e}")))?;
        if value.is_array() {
            return Err(Error::BadRequest(
                "batched requests (a JSON array) are not supported; send one object".into(),
            ));
        }
        if !value.is_object() {
            return Err(Error::BadRequest(
                "request body must be a JSON object with a \"query\" string".into(),
            ));
        }
        serde_json::from_value(value)
            .map_err(|e| Error::BadRequest(format!("request body is not a GraphQL request: {e}")))
    }

    /// Builds a request from URL query or form parameters (`query`, `operationName`,
    /// `variables` as a JSON string). Unknown parameters are ignored, as browsers add some.
    pub fn from_params<'a, I>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (Cow<'a, str>, Cow<'a, str>)>,
    {
        let mut request = Self::default();
        for (key, value) in pairs {
            match &*key {
                "query" => request.query = Some(value.into_owned()),
                "operationName" if !value.is_empty() => {
                    request.operation_name = Some(value.into_owned());
                }
                "variables" if !value.is_empty() => {
                    request.variables = Some(Json::String(value.into_owned()));
                }
                _ => {}
            }
        }
        request
    }

    fn variables(&self) -> Result<juniper::Variables, Error> {
        let parsed;
        let value = match &self.variables {
            None | Some(Json::Null) => return Ok(juniper::Variables::new()),
            Some(Json::String(text)) => {
                parsed = serde_json::from_str::<Json>(text)
                    .map_err(|e| Error::BadRequest(format!("variables are not valid JSON: {e}")))?;
                &parsed
            }
            Some(value) => value,
        };
        match value {
            Json::Null => Ok(juniper::Variables::new()),
            Json::Object(_) => {
                let input: InputValue = serde_json::from_value(value.clone()).map_err(|e| {
                    Error::BadRequest(format!("variables hold an unsupported value: {e}"))
                })?;
                Ok(input
                    .to_object_value()
                    .map(|object| {
                        object
                            .into_iter()
                            .map(|(k, v)| (k.to_owned(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default())
            }
            _ => Err(Error::BadRequest("variables must be a JSON object".into())),
        }
    }
}

/// How the server should answer: the body is always JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// The operation ran (field errors may be in the body): HTTP 200.
    Ok,
    /// The request or document was rejected before execution: HTTP 400.
    BadRequest,
    /// A mutation arrived where only queries may run: HTTP 405.
    MethodNotAllowed,
}

impl Status {
    /// The HTTP status code for this outcome.
    pub fn http_code(self) -> u16 {
        match self {
            Self::Ok => 200,
            Self::BadRequest => 400,
            Self::MethodNotAllowed => 405,
        }
    }
}

/// The answer to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// How it went.
    pub status: Status,
    /// JSON text: `{"data": ...}`, `{"data": ..., "errors": [...]}` or `{"errors": [...]}`.
    /// Kept as text so that the fields of `data` stay in the order the query asked for.
    pub body: String,
}

impl Reply {
    fn error(status: Status, message: impl Into<String>) -> Self {
        Self::failure(status, message.into(), None)
    }

    fn coded_error(status: Status, message: &str, code: &str) -> Self {
        Self::failure(status, message.into(), Some(json!({ "code": code })))
    }

    fn failure(status: Status, message: String, extensions: Option<Json>) -> Self {
        let failure = Failure {
            errors: vec![ErrorOut {
                message,
                locations: None,
                path: None,
                extensions,
            }],
        };
        Self {
            status,
            body: serde_json::to_string(&failure).unwrap_or_default(),
        }
    }

    /// The body parsed as a JSON value (object keys sorted), for tests and tools.
    pub fn json(&self) -> Json {
        serde_json::from_str(&self.body).unwrap_or(Json::Null)
    }
}

#[derive(Serialize)]
struct Success<'a> {
    data: &'a juniper::Value,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    errors: &'a [juniper::ExecutionError<juniper::DefaultScalarValue>],
}

#[derive(Serialize)]
struct Failure {
    errors: Vec<ErrorOut>,
}

/// One error with its keys in the conventional order (message first).
#[derive(Serialize)]
struct ErrorOut {
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    locations: Option<Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extensions: Option<Json>,
}

impl ErrorOut {
    fn from_json(mut value: Json) -> Self {
        let mut take = |key: &str| value.as_object_mut().and_then(|o| o.remove(key));
        Self {
            message: take("message")
                .and_then(|m| m.as_str().map(str::to_owned))
                .unwrap_or_default(),
            locations: take("locations"),
            path: take("path"),
            extensions: take("extensions"),
        }
    }
}

impl Demo {
    /// Runs one request to the end: parse within the limits, validate, check `policy`,
    /// execute. Every failure is a [`Reply`] with a message; nothing panics on input.
    ///
    /// ```
    /// use gql_demo::{Demo, OperationPolicy, Request, Status};
    ///
    /// let demo = Demo::builtin();
    /// let reply = demo.execute(
    ///     &Request::from_query(r#"{ creature(name: "Cindle") { id } }"#),
    ///     OperationPolicy::QueriesOnly,
    /// );
    /// assert_eq!(reply.status, Status::Ok);
    /// assert_eq!(reply.json()["data"]["creature"]["id"], "001");
    /// assert_eq!(reply.body, r#"{"data":{"creature":{"id":"001"}}}"#);
    /// ```
    pub fn execute(&self, request: &Request, policy: OperationPolicy) -> Reply {
        let query = match request.query.as_deref() {
            Some(q) if !q.trim().is_empty() => q,
            _ => return Reply::error(Status::BadRequest, "Must provide query string."),
        };
        let variables = match request.variables() {
            Ok(v) => v,
            Err(e) => return Reply::error(Status::BadRequest, e.to_string()),
        };
        let blanked = defaults::blank_unknown_defaults(query, &self.schema);
        let validated = blanked.as_deref().unwrap_or(query);
        let operation = match ValidatedOperation::new(
            validated,
            request.operation_name.as_deref(),
            &self.schema,
        ) {
            // Blanked text always has an unknown type, so it never gets here.
            Ok(operation) if blanked.is_none() => operation,
            Ok(_) => {
                return Reply::error(Status::BadRequest, "a variable's type is unknown");
            }
            Err(GraphQLError::ValidationError(errors)) => {
                let errors = cycles::reword(errors, validated, &self.schema);
                return self.rejected(&GraphQLError::ValidationError(errors));
            }
            Err(e) => return self.rejected(&e),
        };
        // The schema has no subscription root, so juniper's validation skips the fields of a
        // subscription and would only refuse it at execution, in juniper's words. The message
        // is graphql-http's, checked, as there, after validation and before the GET rule.
        if operation.operation_type() == OperationType::Subscription {
            return Reply::coded_error(
                Status::BadRequest,
                "Subscriptions are not supported",
                "SUBSCRIPTIONS_NOT_SUPPORTED",
            );
        }
        if operation.operation_type() == OperationType::Mutation
            && policy == OperationPolicy::QueriesOnly
        {
            return Reply::error(
                Status::MethodNotAllowed,
                "Can only perform a mutation operation from a POST request.",
            );
        }
        match operation.execute_sync(&variables, &self.context) {
            Ok((data, errors)) => Reply {
                status: Status::Ok,
                body: serde_json::to_string(&Success {
                    data: &data,
                    errors: &errors,
                })
                .unwrap_or_default(),
            },
            Err(e) => self.rejected(&e),
        }
    }

    fn rejected(&self, error: &GraphQLError) -> Reply {
        let mut errors: Vec<ErrorOut> = match serde_json::to_value(error) {
            Ok(Json::Array(items)) => items.into_iter().map(ErrorOut::from_json).collect(),
            _ => vec![ErrorOut::from_json(json!({ "message": error.to_string() }))],
        };
        if let GraphQLError::ParseError(spanning) = error {
            let limits = &self.limits;
            let rewritten = match spanning.item {
                ParseError::DepthLimitExceeded(_) => Some((
                    "DEPTH_LIMIT_EXCEEDED",
                    format!(
                        "Query is too deep: it nests more than {} levels",
                        limits.max_depth
                    ),
                    limits.max_depth,
                )),
                ParseError::FieldLimitExceeded(_) => Some((
                    "COMPLEXITY_LIMIT_EXCEEDED",
                    format!(
                        "Query is too complex: it selects more than {} fields \
                         (fragments count once per spread)",
                        limits.max_complexity
                    ),
                    limits.max_complexity,
                )),
                ParseError::TokenLimitExceeded(_) => Some((
                    "TOKEN_LIMIT_EXCEEDED",
                    format!(
                        "Query is too long: it has more than {} tokens",
                        limits.max_tokens
                    ),
                    limits.max_tokens,
                )),
                _ => None,
            };
            if let (Some((code, message, limit)), Some(first)) = (rewritten, errors.first_mut()) {
                first.message = message;
                first.extensions = Some(json!({ "code": code, "limit": limit }));
            }
        }
        Reply {
            status: Status::BadRequest,
            body: serde_json::to_string(&Failure { errors }).unwrap_or_default(),
        }
    }
}
