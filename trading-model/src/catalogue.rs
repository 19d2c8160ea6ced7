//! The endpoint catalogue: one data file describes every endpoint, and the router,
//! validation, `system/endpoints` and the OpenAPI document are all derived from it.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::validate::check_default;

/// The catalogue shipped with the crate (`data/endpoints.json`).
const BUILTIN_JSON: &str = include_str!("../data/endpoints.json");

/// HTTP methods the API uses. Anything else is answered with 405 by the router.
///
/// Every endpoint answers both: the original SDKs pick the method from the input (GET
/// when there is none, POST with a form body otherwise), whatever the documentation says.
/// [`Endpoint::methods`] keeps the documented ones for `system/endpoints` and OpenAPI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    /// Parameters come from the query string only.
    Get,
    /// Parameters come from the query string and the body; the query string wins.
    Post,
}

impl Method {
    /// The methods every endpoint answers.
    pub const SERVED: [Method; 2] = [Method::Get, Method::Post];

    /// Parses an HTTP method name; `None` for methods the API never serves.
    pub fn parse(s: &str) -> Option<Method> {
        match s {
            "GET" => Some(Method::Get),
            "POST" => Some(Method::Post),
            _ => None,
        }
    }

    /// The upper-case wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which of the original's three hosts documented the endpoint. One server answers all of
/// them; the value is kept so a deployment can split them again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Host {
    /// The account and trading API.
    Base,
    /// Public market data.
    Marketdata,
    /// Trending news.
    Trendingnews,
}

/// How sure we are about an endpoint's `auth_required` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Evidence {
    /// A documented example or statement shows it.
    Documented,
    /// Inferred from the endpoint's category (account data needs a key, market data not).
    Assumed,
}

/// The shape a parameter value must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Any text.
    String,
    /// A whole number, optionally bounded by `min` / `max`.
    Integer,
    /// A non-negative decimal number written with digits and at most one dot.
    Decimal,
    /// `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`.
    Boolean,
    /// One of `allowed` (compared ignoring ASCII case).
    Enum,
    /// Comma-separated items, at most `max_items` of them.
    Csv,
    /// A calendar date written `YYYY-MM-DD`.
    Date,
    /// Several values (`name[]=a&name[]=b`, repeated keys or a JSON array).
    Array,
}

/// Named value checks. The first six are the names the original lists in
/// `system/list-validation-functions`; the rest are ours and say so in the docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Validator {
    /// A millisecond timestamp as JavaScript produces it (a non-negative safe integer).
    JsMillisecondUpdate,
    /// An e-mail address.
    IsEmail,
    /// The caller's account password; only a handler with account access can check it.
    PasswordAuth,
    /// A trading code `<exchange>-<pair>`, e.g. `binance-btcusdt`.
    IsValidSymbol,
    /// `buy` or `sell`.
    IsValidSide,
    /// An order book level `ob1` .. `ob5` (or empty for the top level).
    IsValidLevel,
    /// A pair without exchange prefix, e.g. `btcusdt` (ours).
    IsValidPair,
    /// Two trading codes joined by `+` (ours).
    IsValidCombination,
    /// A market written `BASE/QUOTE` (ours).
    IsBaseQuote,
    /// An exchange code the server supports; checked when the caller supplies the list (ours).
    IsSupportedExchange,
    /// An `http` or `https` URL with a host, such as an article's image (ours).
    IsHttpUrl,
}

impl Validator {
    /// The names the original API reports from `system/list-validation-functions`.
    pub const ORIGINAL_NAMES: [&'static str; 6] = [
        "js_millisecond_update",
        "is_email",
        "password_auth",
        "is_valid_symbol",
        "is_valid_side",
        "is_valid_level",
    ];

    /// The snake_case name used in the catalogue and in `system/endpoints`.
    pub fn name(self) -> &'static str {
        match self {
            Validator::JsMillisecondUpdate => "js_millisecond_update",
            Validator::IsEmail => "is_email",
            Validator::PasswordAuth => "password_auth",
            Validator::IsValidSymbol => "is_valid_symbol",
            Validator::IsValidSide => "is_valid_side",
            Validator::IsValidLevel => "is_valid_level",
            Validator::IsValidPair => "is_valid_pair",
            Validator::IsValidCombination => "is_valid_combination",
            Validator::IsBaseQuote => "is_base_quote",
            Validator::IsSupportedExchange => "is_supported_exchange",
            Validator::IsHttpUrl => "is_http_url",
        }
    }
}

