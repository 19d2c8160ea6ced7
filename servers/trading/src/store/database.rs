//! The database underneath every repository: one SQLite connection behind a mutex, the
//! cipher that seals secrets at rest, and the master key file. Repositories add their
//! methods to [`Store`] in their own files and never hand the connection out.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Mutex;

use chacha20poly1305::aead::KeyInit;
use chacha20poly1305::{ChaCha20Poly1305, Key};
use rusqlite::Connection;

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

/// The store. One connection behind a mutex: requests hold it for single short statements.
pub struct Store {
    conn: Mutex<Connection>,
    /// Seals secrets at rest (key secrets, hidden record fields).
    pub(super) cipher: ChaCha20Poly1305,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

pub(super) fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(super) fn random<const N: usize>() -> Result<[u8; N], StoreError> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| StoreError::Random(e.to_string()))?;
    Ok(b)
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn master_key(dir: &Path) -> Result<[u8; 32], StoreError> {
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
    /// A store over `conn` with its secrets sealed under `key`, after running every
    /// repository's schema (in order: later tables may reference earlier ones).
    pub(super) fn init(
        conn: Connection,
        key: [u8; 32],
        schemas: &[&str],
    ) -> Result<Store, StoreError> {
        conn.pragma_update(None, "foreign_keys", "ON")?;
        for schema in schemas {
            conn.execute_batch(schema)?;
        }
        Ok(Store {
            conn: Mutex::new(conn),
            cipher: ChaCha20Poly1305::new(Key::from_slice(&key)),
        })
    }

    /// The connection, for the repositories' statements (never handed out of the store).
    pub(super) fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite half-written (statements are
        // atomic), so a poisoned lock is safe to reuse.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A stored time or count read back as unsigned (negative values, which the store never
/// writes, read as 0).
pub fn unsigned(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}
