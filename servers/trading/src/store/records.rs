//! The generic account records (watchlists, keywords, articles, tickets, sub-accounts,
//! ...): one table whose `fields` are a JSON object, with hidden fields sealed.

use chacha20poly1305::Nonce;
use chacha20poly1305::aead::{Aead, Payload};
use rusqlite::{OptionalExtension, params};

use super::database::{Store, StoreError, ms, random};

pub(super) const SCHEMA: &str = "
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

impl Store {
    /// Every record of `kind`, of every account, oldest first, with its owner: for the
    /// public views of what accounts publish (articles, news keywords).
    pub fn records_of_everyone(&self, kind: &str) -> Result<Vec<(i64, Record)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, fields, created_ms, updated_ms, user_id FROM records
             WHERE kind = ?1 ORDER BY id",
        )?;
        let rows = stmt
            .query_map([kind], |r| Ok((r.get(4)?, record_from_row(r)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
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
