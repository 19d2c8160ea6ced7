//! The algorithm creator: an algorithm (record kind `algorithm`, as the generic resources
//! stored it before) with conditions (`algorithm_condition`: code, operator, value) and
//! executions (`algorithm_execution`: order type, side, quantity, code, price).
//!
//! Validation checks what a trading engine would need before running it; publishing needs
//! a valid algorithm. Nothing here runs an algorithm.

use serde_json::{Map, Value, json};
use trading_model::{ApiError, Endpoint, Valid, typed};

use crate::context::{IdValue, RequestContext, db, for_caller, opt_record_id, record_id, refused};
use crate::resources::answer;
use crate::store::Record;

/// Endpoints answered here.
const PATHS: [&str; 18] = [
    "algorithm-creator/algorithm-add",
    "algorithm-creator/algorithm-update",
    "algorithm-creator/algorithm-remove",
    "algorithm-creator/algorithm-statistics",
    "algorithm-creator/condition-add",
    "algorithm-creator/condition-remove",
    "algorithm-creator/condition-update",
    "algorithm-creator/execution-add",
    "algorithm-creator/execution-remove",
    "algorithm-creator/execution-update",
    "algorithm-creator/list-algorithms",
    "algorithm-creator/list-condition-operators",
    "algorithm-creator/list-conditions",
    "algorithm-creator/list-executions",
    "algorithm-creator/list-order-types",
    "algorithm-creator/publish-algorithm",
    "algorithm-creator/unpublish-algorithm",
    "algorithm-creator/validate-algorithm",
];

/// Whether this module answers `path`.
pub(crate) fn handles(path: &str) -> bool {
    PATHS.contains(&path)
}

/// Answers `ep` if this module handles it.
pub(crate) fn call(
    ep: &Endpoint,
    valid: &Valid,
    env: &RequestContext,
) -> Option<Result<Value, ApiError>> {
    let name = ep.path.split_once('/').map_or("", |(_, n)| n);
    for_caller(handles(&ep.path), env, |c| {
        answer_for(name, valid, env, c.user_id)
    })
}

const ALGORITHM: &str = "algorithm";
const CONDITION: &str = "algorithm_condition";
const EXECUTION: &str = "algorithm_execution";

/// Operators a condition may use: `(operator, meaning)`.
pub(crate) const OPERATORS: [(&str, &str); 6] = [
    (">", "mid price above value"),
    (">=", "mid price at or above value"),
    ("<", "mid price below value"),
    ("<=", "mid price at or below value"),
    (
        "crosses_above",
        "mid price moves from at or below value to above it",
    ),
    (
        "crosses_below",
        "mid price moves from at or above value to below it",
    ),
];

/// Order types an execution may use: `(type, needs a price, meaning)`.
pub(crate) const ORDER_TYPES: [(&str, bool, &str); 5] = [
    ("market", false, "fills at once against the book"),
    (
        "limit",
        true,
        "rests at the price until filled or cancelled",
    ),
    (
        "stop_market",
        true,
        "becomes a market order once the price trades through the stop",
    ),
    (
        "stop_limit",
        true,
        "becomes a limit order at the price once the stop is reached",
    ),
    (
        "post_only",
        true,
        "limit order refused if it would fill at once",
    ),
];

/// The record fields of the given parameters, trimmed; absent ones are left out.
fn text_fields(given: &[(&str, Option<&String>)]) -> Map<String, Value> {
    let mut f = Map::new();
    for (n, v) in given {
        if let Some(v) = v {
            f.insert((*n).to_owned(), json!(v.trim()));
        }
    }
    f
}

fn children(
    env: &RequestContext,
    user: i64,
    kind: &str,
    algorithm: i64,
) -> Result<Vec<Record>, ApiError> {
    let (rows, _) = env
        .store
        .list_records(kind, user, trading_model::MAX_LIMIT, 0)
        .map_err(db)?;
    Ok(rows
        .into_iter()
        .rev()
        .filter(|r| r.fields.get("algorithm_id").and_then(Value::as_i64) == Some(algorithm))
        .collect())
}

