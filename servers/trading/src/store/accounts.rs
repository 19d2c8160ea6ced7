//! Accounts, plans and API keys: creating keys (and the accounts they belong to),
//! looking a key up for authentication with its secret unsealed, sub-account keys,
//! referrals, an account's custom plan settings and credited deposits.

use chacha20poly1305::Nonce;
use chacha20poly1305::aead::{Aead, Payload};
use std::io;

use rusqlite::{Connection, OptionalExtension, params};
use trading_model::plans::Plan;

use super::database::{Store, StoreError, hex, ms, random};
use super::records::Record;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS plans (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    rate_minute INTEGER NOT NULL
);
INSERT OR IGNORE INTO plans (id, name, rate_minute) VALUES ('0', 'Free', 60);
INSERT OR IGNORE INTO plans (id, name, rate_minute) VALUES ('1', 'Pro', 300);
INSERT OR IGNORE INTO plans (id, name, rate_minute) VALUES ('2', 'Enterprise', 1200);
-- For local load and schema tests: no per-key request limit (rateLimits.minute 0).
INSERT OR IGNORE INTO plans (id, name, rate_minute) VALUES ('100', 'Unlimited', 0);
CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    plan_id TEXT NOT NULL REFERENCES plans(id),
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS api_keys (
    key TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    secret_nonce BLOB NOT NULL,
    secret_sealed BLOB NOT NULL,
    strict INTEGER NOT NULL,
    -- The one nonce memory of versions before issue #29 (zero-padded to 20 digits); read
    -- as a floor by store/nonces.rs, no longer written.
    last_nonce TEXT,
    created_ms INTEGER NOT NULL
);
-- What a key is beyond its secret: the sub-account it signs for (NULL: the primary
-- account), when its session was revoked, and when and from where it was last used.
CREATE TABLE IF NOT EXISTS key_links (
    key TEXT PRIMARY KEY REFERENCES api_keys(key),
    subaccount_id INTEGER,
    revoked_ms INTEGER,
    last_seen_ms INTEGER,
    last_address TEXT
);
-- Per-account plan settings changed through change-setting-confirm (JSON object of
-- setting name to value) and the account that referred this one.
CREATE TABLE IF NOT EXISTS account_extra (
    user_id INTEGER PRIMARY KEY REFERENCES users(id),
    custom TEXT,
    referred_by INTEGER
);
";

/// A key as authentication needs it.
#[derive(Debug, Clone)]
pub struct KeyRecord {
    /// Owner's user id (`meta.uid`).
    pub user_id: i64,
    /// The decrypted secret.
    pub secret: Vec<u8>,
    /// Whether strict-mode tokens are required.
    pub strict: bool,
    /// The owner's plan.
    pub plan: Plan,
    /// The sub-account (record id under the owner) the key signs for, if any.
    pub subaccount_id: Option<i64>,
    /// Whether the key's session was revoked (the key no longer authenticates).
    pub revoked: bool,
}

/// A freshly created credential pair; the secret is shown once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewKey {
    /// Value for the `Key` header.
    pub key: String,
    /// HMAC secret.
    pub secret: String,
}

impl Store {
    /// Creates a key for user `name` (created on first use, on `plan`).
    pub fn create_key(
        &self,
        name: &str,
        plan: &str,
        strict: bool,
        now_ms: u64,
    ) -> Result<NewKey, StoreError> {
        let conn = self.conn();
        let plan_id: Option<String> = conn
            .query_row("SELECT id FROM plans WHERE name = ?1", [plan], |r| r.get(0))
            .optional()?;
        let Some(plan_id) = plan_id else {
            let mut stmt = conn.prepare("SELECT name FROM plans ORDER BY CAST(id AS INTEGER)")?;
            let known = stmt
                .query_map([], |r| r.get(0))?
                .collect::<Result<Vec<String>, _>>()?;
            return Err(StoreError::UnknownPlan {
                name: plan.to_owned(),
                known,
            });
        };
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        conn.execute(
            "INSERT INTO users (name, plan_id, created_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(name) DO NOTHING",
            params![name, plan_id, now],
        )?;
        let user_id: i64 =
            conn.query_row("SELECT id FROM users WHERE name = ?1", [name], |r| r.get(0))?;
        self.insert_key(&conn, user_id, None, strict, now)
    }

