//! Account endpoints beyond the generic resources: sub-account keys and their permissions,
//! sessions, settings, security overview, referrals, subscriptions (packages, custom
//! settings, invoices, servers, drive time), wallets and the deposit/withdrawal history.
//!
//! Money here is bookkeeping only: invoices are recorded as issued and paid (no payment
//! provider), deposits are credited by the operator (`trading-api deposit`), withdrawals
//! stay in manual review, and deposit addresses are derived deterministically from the
//! account id (they are not real chain addresses). Plans and their limits are in
//! `trading_model::plans`; sub-account permissions in `admission`.

mod admission;
mod answers;
mod servers;
mod subscriptions;
mod user_settings;
mod wallets;

pub(crate) use admission::admit;

use serde_json::{Map, Value, json};
use trading_model::plans::{PACKAGES, package_json};
use trading_model::wallets::{confirmations, fmt_units, min_deposit};
use trading_model::{ApiError, Endpoint, ErrorCode, Valid, typed};

use crate::context::{Caller, RequestContext, db, for_caller, record_id};
use crate::resources::answer;
use answers::{WHOLE, list, no_record, paging};
use servers::{add_drivetime, disable_server, enable_server, server_types, speed_test};
use subscriptions::{change_package, recommendation, setting_confirm, setting_request};
use user_settings::{referrals, security, sessions, settings};
use wallets::{account_balance, balances, deposit_address, withdraw};

/// Endpoints answered here.
const PATHS: &[&str] = &[
    "user/settings",
    "user/security-settings",
    "user/account-balance",
    "user/list-referrals",
    "user/active-sessions",
    "subaccounts/subaccount-access-history",
    "subaccounts/subaccount-delete",
    "subaccounts/broadcast-edit",
    "subscriptions/cancel",
    "subscriptions/invoices",
    "subscriptions/change-php-sdk",
    "subscriptions/change-package",
    "subscriptions/php-sdk-recommendation",
    "subscriptions/list-packages",
    "subscriptions/change-setting-request",
    "subscriptions/change-setting-confirm",
    "subscriptions/server-types",
    "subscriptions/enable-private-server",
    "subscriptions/enable-shared-server",
    "subscriptions/list-private-servers",
    "subscriptions/list-shared-servers",
    "subscriptions/disable-private-server",
    "subscriptions/disable-shared-server",
    "subscriptions/add-drivetime",
    "subscriptions/list-history",
    "tests/server-location-speed-to-exchange",
    "wallets/fetch-deposit-address",
    "wallets/list-balances",
    "wallets/withdraw",
    "finance/list-depoists",
    "finance/list-withdraws",
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
    for_caller(handles(&ep.path), env, |c| answer_for(ep, valid, env, c))
}