fn algorithm(
    env: &RequestContext,
    user: i64,
    param: &str,
    given: &impl IdValue,
) -> Result<Record, ApiError> {
    let id = record_id(param, given)
        .map_err(|_| refused(param, "No such algorithm on this account."))?;
    env.store
        .get_record(ALGORITHM, user, id)
        .map_err(db)?
        .ok_or_else(|| refused(param, "No such algorithm on this account."))
}

fn published(r: &Record) -> bool {
    r.fields.get("published").and_then(Value::as_bool) == Some(true)
}

fn algorithm_answer(env: &RequestContext, user: i64, r: &Record) -> Result<Value, ApiError> {
    let mut a = answer(r);
    a["published"] = json!(published(r));
    a["conditions"] = json!(children(env, user, CONDITION, r.id)?.len());
    a["executions"] = json!(children(env, user, EXECUTION, r.id)?.len());
    Ok(a)
}

fn check_operator(op: &str) -> Result<(), ApiError> {
    if OPERATORS.iter().any(|(o, _)| *o == op) {
        return Ok(());
    }
    let mut e = refused(
        "operator",
        "Unknown operator; see list-condition-operators.",
    );
    if let Some(v) = e.validation.as_mut() {
        v.missing_information[0]["allowed"] = json!(OPERATORS.map(|o| o.0));
    }
    Err(e)
}

fn check_order_type(t: &str) -> Result<(), ApiError> {
    if ORDER_TYPES.iter().any(|(o, _, _)| *o == t) {
        return Ok(());
    }
    let mut e = refused("order_type", "Unknown order type; see list-order-types.");
    if let Some(v) = e.validation.as_mut() {
        v.missing_information[0]["allowed"] = json!(ORDER_TYPES.map(|o| o.0));
    }
    Err(e)
}

/// What keeps an algorithm from running: one `{where, error}` per problem.
fn problems(env: &RequestContext, user: i64, alg: &Record) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::new();
    let mut problem = |at: String, error: String| out.push(json!({"where": at, "error": error}));
    for f in [
        "maximum_transactions_successful",
        "maximum_transactions_canceled",
    ] {
        if let Some(v) = alg.fields.get(f).and_then(Value::as_str) {
            if !v.is_empty() && v.parse::<u64>().is_err() {
                problem(
                    f.to_owned(),
                    "must be a whole number of transactions.".into(),
                );
            }
        }
    }
    let conditions = children(env, user, CONDITION, alg.id)?;
    let executions = children(env, user, EXECUTION, alg.id)?;
    if conditions.is_empty() {
        problem(
            "conditions".into(),
            "The algorithm has no condition.".into(),
        );
    }
    if executions.is_empty() {
        problem(
            "executions".into(),
            "The algorithm has no execution.".into(),
        );
    }
    let field = |r: &Record, f: &str| {
        r.fields
            .get(f)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let positive = |s: &str| s.parse::<f64>().is_ok_and(|v| v > 0.0);
    for c in &conditions {
        let at = format!("condition {}", c.id);
        let code = field(c, "code");
        if env.market.symbol(&code).is_none() {
            problem(at.clone(), format!("{code} is not listed on the market."));
        }
        if check_operator(&field(c, "operator")).is_err() {
            problem(at.clone(), "unknown operator.".into());
        }
        if !positive(&field(c, "value")) {
            problem(at, "value must be a price above 0.".into());
        }
    }
    for x in &executions {
        let at = format!("execution {}", x.id);
        let code = field(x, "code");
        let ty = field(x, "order_type");
        match ORDER_TYPES.iter().find(|o| o.0 == ty) {
            None => problem(at.clone(), "unknown order type.".into()),
            Some((_, true, _)) if !positive(&field(x, "price")) => {
                problem(at.clone(), format!("a {ty} order needs a price above 0."));
            }
            Some(_) => {}
        }
        let qty = field(x, "quantity").parse::<f64>().unwrap_or(0.0);
        match env.market.symbol(&code) {
            None => problem(at, format!("{code} is not listed on the market.")),
            Some(sym) if qty < sym.min => problem(
                at,
                format!(
                    "quantity {qty} is below the minimum order of {} {}.",
                    sym.min, sym.base
                ),
            ),
            Some(_) => {}
        }
    }
    Ok(out)
}

