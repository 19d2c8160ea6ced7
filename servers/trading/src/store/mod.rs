//! The data-access layer: every SQL statement of the server is in this module's
//! repositories, each registering its own tables. Key secrets are encrypted at rest with
//! ChaCha20-Poly1305 under a master key kept in the data directory (`master.key`, mode
//! 0600), because HMAC verification needs the secret itself and a stolen database alone
//! must not reveal it.

use std::fs;
use std::path::Path;

use rusqlite::Connection;

mod account_settings;
mod accounts;
mod database;
mod marketplace;
mod nonces;
mod paper;
mod paper_balances;
mod paper_orders;
mod paper_strategies;
mod records;
mod sessions;

pub use accounts::{KeyRecord, NewKey, User};
pub use database::{Store, StoreError, unsigned};
pub(crate) use marketplace::{Iteration, Signal};
pub use paper::PaperDb;
pub use paper_balances::Request;
pub use paper_orders::{NewOrder, Order, Orders};
pub use paper_strategies::{Export, StoredTransaction, Strategies, StrategyRow};
pub use records::Record;
pub use sessions::{Referral, Session};
pub use trading_model::plans::Plan;

use database::{master_key, random};

/// Every repository's tables, in creation order (records refer to users).
const SCHEMAS: [&str; 6] = [
    accounts::SCHEMA,
    records::SCHEMA,
    nonces::SCHEMA,
    account_settings::SCHEMA,
    paper::SCHEMA,
    marketplace::SCHEMA,
];

impl Store {
    /// Opens (creating if needed) the store in `dir`.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        fs::create_dir_all(dir)?;
        let key = master_key(dir)?;
        let conn = Connection::open(dir.join("trading.sqlite"))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Store::init(conn, key, &SCHEMAS)
    }

    /// A throw-away store for tests and for running without `--data-dir`.
    pub fn in_memory() -> Result<Store, StoreError> {
        Store::init(Connection::open_in_memory()?, random::<32>()?, &SCHEMAS)
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
