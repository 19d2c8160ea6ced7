//! The name maps of the rule tree: a level's children and the configured domains.

use hashbrown::HashMap;

/// Names to values, for the few names of one tree level or the domains of a config.
/// Up to [`NameMap::SCAN`] names are compared one by one, which beats hashing the name
/// for the handful most levels have; above that an index is hashed.
#[derive(Debug)]
pub(super) struct NameMap<V> {
    entries: Vec<(Box<str>, V)>,
    index: Option<HashMap<Box<str>, usize>>,
}

impl<V> Default for NameMap<V> {
    fn default() -> Self {
        NameMap {
            entries: Vec::new(),
            index: None,
        }
    }
}

impl<V> NameMap<V> {
    const SCAN: usize = 8;

    fn position(&self, name: &str) -> Option<usize> {
        match &self.index {
            None => self.entries.iter().position(|(n, _)| **n == *name),
            Some(ix) => ix.get(name).copied(),
        }
    }

    #[inline(always)] // a handful of compares on every request: a call would cost as much
    pub(super) fn get(&self, name: &str) -> Option<&V> {
        if let Some(ix) = &self.index {
            return ix.get(name).map(|&i| &self.entries[i].1);
        }
        for (n, v) in &self.entries {
            if eq_short(n.as_bytes(), name.as_bytes()) {
                return Some(v);
            }
        }
        None
    }

    #[inline(always)] // on the matching path too (`Children::bare_key_only`)
    pub(super) fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| &**n)
    }

    /// Adds a name that is not there yet (callers check for duplicates first).
    pub(super) fn insert(&mut self, name: Box<str>, value: V) {
        let i = self.entries.len();
        if let Some(ix) = &mut self.index {
            ix.insert(name.clone(), i);
        } else if i == Self::SCAN {
            let mut ix: HashMap<Box<str>, usize> = self
                .entries
                .iter()
                .enumerate()
                .map(|(j, (n, _))| (n.clone(), j))
                .collect();
            ix.insert(name.clone(), i);
            self.index = Some(ix);
        }
        self.entries.push((name, value));
    }

    pub(super) fn get_or_insert_default(&mut self, name: &str) -> &mut V
    where
        V: Default,
    {
        let i = match self.position(name) {
            Some(i) => i,
            None => {
                self.insert(name.into(), V::default());
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }
}

/// `a == b` for the short names of rules and domains, compared in at most two
/// overlapping loads per side where a `memcmp` call would cost several times that.
#[inline(always)]
pub(super) fn eq_short(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0 => true,
        // Bytes 0, n / 2 and n - 1 are all the bytes of a name this short.
        1..4 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..8 => word32(a, 0) == word32(b, 0) && word32(a, n - 4) == word32(b, n - 4),
        8..=16 => word64(a, 0) == word64(b, 0) && word64(a, n - 8) == word64(b, n - 8),
        _ => a == b,
    }
}

#[inline(always)]
fn word32(s: &[u8], at: usize) -> u32 {
    let mut w = [0; 4];
    w.copy_from_slice(&s[at..at + 4]);
    u32::from_ne_bytes(w)
}

#[inline(always)]
fn word64(s: &[u8], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&s[at..at + 8]);
    u64::from_ne_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::eq_short;

    #[test]
    fn names_differing_in_any_one_byte_or_in_length_differ() {
        for len in 0..=40 {
            let a = vec![b'n'; len];
            assert!(eq_short(&a, &a.clone()), "{len} bytes");
            assert!(!eq_short(&a, &vec![b'n'; len + 1]), "{len} bytes");
            for at in 0..len {
                let mut b = a.clone();
                b[at] = b'x';
                assert!(!eq_short(&a, &b), "{len} bytes, at {at}");
            }
        }
    }
}