/// One documented parameter of an endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// Wire name.
    pub name: String,
    /// Whether a call without it is refused. A required parameter with a default is
    /// never refused: the default fills it.
    pub required: bool,
    /// Fewest characters a given value may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<usize>,
    /// Value used when the caller sends none (or only blanks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Value shape.
    pub kind: Kind,
    /// Accepted values of an `enum` parameter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
    /// Most items of a `csv` or `array` parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<usize>,
    /// Smallest accepted `integer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    /// Largest accepted `integer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    /// Extra named check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validator: Option<Validator>,
    /// What the parameter means, in this project's words.
    pub description: String,
    /// Set when the original documents another wire name (the unnamed `export/fetch` id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_name: Option<String>,
    /// Added by this sandbox: the original documents the endpoint without parameters
    /// although its purpose needs input (which order `order-cancel` cancels, say).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sandbox: bool,
}

/// Paging settings of a list endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Paging {
    /// Rows per page when `limit` is not sent (10, or 100 for two endpoints).
    pub default_limit: u32,
}

/// One endpoint of the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// Path below `/api/v2/`, without leading slash (`system/timestamp`).
    pub path: String,
    /// Methods the original documents (the server answers both, see [`Method`]).
    pub methods: Vec<Method>,
    /// Original host.
    pub host: Host,
    /// Short title.
    pub name: String,
    /// What the endpoint does, in this project's words.
    pub description: String,
    /// Whether a call needs the `Key` and `Authorization` headers.
    pub auth_required: bool,
    /// How the `auth_required` value is known.
    pub auth_evidence: Evidence,
    /// Documented parameters, in documentation order.
    pub parameters: Vec<Param>,
    /// Present on list endpoints that take `limit` and `pagenumber`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paging: Option<Paging>,
    /// Set on undocumented aliases to the endpoint they mirror.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias_of: Option<String>,
}

impl Endpoint {
    /// The first path segment (`strategy` for `strategy/data/list`); used as OpenAPI tag.
    pub fn group(&self) -> &str {
        self.path.split('/').next().unwrap_or("")
    }

    /// The path without its last segment (`strategy/data` for `strategy/data/list`).
    pub fn parent(&self) -> &str {
        self.path.rsplit_once('/').map_or("", |(p, _)| p)
    }

    /// Whether the original documents `method` for this endpoint.
    pub fn documents(&self, method: Method) -> bool {
        self.methods.contains(&method)
    }

    /// Looks up a parameter by wire name.
    pub fn param(&self, name: &str) -> Option<&Param> {
        self.parameters.iter().find(|p| p.name == name)
    }
}

/// Why a catalogue file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogueError {
    /// The file is not the expected JSON shape.
    #[error("catalogue is not valid JSON of the expected shape: {0}")]
    Json(#[from] serde_json::Error),
    /// The file parsed but breaks a rule (duplicate path, bad default, ...).
    #[error("catalogue entry {path:?}: {problem}")]
    Invalid {
        /// Offending endpoint path.
        path: String,
        /// What is wrong.
        problem: String,
    },
}

/// Result of routing a request path and method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// No endpoint has this path (HTTP 404).
    NotFound,
    /// The path exists but the method is neither GET nor POST (HTTP 405); lists the
    /// methods served.
    MethodNotAllowed(Vec<Method>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    format: u32,
    endpoints: Vec<Endpoint>,
}

/// The parsed, checked catalogue with a path index.
#[derive(Debug, Clone)]
pub struct Catalogue {
    endpoints: Vec<Endpoint>,
    index: HashMap<String, usize>,
}

