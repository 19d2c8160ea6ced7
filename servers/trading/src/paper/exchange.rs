//! The simulated exchanges: exchange-key checks, paper orders (placed, delayed, repeated,
//! filled against the seeded books, expired, cancelled), paper balances per exchange key,
//! the request log and predefined exchange queries.

use serde_json::{Map, Value, json};
use trading_model::market::Market;
use trading_model::strategy::{Event, State, transition};
use trading_model::{ApiError, order_request, typed};

use super::balances::key_problem;
use super::call_context::{Cx, db, iso, sql};
use super::orders::{balances_of, cancel, place};
use crate::context::{NO_RECORD, record_id, refused};
use crate::store::{NewOrder, Order, Orders, PaperDb};

/// Predefined `exchange-query/create-query` types.
const QUERY_TYPES: [&str; 4] = ["balance", "open_orders", "closed_orders", "trades"];

pub(super) fn call(cx: &Cx<'_>, path: &str) -> Result<Value, ApiError> {
    match path {
        "exchange-api-keys/test" => test_key(cx),
        "exchange-api-keys/delete" => delete_key(cx),
        "exchange-query/order-create" => order_create(cx),
        "exchange-query/list-open-orders" => list_orders(cx, true),
        "exchange-query/list-closed-orders" => list_orders(cx, false),
        "exchange-query/order-check" => order_check(cx),
        "exchange-query/order-cancel" => order_cancel(cx),
        "exchange-query/list-balances" => list_balances(cx),
        "exchange-query/list-exchange-requests" => list_requests(cx),
        "exchange-query/create-query" => create_query(cx),
        _ => Err(refused("path", "unhandled")),
    }
}

fn order_create(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let market = &cx.env.market;
    let p = typed::ExchangeQueryOrderCreate::from_valid(cx.valid)?;
    let key = record_id("apikey", &p.apikey)?;
    let o = order_request::check(&p, market, cx.now())?;
    let now = cx.now();
    let conn = cx.store().paper();
    if let Some(problem) = key_problem(&conn, cx.user(), key, o.symbol.exchange).map_err(sql)? {
        return Err(refused("apikey", problem));
    }
    let mut out = Vec::new();
    for i in 0..o.repeat {
        let n = NewOrder {
            user: cx.user(),
            key,
            exchange: o.symbol.exchange,
            code: &o.symbol.code,
            kind: &o.kind,
            side: o.side,
            amount: o.amount,
            price: o.price,
            send_ms: o.send_ms(i),
            expire_after: o.expire_after,
            strategy_id: None,
            client_id: String::new(),
        };
        out.push(place(&conn, market, &n, now).map_err(sql)?.to_json(market));
    }
    Ok(json!({"orders": out, "count": out.len()}))
}

/// The caller's order named by `given` (the `id` parameter).
fn own_order(cx: &Cx<'_>, conn: &PaperDb<'_>, given: &str) -> Result<Order, ApiError> {
    let id = record_id("id", given)?;
    match conn.order_by_id(id).map_err(sql)? {
        Some(o) if o.user_id == cx.user() => Ok(o),
        _ => Err(refused("id", NO_RECORD)),
    }
}

fn list_orders(cx: &Cx<'_>, open: bool) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let p = typed::ExchangeQueryListOpenOrders::from_valid(cx.valid)?;
    let key = p.apikey.and_then(|s| s.trim().parse::<i64>().ok());
    let code = p.code.map(|c| c.trim().to_ascii_lowercase());
    let rows = conn
        .orders(if open {
            Orders::LiveOfUser(cx.user())
        } else {
            Orders::DoneOfUser(cx.user())
        })
        .map_err(sql)?;
    Ok(Value::Array(
        rows.iter()
            .filter(|o| key.is_none_or(|k| o.apikey_id == k))
            .filter(|o| code.as_deref().is_none_or(|c| o.code == c))
            .map(|o| o.to_json(&cx.env.market))
            .collect(),
    ))
}

fn order_check(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let given = typed::ExchangeQueryOrderCheck::from_valid(cx.valid)?;
    let conn = cx.store().paper();
    let mut o = own_order(cx, &conn, &given.id)?;
    o.checks += 1;
    conn.log_request(
        o.user_id,
        o.apikey_id,
        &o.exchange,
        "fetchOrder",
        &json!({"order": o.id.to_string()}),
        cx.now(),
    )
    .map_err(sql)?;
    conn.save(&o).map_err(sql)?;
    Ok(o.to_json(&cx.env.market))
}