    /// Creates a key that signs for sub-account `username` of account `name`; the
    /// sub-account must exist (created by `subaccounts/subaccount-create`) and be active.
    pub fn create_subaccount_key(
        &self,
        name: &str,
        username: &str,
        strict: bool,
        now_ms: u64,
    ) -> Result<NewKey, StoreError> {
        let conn = self.conn();
        let (user_id, plan_id, plan): (i64, String, String) = conn
            .query_row(
                "SELECT u.id, p.id, p.name FROM users u JOIN plans p ON p.id = u.plan_id
                 WHERE u.name = ?1",
                [name],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?
            .ok_or_else(|| StoreError::NoSuchAccount(name.to_owned()))?;
        if !trading_model::plans::subaccount_api_access(&plan_id) {
            return Err(StoreError::NoSubaccountAccess { plan });
        }
        let mut stmt = conn
            .prepare("SELECT id, fields FROM records WHERE user_id = ?1 AND kind = 'subaccount'")?;
        let rows = stmt
            .query_map([user_id], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        drop(stmt);
        let found = rows.into_iter().find_map(|(id, text)| {
            let v: serde_json::Value = serde_json::from_str(&text).ok()?;
            let same = v["username"]
                .as_str()
                .is_some_and(|u| u.eq_ignore_ascii_case(username));
            (same && v["active"] == serde_json::Value::Bool(true)).then_some(id)
        });
        let Some(sub_id) = found else {
            return Err(StoreError::NoSuchSubaccount {
                account: name.to_owned(),
                username: username.to_owned(),
            });
        };
        self.insert_key(&conn, user_id, Some(sub_id), strict, ms(now_ms))
    }

    /// Records that account `name` was referred by account `referrer` (the first
    /// referrer sticks).
    pub fn set_referrer(&self, name: &str, referrer: &str) -> Result<(), StoreError> {
        let conn = self.conn();
        let id_of = |n: &str| -> Result<i64, StoreError> {
            conn.query_row("SELECT id FROM users WHERE name = ?1", [n], |r| r.get(0))
                .optional()?
                .ok_or_else(|| StoreError::NoSuchAccount(n.to_owned()))
        };
        let (user, by) = (id_of(name)?, id_of(referrer)?);
        if user != by {
            conn.execute(
                "INSERT INTO account_extra (user_id, referred_by) VALUES (?1, ?2)
                 ON CONFLICT(user_id) DO UPDATE SET referred_by = COALESCE(referred_by, ?2)",
                params![user, by],
            )?;
        }
        Ok(())
    }

    fn insert_key(
        &self,
        conn: &Connection,
        user_id: i64,
        subaccount_id: Option<i64>,
        strict: bool,
        now: i64,
    ) -> Result<NewKey, StoreError> {
        let key = hex(&random::<16>()?);
        let secret = hex(&random::<32>()?);
        let nonce = random::<12>()?;
        let sealed = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: secret.as_bytes(),
                    aad: key.as_bytes(),
                },
            )
            .map_err(|_| StoreError::Crypto)?;
        conn.execute(
            "INSERT INTO api_keys (key, user_id, secret_nonce, secret_sealed, strict, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![key, user_id, nonce.as_slice(), sealed, strict, now],
        )?;
        conn.execute(
            "INSERT INTO key_links (key, subaccount_id) VALUES (?1, ?2)",
            params![key, subaccount_id],
        )?;
        Ok(NewKey { key, secret })
    }

    /// Looks a key up and decrypts its secret.
    pub fn lookup(&self, key: &str) -> Result<Option<KeyRecord>, StoreError> {
        let row = self
            .conn()
            .query_row(
                "SELECT k.user_id, k.secret_nonce, k.secret_sealed, k.strict, p.id, p.name, p.rate_minute,
                        l.subaccount_id, l.revoked_ms
                 FROM api_keys k JOIN users u ON u.id = k.user_id JOIN plans p ON p.id = u.plan_id
                 LEFT JOIN key_links l ON l.key = k.key
                 WHERE k.key = ?1",
                [key],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, Vec<u8>>(1)?,
                        r.get::<_, Vec<u8>>(2)?,
                        r.get::<_, bool>(3)?,
                        Plan {
                            id: r.get(4)?,
                            name: r.get(5)?,
                            rate_minute: r.get(6)?,
                            custom: std::collections::BTreeMap::new(),
                        },
                        r.get::<_, Option<i64>>(7)?,
                        r.get::<_, Option<i64>>(8)?.is_some(),
                    ))
                },
            )
            .optional()?;
        let Some((user_id, nonce, sealed, strict, mut plan, subaccount_id, revoked)) = row else {
            return Ok(None);
        };
        if nonce.len() != 12 {
            return Err(StoreError::Crypto);
        }
        let secret = self
            .cipher
            .decrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &sealed,
                    aad: key.as_bytes(),
                },
            )
            .map_err(|_| StoreError::Crypto)?;
        plan.custom = self.custom_settings(user_id)?;
        Ok(Some(KeyRecord {
            user_id,
            secret,
            strict,
            plan,
            subaccount_id,
            revoked,
        }))
    }
}

