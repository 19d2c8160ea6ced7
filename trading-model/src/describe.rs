//! Documents generated from the catalogue: the `data` of `system/endpoints` and an
//! OpenAPI 3.1 description. Both are pure functions of the catalogue, so they cannot
//! drift from what the router and validation do.

use serde_json::{Map, Value, json};

use crate::catalogue::{Catalogue, Endpoint, Kind, Method, Param};
use crate::errors::ErrorCode;

/// Path prefix every endpoint is served under.
pub const PREFIX: &str = "/api/v2/";

/// One parameter as listed by `system/endpoints`.
fn param_record(p: &Param) -> Value {
    let mut v = serde_json::to_value(p).unwrap_or_else(|_| json!({}));
    // Name the validators exactly as the catalogue does; serde already does, but keep the
    // list endpoint stable if the enum's serde attributes ever change.
    if let Some(val) = p.validator {
        v["validator"] = json!(val.name());
    }
    v
}

/// The `data` of `system/endpoints` (and its `system/ep` alias): one record per endpoint
/// with `path`, `parent`, `name`, `description`, `auth_required`, `parameters`, plus
/// `methods` and `host`, which the original leaves out.
///
/// ```
/// let data = trading_model::endpoint_records(trading_model::Catalogue::builtin());
/// let first = &data.as_array().unwrap()[0];
/// assert_eq!(first["path"], "system/timestamp");
/// assert_eq!(first["auth_required"], false);
/// ```
pub fn endpoint_records(cat: &Catalogue) -> Value {
    Value::Array(
        cat.endpoints()
            .iter()
            .map(|e| {
                let mut r = json!({
                    "path": e.path,
                    "parent": e.parent(),
                    "name": e.name,
                    "description": e.description,
                    "auth_required": e.auth_required,
                    "methods": e.methods,
                    "host": e.host,
                    "parameters": e.parameters.iter().map(param_record).collect::<Vec<_>>(),
                });
                if let Some(a) = &e.alias_of {
                    r["alias_of"] = json!(a);
                }
                r
            })
            .collect(),
    )
}

