//! Account resources kept in the store: one table-driven implementation of create, list,
//! edit and delete for every resource whose record fields the spec leaves open.
//!
//! Records are answered as `{id, <fields>, time_created, time_updated}` (seconds). Paged
//! list endpoints answer `{records, page, showing, total}`, newest first; unpaged list
//! endpoints answer the array. Fields named in `hidden` are encrypted at rest and never
//! answered. An id that names no record of the caller answers 1440 with a
//! `missing_information` entry for the id parameter.

use serde_json::{Map, Value, json};
use trading_model::{ApiError, Checked, Endpoint, Page, Valid};

use crate::context::{Caller, refused};
use crate::store::{Record, Store, StoreError};

pub(crate) struct Spec {
    kind: &'static str,
    create: &'static str,
    list: Option<&'static str>,
    edit: Option<&'static str>,
    delete: Option<&'static str>,
    /// Endpoints that only look a record up (exchange-api-keys/test).
    check: Option<&'static str>,
    /// Name of the id parameter on edit / delete / check.
    id_param: &'static str,
    /// Parameters stored encrypted and never answered.
    hidden: &'static [&'static str],
    /// Parameters an edit does not change (documented as not editable there).
    frozen: &'static [&'static str],
    /// Most records a user may hold (plan limit).
    max: Option<u64>,
    /// A field whose value must be unique among the user's records of this kind.
    unique: Option<&'static str>,
    /// A parameter that must name one of the caller's records of another kind.
    reference: Option<(&'static str, &'static str)>,
    /// Fields set on creation.
    initial: &'static [(&'static str, &'static str)],
    /// `(field, field of the referenced record)`: fills a blank field from the reference.
    fallback: Option<(&'static str, &'static str)>,
}

const fn spec(kind: &'static str, create: &'static str) -> Spec {
    Spec {
        kind,
        create,
        list: None,
        edit: None,
        delete: None,
        check: None,
        id_param: "id",
        hidden: &[],
        frozen: &[],
        max: None,
        unique: None,
        reference: None,
        initial: &[],
        fallback: None,
    }
}

/// The resources, with the limits of the documented free plan where it gives them
/// (`exchange_api_keys.maximum_stored` 3, `strategies.maximum.strategies` 10 and
/// `templates` 3) and our own sub-account allowance (`subaccounts.maximum_accounts` 5).
pub(crate) const SPECS: &[Spec] = &[
    Spec {
        list: Some("exchange-api-keys/list"),
        edit: Some("exchange-api-keys/edit"),
        delete: Some("exchange-api-keys/delete"),
        check: Some("exchange-api-keys/test"),
        hidden: &["token", "secret", "password"],
        max: Some(3),
        initial: &[("status", "active")],
        ..spec("exchange_api_key", "exchange-api-keys/add")
    },
    Spec {
        list: Some("strategy/list-watchlist"),
        delete: Some("strategy/delete-watchlist-item"),
        ..spec("watchlist_item", "strategy/add-watchlist-item")
    },
    Spec {
        list: Some("public/trending-news-list-my-keywords"),
        delete: Some("public/trending-news-remove-keyword"),
        id_param: "keywordid",
        unique: Some("name"),
        ..spec("news_keyword", "public/trending-news-add-keyword")
    },
    Spec {
        list: Some("subaccounts/broadcast-list"),
        delete: Some("subaccounts/broadcast-delete"),
        ..spec("broadcast", "subaccounts/broadcast-create")
    },
    Spec {
        list: Some("articles/list"),
        edit: Some("articles/edit"),
        delete: Some("articles/delete"),
        ..spec("article", "articles/create")
    },
    Spec {
        list: Some("support/list-tickets"),
        initial: &[("status", "open")],
        ..spec("support_ticket", "user/create-support-ticket")
    },
    Spec {
        list: Some("subaccounts/subaccount-list"),
        edit: Some("subaccounts/subaccount-edit"),
        delete: Some("subaccounts/subaccount-delete"),
        hidden: &["password"],
        frozen: &["active", "password"],
        unique: Some("username"),
        max: Some(5),
        ..spec("subaccount", "subaccounts/subaccount-create")
    },
    Spec {
        list: Some("strategy/list-profiles"),
        edit: Some("strategy/edit-profile"),
        delete: Some("strategy/delete-profile"),
        max: Some(10),
        ..spec("strategy_profile", "strategy/create-profile")
    },
    Spec {
        list: Some("strategy/list-templates"),
        reference: Some(("copy_strategy_id", "strategy_profile")),
        fallback: Some(("label", "name")),
        max: Some(3),
        ..spec("strategy_template", "strategy/save-template")
    },
    spec("strategy_tab", "strategy/create-tab"),
    Spec {
        list: Some("exchange-query/list-exchange-queries"),
        delete: Some("exchange-query/delete-exchange-query"),
        reference: Some(("apikey", "exchange_api_key")),
        ..spec("exchange_query", "exchange-query/create-query")
    },
    Spec {
        list: Some("algorithm-creator/list-algorithms"),
        edit: Some("algorithm-creator/algorithm-update"),
        ..spec("algorithm", "algorithm-creator/algorithm-add")
    },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Create,
    List,
    Edit,
    Delete,
    Check,
}