/// An account as `user/account-details` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Account id.
    pub id: i64,
    /// Account name given to `create-key --name`.
    pub name: String,
    /// Subscription plan.
    pub plan: Plan,
    /// Creation time.
    pub created_ms: u64,
}

impl Store {
    /// The account with this id.
    pub fn user(&self, id: i64) -> Result<Option<User>, StoreError> {
        let user = self
            .conn()
            .query_row(
                "SELECT u.id, u.name, u.created_ms, p.id, p.name, p.rate_minute
                 FROM users u JOIN plans p ON p.id = u.plan_id WHERE u.id = ?1",
                [id],
                |r| {
                    Ok(User {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        created_ms: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                        plan: Plan {
                            id: r.get(3)?,
                            name: r.get(4)?,
                            rate_minute: r.get(5)?,
                            custom: std::collections::BTreeMap::new(),
                        },
                    })
                },
            )
            .optional()?;
        // The connection guard above must be gone before custom_settings locks it again.
        let Some(mut user) = user else {
            return Ok(None);
        };
        user.plan.custom = self.custom_settings(user.id)?;
        Ok(Some(user))
    }

    /// The plan settings changed for account `user_id` (empty when none were).
    pub fn custom_settings(
        &self,
        user_id: i64,
    ) -> Result<std::collections::BTreeMap<String, i64>, StoreError> {
        let text: Option<Option<String>> = self
            .conn()
            .query_row(
                "SELECT custom FROM account_extra WHERE user_id = ?1",
                [user_id],
                |r| r.get(0),
            )
            .optional()?;
        Ok(text
            .flatten()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default())
    }

    /// Credits a deposit of `amount` (a decimal with at most 8 places) to wallet `wallet`
    /// (BTC, ETH or USDT) of account `name`: the sandbox's way money arrives.
    pub fn credit_deposit(
        &self,
        name: &str,
        wallet: &str,
        amount: &str,
        now_ms: u64,
    ) -> Result<Record, StoreError> {
        let bad = |what: &str| {
            StoreError::Io(io::Error::new(io::ErrorKind::InvalidInput, what.to_owned()))
        };
        let wallet = wallet.to_ascii_uppercase();
        if !["BTC", "ETH", "USDT"].contains(&wallet.as_str()) {
            return Err(bad("--wallet must be BTC, ETH or USDT"));
        }
        let units = trading_model::wallets::parse_units(amount, 8)
            .filter(|u| *u > 0)
            .ok_or_else(|| bad("--amount must be a positive decimal with at most 8 places"))?;
        let user_id: i64 = self
            .conn()
            .query_row("SELECT id FROM users WHERE name = ?1", [name], |r| r.get(0))
            .optional()?
            .ok_or_else(|| StoreError::NoSuchAccount(name.to_owned()))?;
        let amount = format!("{}.{:08}", units / 100_000_000, units % 100_000_000);
        let mut f = serde_json::Map::new();
        f.insert("wallet".into(), wallet.clone().into());
        f.insert("amount".into(), amount.clone().into());
        f.insert("fee".into(), "0.00000000".into());
        f.insert("status".into(), "credited".into());
        f.insert("txid".into(), hex(&random::<32>()?).into());
        let rec = self.insert_record("deposit", user_id, &f, None, now_ms)?;
        let mut t = serde_json::Map::new();
        t.insert("type".into(), "deposit".into());
        t.insert("wallet".into(), wallet.into());
        t.insert("amount".into(), amount.into());
        t.insert("deposit_id".into(), rec.id.into());
        self.insert_record("topup", user_id, &t, None, now_ms)?;
        Ok(rec)
    }
}