fn schema_of(p: &Param) -> Value {
    let mut s = Map::new();
    match p.kind {
        Kind::Integer => {
            s.insert("type".into(), json!("integer"));
            if let Some(lo) = p.min {
                s.insert("minimum".into(), json!(lo));
            }
            if let Some(hi) = p.max {
                s.insert("maximum".into(), json!(hi));
            }
        }
        Kind::Boolean => {
            s.insert("type".into(), json!("string"));
            s.insert(
                "enum".into(),
                json!(["true", "false", "1", "0", "yes", "no", "on", "off"]),
            );
        }
        Kind::Enum => {
            s.insert("type".into(), json!("string"));
            let values: Vec<&String> = p.allowed.iter().filter(|a| !a.is_empty()).collect();
            s.insert("enum".into(), json!(values));
        }
        Kind::Decimal => {
            s.insert("type".into(), json!("string"));
            s.insert("pattern".into(), json!(r"^([0-9]+(\.[0-9]+)?|\.[0-9]+)$"));
        }
        Kind::Date => {
            s.insert("type".into(), json!("string"));
            s.insert("format".into(), json!("date"));
            s.insert("pattern".into(), json!(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"));
        }
        Kind::Array => {
            let mut item = json!({"type": "string", "pattern": r"\S"});
            if let Some(n) = p.min_length {
                item["minLength"] = json!(n);
            }
            s.insert("type".into(), json!("array"));
            s.insert("items".into(), item);
            s.insert("minItems".into(), json!(1));
            if let Some(n) = p.max_items {
                s.insert("maxItems".into(), json!(n));
            }
        }
        Kind::String | Kind::Csv => {
            s.insert("type".into(), json!("string"));
            // Blank values count as absent, so a schema-valid value needs one visible character.
            s.insert("pattern".into(), json!(r"\S"));
        }
    }
    if p.kind != Kind::Array {
        if let Some(n) = p.min_length {
            s.insert("minLength".into(), json!(n));
        }
    }
    if let Some(d) = &p.default {
        let dv = match p.kind {
            Kind::Integer => d.parse::<i64>().map_or_else(|_| json!(d), |i| json!(i)),
            _ => json!(d),
        };
        s.insert("default".into(), dv);
    }
    let mut desc = p.description.clone();
    if let Some(v) = p.validator {
        desc.push_str(&format!(" Checked by `{}`.", v.name()));
    }
    if let Some(n) = p.max_items.filter(|_| p.kind == Kind::Csv) {
        desc.push_str(&format!(" Comma-separated, at most {n} items."));
    }
    if p.sandbox {
        desc.push_str(" Added by this sandbox: the original documents no parameter here.");
        s.insert("x-sandbox".into(), json!(true));
    }
    s.insert("description".into(), json!(desc));
    Value::Object(s)
}

/// Whether a caller must send the parameter: required and without a default.
fn must_send(p: &Param) -> bool {
    p.required && p.default.is_none()
}

fn operation(ep: &Endpoint, method: Method) -> Value {
    let mut op = Map::new();
    let op_id = format!(
        "{}_{}",
        method.as_str().to_ascii_lowercase(),
        ep.path.replace(['/', '-'], "_")
    );
    op.insert("operationId".into(), json!(op_id));
    op.insert("summary".into(), json!(ep.name));
    op.insert("description".into(), json!(ep.description));
    op.insert("tags".into(), json!([ep.group()]));
    if ep.auth_required {
        op.insert("security".into(), json!([{"Key": [], "Authorization": []}]));
    } else {
        op.insert("security".into(), json!([]));
    }
    match method {
        Method::Get => {
            let params: Vec<Value> = ep
                .parameters
                .iter()
                .map(|p| {
                    let mut v = json!({
                        "name": p.name,
                        "in": "query",
                        "required": must_send(p),
                        "schema": schema_of(p),
                    });
                    if p.kind == Kind::Array {
                        v["style"] = json!("form");
                        v["explode"] = json!(true);
                    }
                    v
                })
                .collect();
            if !params.is_empty() {
                op.insert("parameters".into(), json!(params));
            }
        }
        Method::Post => {
            let props: Map<String, Value> = ep
                .parameters
                .iter()
                .map(|p| (p.name.clone(), schema_of(p)))
                .collect();
            let required: Vec<&str> = ep
                .parameters
                .iter()
                .filter(|p| must_send(p))
                .map(|p| p.name.as_str())
                .collect();
            let mut schema = json!({"type": "object", "properties": props});
            if !required.is_empty() {
                schema["required"] = json!(required);
            }
            op.insert(
                "requestBody".into(),
                json!({
                    "required": !required.is_empty(),
                    "content": {
                        "application/x-www-form-urlencoded": {"schema": schema},
                        "application/json": {"schema": schema},
                    }
                }),
            );
        }
    }
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({"description": "Success envelope.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Envelope"}}}}),
    );
    let err = json!({"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}});
    let mut add = |status: &str, why: &str| {
        let mut e = err.clone();
        e["description"] = json!(why);
        responses.insert(status.into(), e);
    };
    add("400", "The body could not be read (code 2300).");
    if !ep.parameters.is_empty() {
        add("422", "Parameters missing, too short or wrong (code 1440).");
    }
    if ep.auth_required {
        add("401", "Key or token missing or wrong (codes 2000-2100).");
        add(
            "403",
            "Not permitted: a sub-account key on a primary-only endpoint (code 1820), or an action only the website performs (code 2750).",
        );
    }
    if ep.path == "user/close-account" {
        add("403", "Accounts are closed on the website (code 2750).");
    }
    add("429", "Rate limit reached (codes 1507, 1508).");
    add("418", "Banned for continuing after 429 (codes 1509, 1500).");
    op.insert("responses".into(), Value::Object(responses));
    Value::Object(op)
}

/// An OpenAPI 3.1 document with one path per catalogue endpoint (under [`PREFIX`]) and one
/// operation per method. GET operations take query parameters; POST operations take the
/// same parameters as a form or JSON body (the query string works too and wins).
///
/// ```
/// let doc = trading_model::openapi(trading_model::Catalogue::builtin(), Some("http://127.0.0.1:8090"));
/// assert_eq!(doc["openapi"], "3.1.0");
/// assert_eq!(doc["paths"].as_object().unwrap().len(), 180);
/// assert!(doc["paths"]["/api/v2/system/ping"]["post"].is_object());
/// ```
pub fn openapi(cat: &Catalogue, server_url: Option<&str>) -> Value {
    let mut paths = Map::new();
    for ep in cat.endpoints() {
        let mut item = Map::new();
        for &m in &ep.methods {
            item.insert(m.as_str().to_ascii_lowercase(), operation(ep, m));
        }
        paths.insert(format!("{PREFIX}{}", ep.path), Value::Object(item));
    }
    let codes: Vec<u16> = ErrorCode::ALL.iter().map(|c| c.code()).collect();
    let code_table: String = ErrorCode::ALL
        .iter()
        .map(|c| format!("{} ({}): {}", c.code(), c.status(), c.message()))
        .collect::<Vec<_>>()
        .join("; ");
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Trading API v2 sandbox",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A self-hosted implementation of the executium trading API v2. \
                Every answer is an envelope {data, meta}; meta.status equals the HTTP status. \
                POST parameters may be sent in the query string or the body; the query string \
                wins. The operations listed are the original's; as its SDKs send GET when they \
                have no input and POST (form body) when they have some, every path also answers \
                the other of the two. Validation failures answer 1440 with missing_parameters, \
                incorrect_value_lengths and missing_information.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "Key": {"type": "apiKey", "in": "header", "name": "Key"},
                "Authorization": {"type": "apiKey", "in": "header", "name": "Authorization",
                    "description": "HS256 token over {\"nonce\": ...} signed with the key's secret."},
            },
            "schemas": {
                "Meta": {
                    "type": "object",
                    "required": ["api_version", "status", "endpoint", "auth_required", "ms", "time"],
                    "properties": {
                        "id": {"type": "string"},
                        "api_version": {"type": "integer", "const": 2},
                        "system_version": {"type": "string"},
                        "status": {"type": "integer"},
                        "auth_success": {"type": "boolean"},
                        "rateLimits": {"type": "object", "properties": {"minute": {"type": "integer"}}},
                        "subscription": {"type": "object", "properties": {
                            "id": {"type": "string"}, "name": {"type": "string"}}},
                        "endpoint": {"type": "string"},
                        "auth_required": {"type": "boolean"},
                        "ms": {"type": "integer"},
                        "time": {"type": "integer"},
                        "uid": {"type": "integer"},
                        "process_time": {"type": "string"},
                    }
                },
                "Envelope": {
                    "type": "object",
                    "required": ["data", "meta"],
                    "properties": {"data": {}, "meta": {"$ref": "#/components/schemas/Meta"}},
                },
                "ErrorRecord": {
                    "type": "object",
                    "required": ["code", "error"],
                    "properties": {
                        "code": {"type": "integer", "enum": codes, "description": code_table},
                        "error": {"type": "string"},
                    }
                },
                "ErrorEnvelope": {
                    "type": "object",
                    "required": ["data", "meta"],
                    "properties": {
                        "data": {"$ref": "#/components/schemas/ErrorRecord"},
                        "missing_parameters": {"type": "array", "items": {"type": "string"}},
                        "incorrect_value_lengths": {"type": "array", "items": {"type": "string"}},
                        "missing_information": {"type": "array", "items": {"type": "object"}},
                        "meta": {"$ref": "#/components/schemas/Meta"},
                    }
                },
            }
        }
    });
    if let Some(url) = server_url {
        doc["servers"] = json!([{"url": url}]);
    }
    doc
}