fn order_cancel(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let given = typed::ExchangeQueryOrderCancel::from_valid(cx.valid)?;
    let conn = cx.store().paper();
    let mut o = own_order(cx, &conn, &given.id)?;
    if !o.is_live() {
        return Err(refused(
            "id",
            format!(
                "The order is {}; only open or pending orders can be cancelled.",
                o.status
            ),
        ));
    }
    cancel(&conn, &mut o, cx.now()).map_err(sql)?;
    Ok(o.to_json(&cx.env.market))
}

fn list_balances(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let given = typed::ExchangeQueryListBalances::from_valid(cx.valid)?;
    let only = given.apikey.and_then(|s| s.trim().parse::<i64>().ok());
    let mut out = Vec::new();
    for (id, f) in conn.keys_of(cx.user()).map_err(sql)? {
        if only.is_some_and(|k| k != id) {
            continue;
        }
        let exchange = f
            .get("exchange")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let balances = balances_of(&conn, &cx.env.market, id, &exchange).map_err(sql)?;
        conn.log_request(
            cx.user(),
            id,
            &exchange,
            "fetchBalance",
            &json!({}),
            cx.now(),
        )
        .map_err(sql)?;
        out.push(json!({
            "apikey": id,
            "exchange": exchange,
            "label": f.get("label").cloned().unwrap_or(Value::Null),
            "status": f.get("status").cloned().unwrap_or(json!("active")),
            "balances": balances,
        }));
    }
    if let Some(k) = only {
        if out.is_empty() {
            return Err(refused(
                "apikey",
                format!("Exchange API key {k} is not a key of this account."),
            ));
        }
    }
    Ok(Value::Array(out))
}

/// Requests `list-exchange-requests` shows; the endpoint documents no `limit`.
const REQUESTS_SHOWN: i64 = 100;

fn list_requests(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let conn = cx.store().paper();
    let limit = REQUESTS_SHOWN;
    let requests = conn.requests(cx.user(), limit).map_err(sql)?;
    Ok(Value::Array(
        requests
            .into_iter()
            .map(|r| {
                json!({
                    "id": r.id,
                    "apikey": r.apikey_id,
                    "exchange": r.exchange,
                    "request": r.request,
                    "detail": r.detail,
                    "time_ms": r.time_ms,
                    "datetime": iso(r.time_ms),
                })
            })
            .collect(),
    ))
}

/// `create-query`: runs a predefined query through the key against its simulated exchange
/// and stores the query with the answer it got.
fn create_query(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let given = typed::ExchangeQueryCreateQuery::from_valid(cx.valid)?;
    let key = record_id("apikey", &given.apikey)?;
    let kind = given.exchange_query.trim().to_ascii_lowercase();
    let (exchange, result) = {
        let conn = cx.store().paper();
        let Some(f) = conn.key_fields(cx.user(), key).map_err(sql)? else {
            return Err(refused("apikey", NO_RECORD));
        };
        let exchange = f
            .get("exchange")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if !QUERY_TYPES.contains(&kind.as_str()) {
            return Err(ApiError::validation(trading_model::ValidationFailure {
                missing_information: vec![json!({"parameter": "exchange_query",
                    "error": "Unknown predefined query.", "supported": QUERY_TYPES})],
                ..Default::default()
            }));
        }
        let market = &cx.env.market;
        let result = match kind.as_str() {
            "balance" => balances_of(&conn, market, key, &exchange).map_err(sql)?,
            "trades" => {
                let rows = conn.orders(Orders::OfKey(key)).map_err(sql)?;
                Value::Array(rows.iter().flat_map(|o| o.trades.clone()).collect())
            }
            k => {
                let open = k == "open_orders";
                let rows = conn.orders(Orders::OfKey(key)).map_err(sql)?;
                Value::Array(
                    rows.iter()
                        .filter(|o| o.is_live() == open)
                        .map(|o| o.to_json(market))
                        .collect(),
                )
            }
        };
        conn.log_request(
            cx.user(),
            key,
            &exchange,
            &format!("query:{kind}"),
            &json!({}),
            cx.now(),
        )
        .map_err(sql)?;
        (exchange, result)
    };
    let mut fields = Map::new();
    fields.insert("apikey".into(), json!(key.to_string()));
    fields.insert("exchange_query".into(), json!(kind));
    fields.insert("exchange".into(), json!(exchange));
    fields.insert("result".into(), result);
    fields.insert("run_ms".into(), json!(cx.now()));
    let rec = cx
        .store()
        .insert_record("exchange_query", cx.user(), &fields, None, cx.now())
        .map_err(db)?;
    Ok(crate::resources::answer(&rec))
}

