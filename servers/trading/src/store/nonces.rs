//! Each key's replay memory (`trading_model::replay`): the newest nonce it accepted, the
//! floor below which it refuses nonces, and the nonces it accepted above the floor.
//!
//! Versions before issue #29 kept one strictly growing nonce per key in
//! `api_keys.last_nonce` (zero-padded to 20 digits); a data directory of theirs still has
//! it, and it counts as a floor, so a token signed before the upgrade stays a replay.

use rusqlite::{OptionalExtension, params};
use trading_model::auth::AuthError;
use trading_model::replay::{self, Memory, Nonce};

use super::database::{Store, StoreError};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS nonce_memory (
    key TEXT PRIMARY KEY REFERENCES api_keys(key),
    newest_ns INTEGER NOT NULL,
    floor_ns INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS nonces_seen (
    key TEXT NOT NULL,
    -- The nonce as sent, in decimal (it may exceed i64); its identity.
    nonce TEXT NOT NULL,
    at_ns INTEGER NOT NULL,
    PRIMARY KEY (key, nonce)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS nonces_seen_age ON nonces_seen (key, at_ns);
";

fn to_sql(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

fn from_sql(ns: i64) -> u64 {
    u64::try_from(ns).unwrap_or(0)
}

impl Store {
    /// Accepts `nonce` for `key` if the replay rules allow it, and remembers it; the
    /// decision and the update are one transaction, so concurrent calls of one key each
    /// see the others' nonces. The inner error is the refusal (2011 or 2014).
    pub fn accept_nonce(
        &self,
        key: &str,
        nonce: &Nonce,
        now_ms: u64,
    ) -> Result<Result<(), AuthError>, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let legacy: Option<String> = tx
            .query_row(
                "SELECT last_nonce FROM api_keys WHERE key = ?1",
                [key],
                |r| r.get(0),
            )
            .optional()?
            .flatten();
        let legacy_floor = legacy
            .and_then(|text| text.parse::<u128>().ok())
            .and_then(|v| Nonce::new(v).ok())
            .map_or(0, |n| n.at_ns());
        let stored: Option<(i64, i64)> = tx
            .query_row(
                "SELECT newest_ns, floor_ns FROM nonce_memory WHERE key = ?1",
                [key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let memory = Memory {
            newest_ns: stored.map(|(newest, _)| from_sql(newest)),
            floor_ns: stored
                .map_or(0, |(_, floor)| from_sql(floor))
                .max(legacy_floor),
        };
        let value = nonce.value().to_string();
        let seen = tx
            .query_row(
                "SELECT 1 FROM nonces_seen WHERE key = ?1 AND nonce = ?2",
                params![key, value],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        let accepted = match replay::judge(nonce, &memory, seen, now_ms) {
            Ok(a) => a.memory,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let newest = to_sql(accepted.newest_ns.unwrap_or(nonce.at_ns()));
        let floor = to_sql(accepted.floor_ns);
        tx.execute(
            "INSERT INTO nonces_seen (key, nonce, at_ns) VALUES (?1, ?2, ?3)",
            params![key, value, to_sql(nonce.at_ns())],
        )?;
        tx.execute(
            "INSERT INTO nonce_memory (key, newest_ns, floor_ns) VALUES (?1, ?2, ?3)
             ON CONFLICT (key) DO UPDATE SET newest_ns = ?2, floor_ns = ?3",
            params![key, newest, floor],
        )?;
        // Below the floor every nonce is refused anyway: no need to remember them.
        tx.execute(
            "DELETE FROM nonces_seen WHERE key = ?1 AND at_ns <= ?2",
            params![key, floor],
        )?;
        tx.commit()?;
        Ok(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_MS: u64 = 1_592_207_324_028;

    fn at(ms: u64, extra: u128) -> Nonce {
        Nonce::new(u128::from(ms) * 10_000 + extra).unwrap()
    }

    #[test]
    fn each_nonce_once_per_key_in_any_order() {
        let s = Store::in_memory().unwrap();
        let k = s.create_key("alice", "Free", false, 1).unwrap();
        let k2 = s.create_key("bob", "Free", false, 1).unwrap();
        assert_eq!(
            s.accept_nonce(&k.key, &at(NOW_MS, 5), NOW_MS).unwrap(),
            Ok(())
        );
        assert_eq!(
            s.accept_nonce(&k.key, &at(NOW_MS, 5), NOW_MS).unwrap(),
            Err(AuthError::NonceReused)
        );
        // Older, inside the window: another caller's request that arrived late.
        assert_eq!(
            s.accept_nonce(&k.key, &at(NOW_MS, 1), NOW_MS).unwrap(),
            Ok(())
        );
        // Go's 18 digits, then Node's 17 again.
        let go = Nonce::new(u128::from(NOW_MS) * 100_000 + 7).unwrap();
        assert_eq!(s.accept_nonce(&k.key, &go, NOW_MS).unwrap(), Ok(()));
        assert_eq!(
            s.accept_nonce(&k.key, &at(NOW_MS, 9), NOW_MS).unwrap(),
            Ok(())
        );
        // Older than the window.
        assert_eq!(
            s.accept_nonce(&k.key, &at(NOW_MS - 61_000, 0), NOW_MS)
                .unwrap(),
            Err(AuthError::NonceTooSmall)
        );
        // Memory is per key.
        assert_eq!(
            s.accept_nonce(&k2.key, &at(NOW_MS, 5), NOW_MS).unwrap(),
            Ok(())
        );
    }

    #[test]
    fn old_nonces_are_forgotten_behind_the_floor() {
        let s = Store::in_memory().unwrap();
        let k = s.create_key("alice", "Free", false, 1).unwrap();
        for i in 0..5 {
            let now = NOW_MS + i * 30_000;
            assert_eq!(s.accept_nonce(&k.key, &at(now, 0), now).unwrap(), Ok(()));
        }
        let kept: i64 = s
            .conn()
            .query_row("SELECT COUNT(*) FROM nonces_seen", [], |r| r.get(0))
            .unwrap();
        assert_eq!(kept, 2, "only the nonces inside the last minute are kept");
        let later = NOW_MS + 4 * 30_000;
        assert_eq!(
            s.accept_nonce(&k.key, &at(NOW_MS, 0), later).unwrap(),
            Err(AuthError::NonceTooSmall)
        );
    }

    #[test]
    fn the_last_nonce_of_an_older_version_is_a_floor() {
        let s = Store::in_memory().unwrap();
        let k = s.create_key("alice", "Free", false, 1).unwrap();
        let last = u128::from(NOW_MS) * 10_000;
        s.conn()
            .execute(
                "UPDATE api_keys SET last_nonce = ?1 WHERE key = ?2",
                params![format!("{last:020}"), k.key],
            )
            .unwrap();
        assert_eq!(
            s.accept_nonce(&k.key, &Nonce::new(last).unwrap(), NOW_MS)
                .unwrap(),
            Err(AuthError::NonceTooSmall)
        );
        assert_eq!(
            s.accept_nonce(&k.key, &at(NOW_MS, 1), NOW_MS).unwrap(),
            Ok(())
        );
    }
}
