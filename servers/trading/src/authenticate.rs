//! Who is calling: the SDKs' `Key` + `Authorization` headers checked against the key
//! store, the token (`trading_model::auth`) and the key's replay memory
//! (`trading_model::replay`), then the account's admission rules (`account::admit`).

use std::sync::Arc;

use trading_model::auth::{AuthError, Signed, Token};
use trading_model::replay::Nonce;
use trading_model::{ApiError, ErrorCode};

use crate::context::{Caller, store_error};
use crate::store::Store;

/// Checks, in order: key header, Authorization header, token shape, key known, signature,
/// nonce shape, strict claims (for strict keys), then the key's replay memory
/// (`trading_model::replay`), which remembers the nonce. The nonce is only consumed by a
/// request that passed every other check, so forged requests cannot burn a client's
/// nonces.
pub(crate) async fn authenticate(
    keys: &Arc<Store>,
    plan_spacing: bool,
    key: Option<String>,
    authorization: Option<String>,
    signed: &Signed<'_>,
    address: &str,
    now_ms: u64,
) -> Result<Caller, ApiError> {
    let key = key.ok_or_else(|| AuthError::MissingKey.to_api_error())?;
    let authorization =
        authorization.ok_or_else(|| AuthError::MissingAuthorization.to_api_error())?;
    let token = Token::parse(&authorization).map_err(|e| e.to_api_error())?;
    let store = keys.clone();
    let k = key.clone();
    let record = tokio::task::spawn_blocking(move || store.lookup(&k))
        .await
        .map_err(|_| ApiError::new(ErrorCode::Database))?
        .map_err(|e| store_error(&e))?
        .ok_or_else(|| AuthError::InvalidKey.to_api_error())?;
    // A revoked session signs nothing, whatever the signature says.
    if record.revoked {
        return Err(AuthError::InvalidKey.to_api_error());
    }
    token.verify(&record.secret).map_err(|e| e.to_api_error())?;
    let nonce = token
        .nonce()
        .and_then(Nonce::new)
        .map_err(|e| e.to_api_error())?;
    if record.strict {
        token
            .check_strict(signed, now_ms)
            .map_err(|e| e.to_api_error())?;
    }
    let store = keys.clone();
    let k = key.clone();
    tokio::task::spawn_blocking(move || store.accept_nonce(&k, &nonce, now_ms))
        .await
        .map_err(|_| ApiError::new(ErrorCode::Database))?
        .map_err(|e| store_error(&e))?
        .map_err(|refusal| refusal.to_api_error())?;
    // Who the key speaks for, what it may do, and its session's last use: after the nonce,
    // so only genuine requests count as use.
    let store = keys.clone();
    let (path, address) = (signed.path.to_owned(), address.to_owned());
    tokio::task::spawn_blocking(move || {
        crate::account::admit(&store, record, key, (&path, &address), plan_spacing, now_ms)
    })
    .await
    .map_err(|_| ApiError::new(ErrorCode::Database))?
}
