//! The counter identities of a rule's keys for stores in this process: the parts
//! [`Rule::matched_key_stem_into`] and [`super::cache_key_stem_into`] join into text, hashed
//! instead (see [`crate::key_id`]).

use super::{Limit, Rule, eq_short};
use crate::key_id::{KeyId, KeyIdState};
use crate::types::Entry;

impl Rule {
    /// The fingerprint of the key [`Rule::matched_key_stem_into`] would write for `limit`
    /// (one of this rule's), for an in-process store (see [`crate::key_id`]). Starts
    /// from the head hashed at load when the request's first entry carries the rule's
    /// first key.
    #[inline(always)]
    pub(crate) fn matched_key_id(
        &self,
        limit: &Limit,
        (prefix, domain): (&str, &str),
        entries: &[Entry],
    ) -> KeyId {
        match (entries.split_first(), &limit.id_head) {
            (Some((first, rest)), Some(head))
                if !self.shares
                    && entries.len() == self.levels.len()
                    && eq_short(first.key.as_bytes(), self.head_key.as_bytes()) =>
            {
                let mut id = *head;
                id.bytes(first.value.as_bytes());
                for e in rest {
                    id.entry(&e.key, &e.value);
                }
                id.finish_key(prefix)
            }
            _ => self.key_id(limit, (prefix, domain), entries),
        }
    }

    /// [`Rule::matched_key_id`] from scratch, `share_threshold` patterns included.
    fn key_id(&self, limit: &Limit, (prefix, domain): (&str, &str), entries: &[Entry]) -> KeyId {
        if !self.shares {
            return key_id(limit, (prefix, domain), entries);
        }
        let n = self.levels.len().min(entries.len());
        let window = limit.algorithm.fixed_window_seconds();
        let mut id = KeyIdState::key_parts(limit.joint, window, n, domain, &limit.key_tag);
        for (lvl, e) in self.levels.iter().zip(entries) {
            id.entry(&e.key, lvl.shared_value.as_deref().unwrap_or(&e.value));
        }
        id.finish_key(prefix)
    }
}

/// The fingerprint of the key of `limit` for plain entries (a request override's): the
/// parts [`super::cache_key_stem_into`] joins, see [`crate::key_id`].
pub(crate) fn key_id(limit: &Limit, (prefix, domain): (&str, &str), entries: &[Entry]) -> KeyId {
    let window = limit.algorithm.fixed_window_seconds();
    let n = entries.len();
    let mut id = KeyIdState::key_parts(limit.joint, window, n, domain, &limit.key_tag);
    for e in entries {
        id.entry(&e.key, &e.value);
    }
    id.finish_key(prefix)
}