fn answer_for(
    name: &str,
    valid: &Valid,
    env: &RequestContext,
    user: i64,
) -> Result<Value, ApiError> {
    let now = env.now_ms;
    let store = &env.store;
    match name {
        "algorithm-add" => {
            let p = typed::AlgorithmCreatorAlgorithmAdd::from_valid(valid)?;
            let mut f = text_fields(&[
                ("name", Some(&p.name)),
                ("group_name", Some(&p.group_name)),
                ("reverse_id", p.reverse_id.as_ref()),
                (
                    "maximum_transactions_successful",
                    p.maximum_transactions_successful.as_ref(),
                ),
                (
                    "maximum_transactions_canceled",
                    p.maximum_transactions_canceled.as_ref(),
                ),
                ("comments", p.comments.as_ref()),
                ("status", p.status.as_ref()),
                ("package_minimum", p.package_minimum.as_ref()),
                ("monthly_fee", p.monthly_fee.as_ref()),
            ]);
            f.insert("published".into(), json!(false));
            let r = store
                .insert_record(ALGORITHM, user, &f, None, now)
                .map_err(db)?;
            algorithm_answer(env, user, &r)
        }
        "algorithm-update" => {
            let p = typed::AlgorithmCreatorAlgorithmUpdate::from_valid(valid)?;
            let alg = algorithm(env, user, "id", &p.id)?;
            let f = text_fields(&[
                ("name", Some(&p.name)),
                ("group_name", Some(&p.group_name)),
                ("reverse_id", p.reverse_id.as_ref()),
                (
                    "maximum_transactions_successful",
                    p.maximum_transactions_successful.as_ref(),
                ),
                (
                    "maximum_transactions_canceled",
                    p.maximum_transactions_canceled.as_ref(),
                ),
                ("cpa_successful", p.cpa_successful.as_ref()),
                ("cpa_canceled", p.cpa_canceled.as_ref()),
                ("comments", p.comments.as_ref()),
                ("status", p.status.as_ref()),
                ("package_minimum", p.package_minimum.as_ref()),
                ("monthly_fee", p.monthly_fee.as_ref()),
            ]);
            let r = store
                .update_record(ALGORITHM, user, alg.id, &f, now)
                .map_err(db)?
                .ok_or_else(|| refused("id", "No such algorithm on this account."))?;
            algorithm_answer(env, user, &r)
        }
        "algorithm-remove" => {
            let alg = algorithm(
                env,
                user,
                "id",
                &typed::AlgorithmCreatorAlgorithmRemove::from_valid(valid)?.id,
            )?;
            let mut removed = [0usize; 2];
            for (n, kind) in removed.iter_mut().zip([CONDITION, EXECUTION]) {
                for c in children(env, user, kind, alg.id)? {
                    store.delete_record(kind, user, c.id).map_err(db)?;
                    *n += 1;
                }
            }
            store.delete_record(ALGORITHM, user, alg.id).map_err(db)?;
            Ok(json!({
                "id": alg.id, "deleted": true,
                "conditions_removed": removed[0], "executions_removed": removed[1],
            }))
        }
        "list-algorithms" => {
            let (rows, _) = store
                .list_records(ALGORITHM, user, trading_model::MAX_LIMIT, 0)
                .map_err(db)?;
            let mut out = Vec::new();
            for r in &rows {
                out.push(algorithm_answer(env, user, r)?);
            }
            Ok(Value::Array(out))
        }
        "algorithm-statistics" => {
            let alg = algorithm(
                env,
                user,
                "id",
                &typed::AlgorithmCreatorAlgorithmRemove::from_valid(valid)?.id,
            )?;
            let conditions = children(env, user, CONDITION, alg.id)?;
            let executions = children(env, user, EXECUTION, alg.id)?;
            let mut codes: Vec<String> = conditions
                .iter()
                .chain(&executions)
                .filter_map(|r| {
                    r.fields
                        .get("code")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect();
            codes.sort();
            codes.dedup();
            let side = |s: &str| {
                executions
                    .iter()
                    .filter(|x| x.fields.get("side").and_then(Value::as_str) == Some(s))
                    .count()
            };
            let number = |f: &str| {
                alg.fields
                    .get(f)
                    .and_then(Value::as_str)
                    .and_then(|v| v.parse::<u64>().ok())
            };
            Ok(json!({
                "id": alg.id,
                "name": alg.fields.get("name"),
                "group_name": alg.fields.get("group_name"),
                "published": published(&alg),
                "time_published": alg.fields.get("published_ms").and_then(Value::as_u64).map(|t| t / 1000),
                "conditions": conditions.len(),
                "executions": executions.len(),
                "executions_by_side": {"buy": side("buy"), "sell": side("sell")},
                "codes": codes,
                "maximum_transactions_successful": number("maximum_transactions_successful"),
                "maximum_transactions_canceled": number("maximum_transactions_canceled"),
                "problems": problems(env, user, &alg)?.len(),
            }))
        }
        "condition-add" | "execution-add" => {
            let algorithm_id = if name == "condition-add" {
                typed::AlgorithmCreatorConditionAdd::from_valid(valid)?.algorithm_id
            } else {
                typed::AlgorithmCreatorExecutionAdd::from_valid(valid)?.algorithm_id
            };
            let alg = algorithm(env, user, "algorithm_id", &algorithm_id)?;
            let (kind, mut f) = if name == "condition-add" {
                let p = typed::AlgorithmCreatorConditionAdd::from_valid(valid)?;
                check_operator(&p.operator)?;
                let f = text_fields(&[
                    ("code", Some(&p.code)),
                    ("operator", Some(&p.operator)),
                    ("value", Some(&p.value)),
                ]);
                (CONDITION, f)
            } else {
                let p = typed::AlgorithmCreatorExecutionAdd::from_valid(valid)?;
                check_order_type(&p.order_type)?;
                let f = text_fields(&[
                    ("order_type", Some(&p.order_type)),
                    ("side", Some(&p.side)),
                    ("quantity", Some(&p.quantity)),
                    ("code", Some(&p.code)),
                    ("price", p.price.as_ref()),
                ]);
                (EXECUTION, f)
            };
            f.insert("algorithm_id".into(), json!(alg.id));
            if let Some(Value::String(c)) = f.get_mut("code") {
                *c = c.to_ascii_lowercase();
            }
            let r = store.insert_record(kind, user, &f, None, now).map_err(db)?;
            Ok(answer(&r))
        }
        "condition-update" | "execution-update" => {
            let (kind, mut f, id) = if name == "condition-update" {
                let p = typed::AlgorithmCreatorConditionUpdate::from_valid(valid)?;
                if let Some(op) = &p.operator {
                    check_operator(op)?;
                }
                let f = text_fields(&[
                    ("code", p.code.as_ref()),
                    ("operator", p.operator.as_ref()),
                    ("value", p.value.as_ref()),
                ]);
                (CONDITION, f, p.id)
            } else {
                let p = typed::AlgorithmCreatorExecutionUpdate::from_valid(valid)?;
                if let Some(t) = &p.order_type {
                    check_order_type(t)?;
                }
                let f = text_fields(&[
                    ("order_type", p.order_type.as_ref()),
                    ("side", p.side.as_ref()),
                    ("quantity", p.quantity.as_ref()),
                    ("code", p.code.as_ref()),
                    ("price", p.price.as_ref()),
                ]);
                (EXECUTION, f, p.id)
            };
            let id = record_id("id", &id)?;
            if let Some(Value::String(c)) = f.get_mut("code") {
                *c = c.to_ascii_lowercase();
            }
            let r = store
                .update_record(kind, user, id, &f, now)
                .map_err(db)?
                .ok_or_else(|| refused("id", "No such record on this account."))?;
            Ok(answer(&r))
        }
        "condition-remove" | "execution-remove" => {
            let kind = if name == "condition-remove" {
                CONDITION
            } else {
                EXECUTION
            };
            let given = typed::AlgorithmCreatorConditionRemove::from_valid(valid)?;
            let id = record_id("id", &given.id)?;
            if !store.delete_record(kind, user, id).map_err(db)? {
                return Err(refused("id", "No such record on this account."));
            }
            Ok(json!({"id": id, "deleted": true}))
        }
        "list-conditions" | "list-executions" => {
            let kind = if name == "list-conditions" {
                CONDITION
            } else {
                EXECUTION
            };
            let given = typed::AlgorithmCreatorListConditions::from_valid(valid)?;
            let rows = match opt_record_id("algorithm_id", given.algorithm_id.as_ref())? {
                Some(algorithm_id) => {
                    let alg = algorithm(env, user, "algorithm_id", &algorithm_id)?;
                    children(env, user, kind, alg.id)?
                }
                None => {
                    let (rows, _) = store
                        .list_records(kind, user, trading_model::MAX_LIMIT, 0)
                        .map_err(db)?;
                    rows.into_iter().rev().collect()
                }
            };
            Ok(Value::Array(rows.iter().map(answer).collect()))
        }
        "list-condition-operators" => Ok(Value::Array(
            OPERATORS
                .iter()
                .map(|(o, d)| json!({"operator": o, "description": d}))
                .collect(),
        )),
        "list-order-types" => Ok(Value::Array(
            ORDER_TYPES
                .iter()
                .map(|(t, p, d)| json!({"order_type": t, "needs_price": p, "description": d}))
                .collect(),
        )),
        "validate-algorithm" => {
            let alg = algorithm(
                env,
                user,
                "id",
                &typed::AlgorithmCreatorAlgorithmRemove::from_valid(valid)?.id,
            )?;
            let found = problems(env, user, &alg)?;
            Ok(json!({"id": alg.id, "valid": found.is_empty(), "problems": found}))
        }
        "publish-algorithm" => {
            let alg = algorithm(
                env,
                user,
                "id",
                &typed::AlgorithmCreatorAlgorithmRemove::from_valid(valid)?.id,
            )?;
            if published(&alg) {
                return Err(refused("id", "The algorithm is already published."));
            }
            let found = problems(env, user, &alg)?;
            if !found.is_empty() {
                let mut e = refused("id", "The algorithm does not validate; see problems.");
                if let Some(v) = e.validation.as_mut() {
                    v.missing_information[0]["problems"] = json!(found);
                }
                return Err(e);
            }
            let mut f = Map::new();
            f.insert("published".into(), json!(true));
            f.insert("published_ms".into(), json!(now));
            let r = store
                .update_record(ALGORITHM, user, alg.id, &f, now)
                .map_err(db)?
                .ok_or_else(|| refused("id", "No such algorithm on this account."))?;
            algorithm_answer(env, user, &r)
        }
        "unpublish-algorithm" => {
            let alg = algorithm(
                env,
                user,
                "id",
                &typed::AlgorithmCreatorAlgorithmRemove::from_valid(valid)?.id,
            )?;
            if !published(&alg) {
                return Err(refused("id", "The algorithm is not published."));
            }
            let mut f = Map::new();
            f.insert("published".into(), json!(false));
            f.insert("published_ms".into(), Value::Null);
            let r = store
                .update_record(ALGORITHM, user, alg.id, &f, now)
                .map_err(db)?
                .ok_or_else(|| refused("id", "No such algorithm on this account."))?;
            algorithm_answer(env, user, &r)
        }
        _ => Err(ApiError::new(trading_model::ErrorCode::EmptyData).with_status(501)),
    }
}