fn answer_for(
    ep: &Endpoint,
    valid: &Valid,
    env: &RequestContext,
    c: &Caller,
) -> Result<Value, ApiError> {
    let (store, user, now) = (&*env.store, c.user_id, env.now_ms);
    match ep.path.as_str() {
        "user/settings" => settings(store, c, valid, now),
        "user/security-settings" => security(store, c),
        "user/account-balance" => account_balance(env, user),
        "user/list-referrals" => referrals(store, user, &paging(ep, valid)),
        "user/active-sessions" => {
            let p = typed::UserActiveSessions::from_valid(valid)?;
            sessions(store, c, &p.request, now)
        }
        "subaccounts/subaccount-access-history" => list(store, "subaccount_access", user, &WHOLE),
        "subaccounts/subaccount-delete" => {
            let (spec, action) = crate::resources::find(&ep.path)
                .ok_or_else(|| ApiError::new(ErrorCode::EmptyData))?;
            let out = crate::resources::run(spec, action, ep, valid, store, c, now)?;
            // Deleting a sub-account ends its sessions: its keys stop authenticating.
            let p = typed::SubaccountsSubaccountDelete::from_valid(valid)?;
            let id = p.id.trim().parse::<i64>().ok();
            store.revoke_subaccount_keys(user, id, now).map_err(db)?;
            Ok(out)
        }
        "subaccounts/broadcast-edit" => {
            let p = typed::SubaccountsBroadcastEdit::from_valid(valid)?;
            let id = record_id("id", &p.id)?;
            let mut changes = Map::new();
            changes.insert("title".into(), json!(p.title));
            changes.insert("body".into(), json!(p.body));
            let r = store
                .update_record("broadcast", user, id, &changes, now)
                .map_err(db)?
                .ok_or_else(|| no_record("id"))?;
            Ok(answer(&r))
        }
        "subscriptions/cancel" => Err(ApiError::new(ErrorCode::CloseAccountOnWebsite)
            .with_message("Please use the website to cancel your subscription.")),
        "subscriptions/invoices" => list(store, "invoice", user, &WHOLE),
        "subscriptions/list-packages" => Ok(json!({
            "current": {"id": c.plan.id, "name": c.plan.name},
            "packages": PACKAGES.iter().map(|(id, n)| package_json(id, n)).collect::<Vec<_>>(),
        })),
        "subscriptions/change-php-sdk" | "subscriptions/change-package" => {
            let p = typed::SubscriptionsChangePackage::from_valid(valid)?;
            change_package(store, c, p.id.trim(), now)
        }
        "subscriptions/php-sdk-recommendation" => recommendation(store, c),
        "subscriptions/change-setting-request" => setting_request(store, c, valid, now),
        "subscriptions/change-setting-confirm" => setting_confirm(store, c, valid, now),
        "subscriptions/server-types" => {
            let p = typed::SubscriptionsServerTypes::from_valid(valid)?;
            Ok(server_types(&p.r#type.to_ascii_lowercase(), p.duration))
        }
        "subscriptions/enable-private-server" => enable_server(store, c, "private", valid, now),
        "subscriptions/enable-shared-server" => enable_server(store, c, "shared", valid, now),
        "subscriptions/list-private-servers" => {
            list(store, "server_private", user, &paging(ep, valid))
        }
        "subscriptions/list-shared-servers" => {
            list(store, "server_shared", user, &paging(ep, valid))
        }
        "subscriptions/disable-private-server" => {
            disable_server(store, user, "private", valid, now)
        }
        "subscriptions/disable-shared-server" => disable_server(store, user, "shared", valid, now),
        "subscriptions/add-drivetime" => add_drivetime(store, c, valid, now),
        "subscriptions/list-history" => list(store, "topup", user, &WHOLE),
        "tests/server-location-speed-to-exchange" => speed_test(env, user, valid),
        "wallets/fetch-deposit-address" => {
            let wallet = typed::WalletsFetchDepositAddress::from_valid(valid)?.wallet;
            let wallet = wallet.to_ascii_uppercase();
            Ok(json!({
                "wallet": wallet,
                "address": deposit_address(user, &wallet),
                "minimum_deposit": fmt_units(min_deposit(&wallet)),
                "confirmations": confirmations(&wallet),
            }))
        }
        "wallets/list-balances" => {
            let rows = balances(store, user)?;
            let (page_rows, info) = paging(ep, valid).apply(&rows);
            Ok(
                json!({"records": page_rows, "page": info.page, "showing": info.showing, "total": info.total}),
            )
        }
        "wallets/withdraw" => withdraw(store, user, valid, now),
        "finance/list-depoists" => list(store, "deposit", user, &paging(ep, valid)),
        "finance/list-withdraws" => list(store, "withdrawal", user, &WHOLE),
        _ => Err(ApiError::new(ErrorCode::EmptyData)),
    }
}

#[cfg(test)]
mod tests {
    use super::admission::sub_forbidden;
    use super::servers::{may_disable, price_cents};
    use super::user_settings::referral_code;
    use super::wallets::deposit_address;

    #[test]
    fn servers_cannot_be_disabled_while_strategies_run() {
        assert!(may_disable(0).is_ok());
        let e = may_disable(2).unwrap_err();
        assert_eq!((e.code.code(), e.status), (1440, 422));
    }

    #[test]
    fn sub_account_permissions() {
        for p in [
            "subaccounts/subaccount-create",
            "subaccounts/subaccount-access-history",
            "subaccounts/broadcast-create",
            "subscriptions/change-package",
            "user/close-account",
            "exchange-api-keys/add",
        ] {
            let e = sub_forbidden(p, true).unwrap();
            assert_eq!(e.status, 403, "{p}");
        }
        assert!(sub_forbidden("subscriptions/details", false).is_none());
        assert!(sub_forbidden("subaccounts/broadcast-list", false).is_none());
        assert!(sub_forbidden("exchange-api-keys/test", true).is_none());
        assert!(sub_forbidden("exchange-api-keys/test", false).is_some());
        assert!(sub_forbidden("exchange-api-keys/list", false).is_none());
    }

    #[test]
    fn addresses_and_prices() {
        assert_eq!(deposit_address(7, "BTC"), deposit_address(7, "BTC"));
        assert_ne!(deposit_address(7, "BTC"), deposit_address(8, "BTC"));
        assert_eq!(deposit_address(7, "BTC").len(), 42);
        assert_eq!(referral_code(1), "ex-1001");
        assert_eq!(price_cents(8, 7200), 16);
    }
}