impl Catalogue {
    /// Parses and checks a catalogue document.
    ///
    /// ```
    /// let json = r#"{"format": 1, "endpoints": [{"path": "system/timestamp", "methods": ["GET"],
    ///   "host": "base", "name": "Time", "description": "Server clock.", "auth_required": false,
    ///   "auth_evidence": "documented", "parameters": []}]}"#;
    /// let cat = trading_model::Catalogue::from_json(json).unwrap();
    /// assert_eq!(cat.len(), 1);
    /// assert!(trading_model::Catalogue::from_json("{}").is_err());
    /// ```
    pub fn from_json(text: &str) -> Result<Catalogue, CatalogueError> {
        let file: File = serde_json::from_str(text)?;
        if file.format != 1 {
            return Err(CatalogueError::Invalid {
                path: String::new(),
                problem: format!("unknown format {}", file.format),
            });
        }
        let mut index = HashMap::new();
        for (i, ep) in file.endpoints.iter().enumerate() {
            check_endpoint(ep)?;
            if index.insert(ep.path.clone(), i).is_some() {
                return Err(invalid(ep, "path listed twice".into()));
            }
        }
        for ep in &file.endpoints {
            if let Some(target) = &ep.alias_of {
                if !index.contains_key(target) {
                    return Err(invalid(ep, format!("alias of unknown path {target:?}")));
                }
            }
        }
        Ok(Catalogue {
            endpoints: file.endpoints,
            index,
        })
    }

    /// The catalogue compiled into the crate, parsed on first use.
    ///
    /// ```
    /// let cat = trading_model::Catalogue::builtin();
    /// assert_eq!(cat.len(), 180); // 179 documented paths and the `system/ep` alias
    /// assert!(cat.get("finance/list-depoists").is_some());
    /// ```
    pub fn builtin() -> &'static Catalogue {
        static CAT: OnceLock<Catalogue> = OnceLock::new();
        CAT.get_or_init(|| {
            // The file is part of the source tree and a unit test parses it, so a failure
            // here is a build defect, not bad input.
            Catalogue::from_json(BUILTIN_JSON).expect("built-in catalogue is valid")
        })
    }

    /// All endpoints in catalogue order.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// Number of endpoints (aliases included).
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Whether the catalogue has no endpoints.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// The endpoint with this path (below `/api/v2/`, no leading slash).
    pub fn get(&self, path: &str) -> Option<&Endpoint> {
        self.index.get(path).map(|&i| &self.endpoints[i])
    }

    /// Routes a method name and a path below `/api/v2/`; one trailing slash is ignored.
    /// GET and POST reach every endpoint (see [`Method`]).
    ///
    /// ```
    /// use trading_model::{Catalogue, RouteError, Method};
    /// let cat = Catalogue::builtin();
    /// assert_eq!(cat.route("GET", "system/timestamp").unwrap().path, "system/timestamp");
    /// // Documented as POST only; an SDK calling it without input sends GET.
    /// assert_eq!(cat.route("GET", "system/ping").unwrap().path, "system/ping");
    /// assert_eq!(cat.route("GET", "no/such").unwrap_err(), RouteError::NotFound);
    /// assert_eq!(cat.route("DELETE", "system/ping").unwrap_err(),
    ///            RouteError::MethodNotAllowed(Method::SERVED.to_vec()));
    /// ```
    pub fn route(&self, method: &str, path: &str) -> Result<&Endpoint, RouteError> {
        let path = path.strip_suffix('/').unwrap_or(path);
        let ep = self.get(path).ok_or(RouteError::NotFound)?;
        match Method::parse(method) {
            Some(_) => Ok(ep),
            None => Err(RouteError::MethodNotAllowed(Method::SERVED.to_vec())),
        }
    }
}

fn invalid(ep: &Endpoint, problem: String) -> CatalogueError {
    CatalogueError::Invalid {
        path: ep.path.clone(),
        problem,
    }
}