pub(crate) fn find(path: &str) -> Option<(&'static Spec, Action)> {
    SPECS.iter().find_map(|s| {
        let action = if s.create == path {
            Action::Create
        } else if s.list == Some(path) {
            Action::List
        } else if s.edit == Some(path) {
            Action::Edit
        } else if s.delete == Some(path) {
            Action::Delete
        } else if s.check == Some(path) {
            Action::Check
        } else {
            return None;
        };
        Some((s, action))
    })
}

/// Where the plan details hold the allowance of a kind of record.
fn plan_pointer(kind: &str) -> Option<&'static str> {
    match kind {
        "exchange_api_key" => Some("/exchange_api_keys/maximum_stored"),
        "subaccount" => Some("/subaccounts/maximum_accounts"),
        "strategy_profile" => Some("/strategies/maximum/strategies"),
        "strategy_template" => Some("/strategies/maximum/templates"),
        _ => None,
    }
}

pub(crate) fn db(e: StoreError) -> ApiError {
    ApiError::new(trading_model::ErrorCode::Database)
        .with_message(format!("Internal database error: {e}"))
}

fn to_json(v: &Checked) -> Value {
    match v {
        Checked::Text(s) | Checked::Decimal(s) => json!(s),
        Checked::Integer(i) => json!(i),
        Checked::Bool(b) => json!(b),
        Checked::List(l) => json!(l),
    }
}

pub(crate) fn answer(r: &Record) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(r.id));
    for (k, v) in &r.fields {
        out.insert(k.clone(), v.clone());
    }
    out.insert("time_created".into(), json!(r.created_ms / 1000));
    out.insert("time_updated".into(), json!(r.updated_ms / 1000));
    Value::Object(out)
}

fn record_id(spec: &Spec, valid: &Valid) -> Result<i64, ApiError> {
    valid
        .text(spec.id_param)
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|&i| i > 0)
        .ok_or_else(|| refused(spec.id_param, "No such record on this account."))
}

