//! The embedded SQL store (SQLite, bundled): users, plans and API keys with their nonce
//! memory. Key secrets are encrypted at rest with ChaCha20-Poly1305 under a master key
//! kept in the data directory (`master.key`, mode 0600), because HMAC verification needs
//! the secret itself and a stolen database alone must not reveal it.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Mutex;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rusqlite::{Connection, OptionalExtension, params};

mod account;
mod marketplace;
mod nonces;
mod paper;

/// Store failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite reported an error.
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The data directory or master key file could not be used.
    #[error("data directory: {0}")]
    Io(#[from] io::Error),
    /// `create-key --plan` named a plan that does not exist.
    #[error("unknown plan {name:?}; known plans: {}", known.join(", "))]
    UnknownPlan {
        /// The requested plan.
        name: String,
        /// Plans that exist.
        known: Vec<String>,
    },
    /// `create-key --subaccount` or `--referred-by` named an account that does not exist.
    #[error("no account named {0:?}")]
    NoSuchAccount(String),
    /// `create-key --subaccount` named no sub-account of the account, or an inactive one.
    #[error("account {account:?} has no active sub-account with username {username:?}")]
    NoSuchSubaccount {
        /// The primary account.
        account: String,
        /// The requested sub-account username.
        username: String,
    },
    /// `create-key --subaccount` for an account whose plan has no sub-account API access.
    #[error("the {plan} plan does not include API access for sub-accounts")]
    NoSubaccountAccess {
        /// The account's plan.
        plan: String,
    },
    /// A secret could not be decrypted (wrong master key or damaged row).
    #[error(
        "a stored secret could not be decrypted; is master.key the one the data was written with?"
    )]
    Crypto,
    /// The operating system's random source failed.
    #[error("random source failed: {0}")]
    Random(String),
}

pub use trading_model::plans::Plan;

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

/// The store. One connection behind a mutex: requests hold it for single short statements.
pub struct Store {
    conn: Mutex<Connection>,
    cipher: ChaCha20Poly1305,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

const SCHEMA: &str = "
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
-- One table for the account resources whose fields the spec leaves open (watchlists,
-- keywords, broadcasts, articles, tickets, sub-accounts, ...). `fields` is a JSON object;
-- `sealed` holds encrypted fields that are never returned (exchange secrets, passwords).
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    user_id INTEGER NOT NULL REFERENCES users(id),
    fields TEXT NOT NULL,
    sealed_nonce BLOB,
    sealed BLOB,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS records_owner ON records (user_id, kind, id);
-- Ids start above 1000: several id parameters (apikey, ...) have a minimum length of 2,
-- and AUTOINCREMENT never hands a deleted id out again.
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'records', 1000 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'records');
";

/// One stored account resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Row id, unique across kinds.
    pub id: i64,
    /// Visible fields.
    pub fields: serde_json::Map<String, serde_json::Value>,
    /// Creation time.
    pub created_ms: u64,
    /// Last change.
    pub updated_ms: u64,
}

fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn record_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Record> {
    let text: String = r.get(1)?;
    let fields = match serde_json::from_str(&text) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    Ok(Record {
        id: r.get(0)?,
        fields,
        created_ms: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
        updated_ms: u64::try_from(r.get::<_, i64>(3)?).unwrap_or(0),
    })
}

fn random<const N: usize>() -> Result<[u8; N], StoreError> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| StoreError::Random(e.to_string()))?;
    Ok(b)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn master_key(dir: &Path) -> Result<[u8; 32], StoreError> {
    let path = dir.join("master.key");
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    match opts.open(&path) {
        Ok(mut f) => {
            let key = random::<32>()?;
            f.write_all(&key)?;
            f.sync_all()?;
            Ok(key)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let mut buf = Vec::new();
            fs::File::open(&path)?.read_to_end(&mut buf)?;
            <[u8; 32]>::try_from(buf.as_slice()).map_err(|_| {
                StoreError::Io(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} must hold exactly 32 bytes", path.display()),
                ))
            })
        }
        Err(e) => Err(e.into()),
    }
}

