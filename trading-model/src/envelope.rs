//! The response envelope: every answer, success or error, is `{"data": ..., "meta": {...}}`,
//! and `meta.status` always equals the HTTP status (the original Node SDK rejects any
//! answer whose `meta.status` is not 200, so the two must never disagree).

use serde_json::{Map, Value, json};

use crate::errors::ApiError;

/// API version reported in `meta.api_version`.
pub const API_VERSION: u32 = 2;

/// What an authenticated call adds to `meta`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthMeta {
    /// Requests per minute the caller's plan allows (`rateLimits.minute`).
    pub rate_limit_minute: u32,
    /// Plan id (`subscription.id`, a string in the original).
    pub subscription_id: String,
    /// Plan name (`subscription.name`).
    pub subscription_name: String,
}

/// Builder for `meta`. Time and timing are arguments: this crate reads no clock.
///
/// ```
/// use trading_model::Meta;
/// let meta = Meta::new("system/ping", false, 1_592_207_324_028).process_micros(204).to_json();
/// assert_eq!(meta["time"], 1_592_207_324);
/// assert_eq!(meta["process_time"], "0.000204");
/// assert_eq!(meta["uid"], -1);
/// assert_eq!(meta["status"], 200);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    endpoint: String,
    auth_required: bool,
    now_ms: u64,
    request_id: String,
    system_version: String,
    status: u16,
    uid: i64,
    process_micros: u64,
    auth: Option<AuthMeta>,
}

impl Meta {
    /// `meta` for a call to `endpoint` (path below `/api/v2/`) answered at `now_ms`.
    pub fn new(endpoint: &str, auth_required: bool, now_ms: u64) -> Meta {
        Meta {
            endpoint: endpoint.to_owned(),
            auth_required,
            now_ms,
            request_id: String::new(),
            system_version: concat!("2.0.5+", env!("CARGO_PKG_VERSION")).to_owned(),
            status: 200,
            uid: -1,
            process_micros: 0,
            auth: None,
        }
    }

    /// Request id (`meta.id`).
    pub fn request_id(mut self, id: impl Into<String>) -> Meta {
        self.request_id = id.into();
        self
    }

    /// Overrides `meta.system_version`.
    pub fn system_version(mut self, v: impl Into<String>) -> Meta {
        self.system_version = v.into();
        self
    }

    /// HTTP status; [`success`] and [`failure`] set it themselves.
    pub fn status(mut self, status: u16) -> Meta {
        self.status = status;
        self
    }

    /// Account id of the caller (-1, the default, when anonymous).
    pub fn uid(mut self, uid: i64) -> Meta {
        self.uid = uid;
        self
    }

    /// Handling time in microseconds, shown as seconds with six decimals.
    pub fn process_micros(mut self, micros: u64) -> Meta {
        self.process_micros = micros;
        self
    }

    /// Marks the call authenticated and adds plan details.
    pub fn auth(mut self, auth: AuthMeta) -> Meta {
        self.auth = Some(auth);
        self
    }

    /// The status this `meta` carries.
    pub fn current_status(&self) -> u16 {
        self.status
    }

    /// Renders `meta`.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.request_id));
        m.insert("api_version".into(), json!(API_VERSION));
        m.insert("system_version".into(), json!(self.system_version));
        m.insert("status".into(), json!(self.status));
        if let Some(a) = &self.auth {
            m.insert("auth_success".into(), json!(true));
            m.insert("rateLimits".into(), json!({"minute": a.rate_limit_minute}));
            m.insert(
                "subscription".into(),
                json!({"id": a.subscription_id, "name": a.subscription_name}),
            );
        }
        m.insert("endpoint".into(), json!(self.endpoint));
        m.insert("auth_required".into(), json!(self.auth_required));
        m.insert("ms".into(), json!(self.now_ms));
        m.insert("time".into(), json!(self.now_ms / 1000));
        m.insert("uid".into(), json!(self.uid));
        m.insert(
            "process_time".into(),
            json!(format!(
                "{}.{:06}",
                self.process_micros / 1_000_000,
                self.process_micros % 1_000_000
            )),
        );
        Value::Object(m)
    }
}

/// A 200 answer.
///
/// ```
/// use trading_model::{Meta, success};
/// let body = success(serde_json::json!({"seconds": 1}), Meta::new("system/timestamp", false, 1000));
/// assert_eq!(body["data"]["seconds"], 1);
/// assert_eq!(body["meta"]["status"], 200);
/// ```
pub fn success(data: Value, meta: Meta) -> Value {
    json!({"data": data, "meta": meta.status(200).to_json()})
}

/// An error answer: the record in `data`, the validation lists beside it (always all
/// three, empty when unused, as in the original's example), and `meta.status` set to the
/// error's HTTP status.
///
/// ```
/// use trading_model::{ApiError, ErrorCode, Meta, failure};
/// let body = failure(&ApiError::new(ErrorCode::MissingKey), Meta::new("subscriptions/details", true, 0));
/// assert_eq!(body["data"]["error"], "Missing Key");
/// assert_eq!(body["meta"]["status"], 401);
/// ```
pub fn failure(err: &ApiError, meta: Meta) -> Value {
    let mut top = Map::new();
    top.insert("data".into(), err.data());
    if let Some(v) = &err.validation {
        top.insert("missing_parameters".into(), json!(v.missing_parameters));
        top.insert("missing_information".into(), json!(v.missing_information));
        top.insert(
            "incorrect_value_lengths".into(),
            json!(v.incorrect_value_lengths),
        );
    }
    top.insert("meta".into(), meta.status(err.status).to_json());
    Value::Object(top)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn authenticated_meta_has_plan_fields() {
        let meta = Meta::new("subscriptions/details", true, 1_592_207_324_028)
            .uid(7)
            .request_id("r1")
            .system_version("2.0.5")
            .auth(AuthMeta {
                rate_limit_minute: 60,
                subscription_id: "0".into(),
                subscription_name: "Free".into(),
            })
            .process_micros(14_913)
            .to_json();
        assert_eq!(meta["auth_success"], true);
        assert_eq!(meta["rateLimits"]["minute"], 60);
        assert_eq!(meta["subscription"]["name"], "Free");
        assert_eq!(meta["process_time"], "0.014913");
        assert_eq!(meta["uid"], 7);
        assert_eq!(meta["id"], "r1");
        assert_eq!(meta["api_version"], 2);
        assert_eq!(meta["system_version"], "2.0.5");
        assert_eq!(meta["time"], 1_592_207_324);
    }

    #[test]
    fn anonymous_meta_has_no_plan_fields() {
        let meta = Meta::new("system/ping", false, 5).to_json();
        for k in ["auth_success", "rateLimits", "subscription"] {
            assert!(meta.get(k).is_none(), "{k}");
        }
        assert_eq!(meta["process_time"], "0.000000");
    }

    #[test]
    fn failure_status_wins_over_builder_status() {
        let e = ApiError::new(ErrorCode::UnknownEndpoint).with_status(405);
        let body = failure(&e, Meta::new("x", false, 0).status(200));
        assert_eq!(body["meta"]["status"], 405);
        assert!(body.get("missing_parameters").is_none());
    }
}