pub(crate) fn run(
    spec: &Spec,
    action: Action,
    ep: &Endpoint,
    valid: &Valid,
    store: &Store,
    caller: &Caller,
    now_ms: u64,
) -> Result<Value, ApiError> {
    let user = caller.user_id;
    let not_found = || refused(spec.id_param, "No such record on this account.");
    match action {
        Action::Create => {
            let mut fields = Map::new();
            let mut hidden = Map::new();
            for name in valid.names() {
                let Some(v) = valid.get(name) else { continue };
                if spec.hidden.contains(&name) {
                    hidden.insert(name.to_owned(), to_json(v));
                } else {
                    fields.insert(name.to_owned(), to_json(v));
                }
            }
            for (k, v) in spec.initial {
                fields.insert((*k).to_owned(), json!(v));
            }
            let (existing, total) = store
                .list_records(spec.kind, user, trading_model::MAX_LIMIT, 0)
                .map_err(db)?;
            // The caller's plan (with its custom settings) sets the allowance where it has
            // one; `max` is the documented Free plan's value, the fallback.
            let max = spec.max.map(|m| {
                plan_pointer(spec.kind)
                    .and_then(|p| {
                        trading_model::plans::plan_details(&caller.plan)
                            .pointer(p)
                            .and_then(Value::as_u64)
                    })
                    .unwrap_or(m)
            });
            if let Some(max) = max.filter(|&m| total >= m) {
                return Err(refused(
                    ep.parameters.first().map_or("id", |p| p.name.as_str()),
                    format!("The plan keeps at most {max} of these; delete one first."),
                ));
            }
            if let Some(field) = spec.unique {
                let value = fields.get(field);
                let clash = existing.iter().any(|r| {
                    r.fields
                        .get(field)
                        .and_then(Value::as_str)
                        .map(str::to_lowercase)
                        == value.and_then(Value::as_str).map(str::to_lowercase)
                });
                if clash {
                    return Err(refused(field, format!("{field} is already in use.")));
                }
            }
            if let Some((param, kind)) = spec.reference {
                let id = valid.text(param).and_then(|s| s.trim().parse::<i64>().ok());
                let found = match id {
                    Some(id) => store.get_record(kind, user, id).map_err(db)?,
                    None => None,
                };
                let Some(found) = found else {
                    return Err(refused(param, "No such record on this account."));
                };
                if let Some((field, from)) = spec.fallback {
                    if !fields.contains_key(field) {
                        let v = found.fields.get(from).cloned().unwrap_or(Value::Null);
                        fields.insert(field.to_owned(), v);
                    }
                }
            }
            let hidden = (!hidden.is_empty()).then_some(&hidden);
            let rec = store
                .insert_record(spec.kind, user, &fields, hidden, now_ms)
                .map_err(db)?;
            Ok(answer(&rec))
        }
        // A sub-account without permission to use the account's exchange keys sees none.
        Action::List
            if spec.kind == "exchange_api_key"
                && caller
                    .subaccount
                    .as_ref()
                    .is_some_and(|s| !s.allow_api_key_usage) =>
        {
            let page = Page::of(ep, valid).unwrap_or(Page {
                limit: 10,
                pagenumber: 1,
            });
            Ok(json!({"records": [], "page": page.pagenumber, "showing": 0, "total": 0}))
        }
        Action::List => match Page::of(ep, valid) {
            Some(page) => {
                let (rows, total) = store
                    .list_records(spec.kind, user, page.limit, page.offset())
                    .map_err(db)?;
                Ok(json!({
                    "records": rows.iter().map(answer).collect::<Vec<_>>(),
                    "page": page.pagenumber,
                    "showing": rows.len(),
                    "total": total,
                }))
            }
            None => {
                let (rows, _) = store
                    .list_records(spec.kind, user, trading_model::MAX_LIMIT, 0)
                    .map_err(db)?;
                Ok(Value::Array(rows.iter().map(answer).collect()))
            }
        },
        Action::Edit => {
            let id = record_id(spec, valid)?;
            let mut changes = Map::new();
            for name in valid.names() {
                if name == spec.id_param
                    || spec.hidden.contains(&name)
                    || spec.frozen.contains(&name)
                {
                    continue;
                }
                if let Some(v) = valid.get(name) {
                    changes.insert(name.to_owned(), to_json(v));
                }
            }
            let rec = store
                .update_record(spec.kind, user, id, &changes, now_ms)
                .map_err(db)?
                .ok_or_else(not_found)?;
            Ok(answer(&rec))
        }
        Action::Delete => {
            let id = record_id(spec, valid)?;
            if !store.delete_record(spec.kind, user, id).map_err(db)? {
                return Err(not_found());
            }
            Ok(json!({"id": id, "deleted": true}))
        }
        Action::Check => {
            let id = record_id(spec, valid)?;
            let rec = store
                .get_record(spec.kind, user, id)
                .map_err(db)?
                .ok_or_else(not_found)?;
            Ok(
                json!({"id": id, "status": rec.fields.get("status").cloned().unwrap_or(json!("active"))}),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trading_model::{Catalogue, Method};

    #[test]
    fn every_resource_endpoint_is_in_the_catalogue_and_needs_a_key() {
        let cat = Catalogue::builtin();
        for s in SPECS {
            let paths = [Some(s.create), s.list, s.edit, s.delete, s.check];
            for p in paths.into_iter().flatten() {
                let ep = cat.get(p).unwrap_or_else(|| panic!("{p} not in catalogue"));
                assert!(ep.auth_required, "{p} must need a key");
                assert_eq!(find(p).map(|(f, _)| f.kind), Some(s.kind));
            }
            let create = cat.get(s.create).unwrap();
            assert!(create.documents(Method::Post));
            for h in s.hidden {
                assert!(
                    create.param(h).is_some(),
                    "{}: hidden {h} is no parameter",
                    s.kind
                );
            }
            for p in [s.edit, s.delete, s.check].into_iter().flatten() {
                assert!(
                    cat.get(p).unwrap().param(s.id_param).is_some(),
                    "{p} lacks {}",
                    s.id_param
                );
            }
        }
    }
}