/// The simulated exchange's verdict on stored credentials: token and secret must be
/// printable key material (letters, digits, `-`, `_`), the secret must differ from the
/// token, and exchanges that need a passphrase must have one.
fn verdict(
    market: &Market,
    exchange: &str,
    sealed: &Map<String, Value>,
) -> Vec<(&'static str, bool)> {
    let get = |k: &str| sealed.get(k).and_then(Value::as_str).unwrap_or("");
    let shaped = |s: &str| {
        s.len() >= 5
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let needs = market.exchange(exchange).is_some_and(|e| e.needs_password);
    vec![
        ("exchange_known", market.exchange(exchange).is_some()),
        ("token_shape", shaped(get("token"))),
        ("secret_shape", shaped(get("secret"))),
        ("secret_differs_from_token", get("token") != get("secret")),
        (
            "password_present",
            !needs || !get("password").trim().is_empty(),
        ),
    ]
}

fn test_key(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let id = record_id("id", &typed::ExchangeApiKeysTest::from_valid(cx.valid)?.id)?;
    let store = cx.store();
    let rec = store
        .get_record("exchange_api_key", cx.user(), id)
        .map_err(db)?
        .ok_or_else(|| refused("id", NO_RECORD))?;
    let sealed = store
        .sealed_fields("exchange_api_key", cx.user(), id)
        .map_err(db)?
        .unwrap_or_default();
    let exchange = rec
        .fields
        .get("exchange")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let checks = verdict(&cx.env.market, &exchange, &sealed);
    let passed = checks.iter().all(|(_, ok)| *ok);
    let was = rec
        .fields
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("active")
        .to_owned();
    // A key the exchange rejected stays disabled: its credentials cannot change (edit only
    // relabels), so a later pass would be the same stored secret.
    let status = if passed && was == "active" {
        "active"
    } else {
        "disabled"
    };
    let mut stopped = Vec::new();
    {
        let conn = store.paper();
        conn.log_request(
            cx.user(),
            id,
            &exchange,
            "testCredentials",
            &json!({"passed": passed}),
            cx.now(),
        )
        .map_err(sql)?;
    }
    if status == "disabled" && was != "disabled" {
        let mut changes = Map::new();
        changes.insert("status".into(), json!("disabled"));
        store
            .update_record("exchange_api_key", cx.user(), id, &changes, cx.now())
            .map_err(db)?;
        // Strategies trading through it stop at once; their orders stay flagged.
        for s in super::strategies::running_using_key(store, cx.user(), id).map_err(sql)? {
            if let Ok((State::Stopped, fx)) = transition(State::Running, Event::KeyDisabled) {
                super::strategies::apply_stop(cx, s, &fx, "exchange API key disabled")
                    .map_err(sql)?;
                stopped.push(s);
            }
        }
    }
    Ok(json!({
        "id": id,
        "exchange": exchange,
        "valid": passed,
        "status": status,
        "checks": checks.iter().map(|(name, ok)| json!({"check": name, "passed": ok})).collect::<Vec<_>>(),
        "stopped_strategies": stopped,
        "message": if passed { "The exchange accepted the credentials." } else { "The exchange rejected the credentials; the key is disabled." },
    }))
}

fn delete_key(cx: &Cx<'_>) -> Result<Value, ApiError> {
    let id = record_id(
        "id",
        &typed::ExchangeApiKeysDelete::from_valid(cx.valid)?.id,
    )?;
    let store = cx.store();
    if store
        .get_record("exchange_api_key", cx.user(), id)
        .map_err(db)?
        .is_none()
    {
        return Err(refused("id", NO_RECORD));
    }
    let users = super::strategies::running_using_key(store, cx.user(), id).map_err(sql)?;
    if !users.is_empty() {
        return Err(ApiError::validation(trading_model::ValidationFailure {
            missing_information: vec![json!({
                "parameter": "id",
                "error": "A running strategy uses this exchange API key; stop it first.",
                "strategies": users,
            })],
            ..Default::default()
        }));
    }
    store
        .delete_record("exchange_api_key", cx.user(), id)
        .map_err(db)?;
    let conn = store.paper();
    // Orders of a deleted key could never be managed again: the exchange cancels them.
    let live = conn.orders(Orders::LiveOfKey(id)).map_err(sql)?;
    let cancelled = live.len();
    for mut o in live {
        cancel(&conn, &mut o, cx.now()).map_err(sql)?;
    }
    conn.delete_balances(id).map_err(sql)?;
    Ok(json!({"id": id, "deleted": true, "orders_cancelled": cancelled}))
}