impl Store {
    /// Opens (creating if needed) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        fs::create_dir_all(dir)?;
        let key = master_key(dir)?;
        let conn = Connection::open(dir.join("trading.sqlite"))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Store::init(conn, key)
    }

    /// A throw-away store for tests and for running without `--data-dir`.
    pub fn in_memory() -> Result<Store, StoreError> {
        Store::init(Connection::open_in_memory()?, random::<32>()?)
    }

    fn init(conn: Connection, key: [u8; 32]) -> Result<Store, StoreError> {
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch(nonces::SCHEMA)?;
        for schema in [account::SCHEMA, paper::SCHEMA, marketplace::SCHEMA] {
            conn.execute_batch(schema)?;
        }
        Ok(Store {
            conn: Mutex::new(conn),
            cipher: ChaCha20Poly1305::new(Key::from_slice(&key)),
        })
    }

    pub(crate) fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite half-written (statements are
        // atomic), so a poisoned lock is safe to reuse.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

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

    /// Stores a new record; `hidden` is encrypted and never read back by the API.
    pub fn insert_record(
        &self,
        kind: &str,
        user_id: i64,
        fields: &serde_json::Map<String, serde_json::Value>,
        hidden: Option<&serde_json::Map<String, serde_json::Value>>,
        now_ms: u64,
    ) -> Result<Record, StoreError> {
        let (nonce, sealed) = match hidden {
            Some(h) => {
                let nonce = random::<12>()?;
                let aad = format!("{kind}:{user_id}");
                let sealed = self
                    .cipher
                    .encrypt(
                        Nonce::from_slice(&nonce),
                        Payload {
                            msg: serde_json::Value::Object(h.clone()).to_string().as_bytes(),
                            aad: aad.as_bytes(),
                        },
                    )
                    .map_err(|_| StoreError::Crypto)?;
                (Some(nonce.to_vec()), Some(sealed))
            }
            None => (None, None),
        };
        let conn = self.conn();
        let text = serde_json::Value::Object(fields.clone()).to_string();
        conn.execute(
            "INSERT INTO records (kind, user_id, fields, sealed_nonce, sealed, created_ms, updated_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
            params![kind, user_id, text, nonce, sealed, ms(now_ms)],
        )?;
        Ok(Record {
            id: conn.last_insert_rowid(),
            fields: fields.clone(),
            created_ms: now_ms,
            updated_ms: now_ms,
        })
    }

    /// One page of a user's records of `kind`, newest first, and the total count.
    pub fn list_records(
        &self,
        kind: &str,
        user_id: i64,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<Record>, u64), StoreError> {
        let conn = self.conn();
        let total: i64 = conn.query_row(
            "SELECT COUNT(*) FROM records WHERE user_id = ?1 AND kind = ?2",
            params![user_id, kind],
            |r| r.get(0),
        )?;
        let mut stmt = conn.prepare(
            "SELECT id, fields, created_ms, updated_ms FROM records
             WHERE user_id = ?1 AND kind = ?2 ORDER BY id DESC LIMIT ?3 OFFSET ?4",
        )?;
        let rows = stmt
            .query_map(
                params![
                    user_id,
                    kind,
                    limit,
                    i64::try_from(offset).unwrap_or(i64::MAX)
                ],
                record_from_row,
            )?
            .collect::<Result<Vec<_>, _>>()?;
        Ok((rows, u64::try_from(total).unwrap_or(0)))
    }

    /// A user's record by id.
    pub fn get_record(
        &self,
        kind: &str,
        user_id: i64,
        id: i64,
    ) -> Result<Option<Record>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT id, fields, created_ms, updated_ms FROM records
                 WHERE user_id = ?1 AND kind = ?2 AND id = ?3",
                params![user_id, kind, id],
                record_from_row,
            )
            .optional()?)
    }

    /// Merges `changes` into a record's fields; `None` when there is no such record.
    pub fn update_record(
        &self,
        kind: &str,
        user_id: i64,
        id: i64,
        changes: &serde_json::Map<String, serde_json::Value>,
        now_ms: u64,
    ) -> Result<Option<Record>, StoreError> {
        let Some(mut rec) = self.get_record(kind, user_id, id)? else {
            return Ok(None);
        };
        for (k, v) in changes {
            rec.fields.insert(k.clone(), v.clone());
        }
        rec.updated_ms = now_ms;
        let text = serde_json::Value::Object(rec.fields.clone()).to_string();
        self.conn().execute(
            "UPDATE records SET fields = ?1, updated_ms = ?2 WHERE id = ?3 AND user_id = ?4",
            params![text, ms(now_ms), id, user_id],
        )?;
        Ok(Some(rec))
    }

    /// The decrypted hidden fields of a user's record (`None` when there is no such record
    /// or it has none). For server-side checks only; never answered.
    pub fn sealed_fields(
        &self,
        kind: &str,
        user_id: i64,
        id: i64,
    ) -> Result<Option<serde_json::Map<String, serde_json::Value>>, StoreError> {
        type Sealed = (Option<Vec<u8>>, Option<Vec<u8>>);
        let row: Option<Sealed> = self
            .conn()
            .query_row(
                "SELECT sealed_nonce, sealed FROM records WHERE user_id = ?1 AND kind = ?2 AND id = ?3",
                params![user_id, kind, id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((Some(nonce), Some(sealed))) = row else {
            return Ok(None);
        };
        if nonce.len() != 12 {
            return Err(StoreError::Crypto);
        }
        let aad = format!("{kind}:{user_id}");
        let plain = self
            .cipher
            .decrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &sealed,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| StoreError::Crypto)?;
        Ok(match serde_json::from_slice(&plain) {
            Ok(serde_json::Value::Object(m)) => Some(m),
            _ => None,
        })
    }

    /// Keeps only the newest `keep` records of `kind` for a user (bounded histories).
    pub fn trim_records(&self, kind: &str, user_id: i64, keep: u32) -> Result<usize, StoreError> {
        Ok(self.conn().execute(
            "DELETE FROM records WHERE user_id = ?1 AND kind = ?2 AND id <= (
                 SELECT id FROM records WHERE user_id = ?1 AND kind = ?2
                 ORDER BY id DESC LIMIT 1 OFFSET ?3)",
            params![user_id, kind, keep],
        )?)
    }

    /// Deletes a user's record; `false` when there was none.
    pub fn delete_record(&self, kind: &str, user_id: i64, id: i64) -> Result<bool, StoreError> {
        let n = self.conn().execute(
            "DELETE FROM records WHERE user_id = ?1 AND kind = ?2 AND id = ?3",
            params![user_id, kind, id],
        )?;
        Ok(n == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_secrets_and_nonces() {
        let s = Store::in_memory().unwrap();
        let k = s.create_key("alice", "Free", false, 1).unwrap();
        assert_eq!(k.key.len(), 32);
        assert_eq!(k.secret.len(), 64);
        let rec = s.lookup(&k.key).unwrap().unwrap();
        assert_eq!(rec.secret, k.secret.as_bytes());
        assert_eq!(rec.plan.name, "Free");
        assert_eq!(rec.plan.rate_minute, 60);
        assert!(s.lookup("nope").unwrap().is_none());
        let k2 = s.create_key("alice", "Free", true, 2).unwrap();
        let rec2 = s.lookup(&k2.key).unwrap().unwrap();
        assert_eq!(rec2.user_id, rec.user_id);
        assert!(rec2.strict);

        match s.create_key("bob", "Gold", false, 1) {
            Err(StoreError::UnknownPlan { known, .. }) => {
                assert_eq!(known, ["Free", "Pro", "Enterprise", "Unlimited"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn secrets_are_not_stored_in_clear_and_survive_reopen() {
        let dir = std::env::temp_dir().join(format!("trading-store-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let k = Store::open(&dir)
            .unwrap()
            .create_key("carol", "Free", false, 1)
            .unwrap();
        let raw = fs::read(dir.join("trading.sqlite")).unwrap();
        let wal = fs::read(dir.join("trading.sqlite-wal")).unwrap_or_default();
        let needle = k.secret.as_bytes();
        for file in [&raw, &wal] {
            assert!(
                !file.windows(needle.len()).any(|w| w == needle),
                "secret in clear"
            );
        }
        let again = Store::open(&dir).unwrap();
        assert_eq!(again.lookup(&k.key).unwrap().unwrap().secret, needle);
        // Another master key cannot read it.
        fs::write(dir.join("master.key"), [7u8; 32]).unwrap();
        assert!(matches!(
            Store::open(&dir).unwrap().lookup(&k.key),
            Err(StoreError::Crypto)
        ));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn records_are_per_user_and_kind() {
        let s = Store::in_memory().unwrap();
        s.create_key("a", "Free", false, 1).unwrap();
        s.create_key("b", "Free", false, 1).unwrap();
        let mut f = serde_json::Map::new();
        f.insert("code".into(), "binance-btcusdt".into());
        let r1 = s.insert_record("watch", 1, &f, None, 10).unwrap();
        let r2 = s.insert_record("watch", 1, &f, None, 11).unwrap();
        s.insert_record("other", 1, &f, None, 12).unwrap();
        s.insert_record("watch", 2, &f, None, 13).unwrap();
        let (rows, total) = s.list_records("watch", 1, 10, 0).unwrap();
        assert_eq!(total, 2);
        assert_eq!(
            rows.iter().map(|r| r.id).collect::<Vec<_>>(),
            [r2.id, r1.id]
        );
        let (rows, _) = s.list_records("watch", 1, 1, 1).unwrap();
        assert_eq!(rows[0].id, r1.id);
        assert!(
            s.get_record("watch", 2, r1.id).unwrap().is_none(),
            "other users cannot see it"
        );
        assert!(!s.delete_record("watch", 2, r1.id).unwrap());
        let mut change = serde_json::Map::new();
        change.insert("label".into(), "x".into());
        let up = s
            .update_record("watch", 1, r1.id, &change, 20)
            .unwrap()
            .unwrap();
        assert_eq!(up.fields["label"], "x");
        assert_eq!(up.fields["code"], "binance-btcusdt");
        assert!(s.delete_record("watch", 1, r1.id).unwrap());
        for t in 0..5 {
            s.insert_record("log", 1, &f, None, 100 + t).unwrap();
        }
        assert_eq!(s.trim_records("log", 1, 3).unwrap(), 2);
        assert_eq!(s.trim_records("log", 1, 3).unwrap(), 0);
        let (rows, total) = s.list_records("log", 1, 10, 0).unwrap();
        assert_eq!(total, 3);
        assert_eq!(rows.last().unwrap().created_ms, 102, "the oldest went");
        assert!(
            s.update_record("watch", 1, r1.id, &change, 21)
                .unwrap()
                .is_none()
        );
    }
}
