//! Sessions, settings and referrals of an account: which keys were used when and from
//! where, revoking them, the account's own settings, its plan and custom limits, and the
//! accounts it referred.

use rusqlite::{OptionalExtension, params};
use serde_json::{Map, Value};

use super::database::{Store, StoreError, ms};

/// An API key as a session: when it was made and last used, and whether it was revoked.
#[derive(Debug, Clone)]
pub struct Session {
    /// Row id, the session's public id.
    pub id: i64,
    /// The key.
    pub key: String,
    /// The sub-account the key signs for, if any.
    pub subaccount_id: Option<i64>,
    /// Whether the key requires strict tokens.
    pub strict: bool,
    /// Creation time.
    pub created_ms: i64,
    /// Last admitted call.
    pub last_seen_ms: Option<i64>,
    /// Address of the last admitted call.
    pub last_address: Option<String>,
    /// When the key was revoked.
    pub revoked_ms: Option<i64>,
}

/// An account the caller referred.
#[derive(Debug, Clone)]
pub struct Referral {
    /// Its id.
    pub id: i64,
    /// Its name.
    pub name: String,
    /// Its plan's name.
    pub plan: String,
    /// Creation time.
    pub created_ms: i64,
}

impl Store {
    /// Records an admitted call of `key` (its session's last use).
    pub fn touch_session(&self, key: &str, now_ms: u64, address: &str) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO key_links (key, last_seen_ms, last_address) VALUES (?1, ?2, ?3)
             ON CONFLICT(key) DO UPDATE SET last_seen_ms = ?2, last_address = ?3",
            params![key, ms(now_ms), address],
        )?;
        Ok(())
    }

    /// Every key of `user_id`, newest first.
    pub fn sessions(&self, user_id: i64) -> Result<Vec<Session>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT k.rowid, k.key, l.subaccount_id, k.strict, k.created_ms, l.last_seen_ms,
                    l.last_address, l.revoked_ms
             FROM api_keys k LEFT JOIN key_links l ON l.key = k.key
             WHERE k.user_id = ?1 ORDER BY k.rowid DESC",
        )?;
        let rows = stmt
            .query_map([user_id], |r| {
                Ok(Session {
                    id: r.get(0)?,
                    key: r.get(1)?,
                    subaccount_id: r.get(2)?,
                    strict: r.get(3)?,
                    created_ms: r.get(4)?,
                    last_seen_ms: r.get(5)?,
                    last_address: r.get(6)?,
                    revoked_ms: r.get(7)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Revokes `keys` (a revoked key stays revoked); returns how many rows changed.
    pub fn revoke_keys(&self, keys: &[&str], now_ms: u64) -> Result<usize, StoreError> {
        let conn = self.conn();
        let mut n = 0;
        for k in keys {
            n += conn.execute(
                "INSERT INTO key_links (key, revoked_ms) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET revoked_ms = COALESCE(revoked_ms, ?2)",
                params![k, ms(now_ms)],
            )?;
        }
        Ok(n)
    }

    /// Revokes the keys of `user_id`'s sub-account `subaccount_id`.
    pub fn revoke_subaccount_keys(
        &self,
        user_id: i64,
        subaccount_id: Option<i64>,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE key_links SET revoked_ms = COALESCE(revoked_ms, ?1)
             WHERE subaccount_id = ?2
               AND key IN (SELECT key FROM api_keys WHERE user_id = ?3)",
            params![ms(now_ms), subaccount_id, user_id],
        )?;
        Ok(())
    }

    /// The account's own settings (`user/settings`), empty when never set.
    pub fn account_settings(&self, user_id: i64) -> Result<Map<String, Value>, StoreError> {
        let text: Option<String> = self
            .conn()
            .query_row(
                "SELECT fields FROM account_settings WHERE user_id = ?1",
                [user_id],
                |r| r.get(0),
            )
            .optional()?;
        Ok(match text.and_then(|t| serde_json::from_str(&t).ok()) {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        })
    }

    /// Replaces the account's own settings.
    pub fn save_account_settings(
        &self,
        user_id: i64,
        settings: &Map<String, Value>,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO account_settings (user_id, fields, updated_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT(user_id) DO UPDATE SET fields = ?2, updated_ms = ?3",
            params![
                user_id,
                Value::Object(settings.clone()).to_string(),
                ms(now_ms)
            ],
        )?;
        Ok(())
    }

    /// Moves the account to plan `plan_id`; its custom limits are dropped (the package's
    /// own replace them).
    pub fn change_plan(&self, user_id: i64, plan_id: &str) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.execute(
            "UPDATE users SET plan_id = ?1 WHERE id = ?2",
            params![plan_id, user_id],
        )?;
        tx.execute(
            "UPDATE account_extra SET custom = NULL WHERE user_id = ?1",
            [user_id],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Stores the account's custom plan limits (setting name to value).
    pub fn set_custom_settings(
        &self,
        user_id: i64,
        custom: &std::collections::BTreeMap<String, i64>,
    ) -> Result<(), StoreError> {
        let text = serde_json::to_string(custom).unwrap_or_default();
        self.conn().execute(
            "INSERT INTO account_extra (user_id, custom) VALUES (?1, ?2)
             ON CONFLICT(user_id) DO UPDATE SET custom = ?2",
            params![user_id, text],
        )?;
        Ok(())
    }

    /// The accounts `user_id` referred, newest first, one page, and how many in all.
    pub fn referrals(
        &self,
        user_id: i64,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<Referral>, u64), StoreError> {
        let conn = self.conn();
        let total: i64 = conn.query_row(
            "SELECT COUNT(*) FROM account_extra WHERE referred_by = ?1",
            [user_id],
            |r| r.get(0),
        )?;
        let mut stmt = conn.prepare(
            "SELECT u.id, u.name, p.name, u.created_ms FROM account_extra a
             JOIN users u ON u.id = a.user_id JOIN plans p ON p.id = u.plan_id
             WHERE a.referred_by = ?1 ORDER BY u.id DESC LIMIT ?2 OFFSET ?3",
        )?;
        let rows = stmt
            .query_map(params![user_id, limit, ms(offset)], |r| {
                Ok(Referral {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    plan: r.get(2)?,
                    created_ms: r.get(3)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok((rows, u64::try_from(total).unwrap_or(0)))
    }
}
