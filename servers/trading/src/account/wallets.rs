//! The executium-side wallets: deposit addresses, balances from deposits and
//! withdrawals, the account balance, and withdrawal requests (held for review).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use trading_model::wallets::{WALLETS, fmt_units, parse_units, wallet};
use trading_model::{ApiError, Valid, typed};

use super::answers::text;
use super::servers::{hash_str, mix};
use crate::context::{RequestContext, db, refused};
use crate::resources::answer;
use crate::store::Store;

/// A deterministic deposit address per account and wallet (the sandbox has no chains).
pub(crate) fn deposit_address(user: i64, w: &str) -> String {
    let seed = hash_str(&format!("{user}/{w}"));
    let hex: String = (0..3)
        .map(|i| format!("{:016x}", mix(seed.wrapping_add(i))))
        .collect();
    match w {
        "BTC" => format!("bc1q{}", &hex[..38]),
        _ => format!("0x{}", &hex[..40]),
    }
}

/// Per wallet: deposited, withdrawn (amount plus fee, except rejected requests) and
/// pending (in review).
pub(crate) fn balances(store: &Store, user: i64) -> Result<Vec<Value>, ApiError> {
    let sum = |kind: &str| -> Result<BTreeMap<String, (i128, i128)>, ApiError> {
        let (rows, _) = store
            .list_records(kind, user, trading_model::MAX_LIMIT, 0)
            .map_err(db)?;
        let mut m: BTreeMap<String, (i128, i128)> = BTreeMap::new();
        for r in rows {
            if r.fields.get("status") == Some(&json!("rejected")) {
                continue;
            }
            let amount = parse_units(&text(&r, "amount"), 8).unwrap_or(0)
                + parse_units(&text(&r, "fee"), 8).unwrap_or(0);
            let pending = if r.fields.get("status") == Some(&json!("manual_review")) {
                amount
            } else {
                0
            };
            let e = m.entry(text(&r, "wallet")).or_default();
            e.0 += amount;
            e.1 += pending;
        }
        Ok(m)
    };
    let (dep, wd) = (sum("deposit")?, sum("withdrawal")?);
    Ok(WALLETS
        .iter()
        .map(|(w, decimals, fee, _)| {
            let d = dep.get(*w).map_or(0, |x| x.0);
            let (out, pending) = wd.get(*w).copied().unwrap_or_default();
            json!({
                "wallet": w,
                "decimals": decimals,
                "deposited": fmt_units(d),
                "withdrawn": fmt_units(out - pending),
                "pending_withdrawal": fmt_units(pending),
                "balance": fmt_units(d - out),
                "withdrawal_fee": fmt_units(*fee),
            })
        })
        .collect())
}

pub(crate) fn account_balance(env: &RequestContext, user: i64) -> Result<Value, ApiError> {
    let rows = balances(&env.store, user)?;
    let mut total = 0.0;
    let wallets: Vec<Value> = rows
        .into_iter()
        .map(|mut r| {
            let w = r["wallet"].as_str().unwrap_or("").to_owned();
            let bal: f64 = r["balance"].as_str().unwrap_or("0").parse().unwrap_or(0.0);
            let usd = env.market.asset_usd(&w, env.now_ms).unwrap_or(0.0) * bal;
            total += usd;
            r["usd"] = json!((usd * 100.0).round() / 100.0);
            r
        })
        .collect();
    Ok(
        json!({"wallets": wallets, "total_usd": (total * 100.0).round() / 100.0, "time": env.now_ms / 1000}),
    )
}

pub(crate) fn withdraw(
    store: &Store,
    user: i64,
    valid: &Valid,
    now: u64,
) -> Result<Value, ApiError> {
    let p = typed::WalletsWithdraw::from_valid(valid)?;
    let w = p.wallet.to_ascii_uppercase();
    let Some((w, _, fee, _)) = wallet(&w) else {
        return Err(refused("wallet", "Unknown wallet."));
    };
    let address = p.address.trim().to_owned();
    let amount = parse_units(&p.amount, 8)
        .filter(|a| *a > 0)
        .ok_or_else(|| refused("amount", "Give a positive amount with at most 8 decimals."))?;
    let balance = balances(store, user)?
        .iter()
        .find(|r| r["wallet"] == *w)
        .and_then(|r| parse_units(r["balance"].as_str()?.trim_start_matches('-'), 8))
        .unwrap_or(0);
    if amount + fee > balance {
        return Err(refused(
            "amount",
            format!(
                "Amount plus the fee of {} {w} exceeds the balance of {} {w}.",
                fmt_units(*fee),
                fmt_units(balance)
            ),
        ));
    }
    let mut f = Map::new();
    f.insert("wallet".into(), json!(w));
    f.insert("address".into(), json!(address));
    f.insert("amount".into(), json!(fmt_units(amount)));
    f.insert("fee".into(), json!(fmt_units(*fee)));
    f.insert("status".into(), json!("manual_review"));
    f.insert("review_until_ms".into(), json!(now + 86_400_000));
    let r = store
        .insert_record("withdrawal", user, &f, None, now)
        .map_err(db)?;
    Ok(answer(&r))
}