fn check_endpoint(ep: &Endpoint) -> Result<(), CatalogueError> {
    let path_ok = !ep.path.is_empty()
        && ep.path.split('/').all(|seg| {
            !seg.is_empty()
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        });
    if !path_ok {
        return Err(invalid(ep, "path must be lower-case segments".into()));
    }
    if ep.methods.is_empty() {
        return Err(invalid(ep, "no methods".into()));
    }
    if ep.description.trim().is_empty() {
        return Err(invalid(ep, "empty description".into()));
    }
    let mut names = HashSet::new();
    for p in &ep.parameters {
        if p.name.is_empty() || !names.insert(p.name.as_str()) {
            return Err(invalid(
                ep,
                format!("parameter name {:?} empty or repeated", p.name),
            ));
        }
        if p.kind == Kind::Enum && p.allowed.is_empty() {
            return Err(invalid(
                ep,
                format!("enum parameter {} lists no values", p.name),
            ));
        }
        if p.kind != Kind::Enum && !p.allowed.is_empty() {
            return Err(invalid(
                ep,
                format!("{} lists values but is no enum", p.name),
            ));
        }
        if let (Some(lo), Some(hi)) = (p.min, p.max) {
            if lo > hi {
                return Err(invalid(ep, format!("{}: min above max", p.name)));
            }
        }
        if let Some(d) = &p.default {
            check_default(p, d)
                .map_err(|why| invalid(ep, format!("default of {}: {why}", p.name)))?;
        }
    }
    if let Some(paging) = ep.paging {
        let limit = ep.param("limit");
        let ok = paging.default_limit >= 1
            && ep.param("pagenumber").is_some()
            && limit.and_then(|l| l.default.as_deref()) == Some(&paging.default_limit.to_string());
        if !ok {
            return Err(invalid(
                ep,
                "paging needs limit (with that default) and pagenumber".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(param: &str) -> String {
        format!(
            r#"{{"format": 1, "endpoints": [{{"path": "a/b", "methods": ["POST"], "host": "base",
            "name": "n", "description": "d", "auth_required": true, "auth_evidence": "assumed",
            "parameters": [{param}]}}]}}"#
        )
    }

    #[test]
    fn builtin_parses_with_documented_counts() {
        let cat = Catalogue::builtin();
        assert_eq!(cat.len(), 180);
        let documented = cat
            .endpoints()
            .iter()
            .filter(|e| e.alias_of.is_none())
            .count();
        assert_eq!(documented, 179);
        assert_eq!(
            cat.get("system/ep").unwrap().alias_of.as_deref(),
            Some("system/endpoints")
        );
    }

    #[test]
    fn refuses_broken_entries() {
        let ok = one(r#"{"name": "x", "required": true, "kind": "string", "description": "d"}"#);
        assert!(Catalogue::from_json(&ok).is_ok());
        let bad = [
            r#"{"name": "x", "required": true, "kind": "enum", "description": "d"}"#,
            r#"{"name": "x", "required": true, "kind": "integer", "min": 5, "max": 1, "description": "d"}"#,
            r#"{"name": "x", "required": false, "kind": "integer", "default": "ten", "description": "d"}"#,
            r#"{"name": "x", "required": false, "kind": "string", "surprise": 1, "description": "d"}"#,
            r#"{"name": "", "required": false, "kind": "string", "description": "d"}"#,
        ];
        for b in bad {
            assert!(Catalogue::from_json(&one(b)).is_err(), "{b}");
        }
        let twice = r#"{"format": 1, "endpoints": [
            {"path": "a", "methods": ["GET"], "host": "base", "name": "n", "description": "d",
             "auth_required": false, "auth_evidence": "assumed", "parameters": []},
            {"path": "a", "methods": ["GET"], "host": "base", "name": "n", "description": "d",
             "auth_required": false, "auth_evidence": "assumed", "parameters": []}]}"#;
        assert!(Catalogue::from_json(twice).is_err());
    }

    #[test]
    fn route_ignores_one_trailing_slash_only() {
        let cat = Catalogue::builtin();
        assert!(cat.route("GET", "system/timestamp/").is_ok());
        assert_eq!(
            cat.route("GET", "system/timestamp//"),
            Err(RouteError::NotFound)
        );
        assert_eq!(
            cat.route("GET", "System/Timestamp"),
            Err(RouteError::NotFound)
        );
        assert!(matches!(
            cat.route("get", "system/timestamp"),
            Err(RouteError::MethodNotAllowed(_))
        ));
    }
}
