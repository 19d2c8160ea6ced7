//! The fixed-window counters of one shard. Each counter is a record (its value and its
//! identity, the 16 bytes of a `KeyId`) packed into a chunk of bytes, found through a
//! hash table of 32-bit record positions. All the records of a chunk end together: a
//! chunk only takes counters whose windows end at its `expires_at`, so the expiry is
//! kept once per chunk, and a chunk is freed whole once its windows have ended. A
//! counter costs 24 bytes, and about ten in the table.
//!
//! A record is `value: u64 LE` and the identity. Records never move and no chunk is
//! ever reallocated.

use hashbrown::HashTable;

/// Bits of a record position that give its offset in its chunk; the others give the
/// chunk's number.
const OFFSET_BITS: u32 = 12;
/// Bytes per chunk at most; a longer record gets a chunk of its own.
const CHUNK: usize = 1 << OFFSET_BITS;
/// Bytes of the first chunk of an expiry; each next one doubles, up to [`CHUNK`]. A
/// window length with few counters (or many window lengths) holds little memory idle.
const FIRST_CHUNK: usize = 256;
/// Chunks a shard can address (4 GiB of records).
const MAX_CHUNKS: usize = 1 << (32 - OFFSET_BITS);
/// The bytes of a counter's identity.
pub(super) type Id = [u8; 16];
/// Bytes of a record: the value, then the identity.
const RECORD: usize = 8 + 16;

#[derive(Debug, Default)]
struct Chunk {
    /// The Unix second at which the windows of every counter here have ended.
    expires_at: u64,
    /// Records; empty (without capacity) while the chunk is free.
    bytes: Vec<u8>,
}

/// One shard's fixed-window counters.
#[derive(Debug)]
pub(super) struct Counters {
    /// The positions of the records, by their key's hash.
    index: HashTable<u32>,
    chunks: Vec<Chunk>,
    /// Numbers of freed chunks, for reuse.
    free: Vec<u32>,
    /// The chunk that takes new counters for each expiry in use (one per window length
    /// that has counters: a handful).
    open: Vec<(u64, u32)>,
    /// The most chunks this table may hold ([`MAX_CHUNKS`]; fewer in tests).
    max_chunks: usize,
}

impl Default for Counters {
    fn default() -> Self {
        Counters::with_max_chunks(MAX_CHUNKS)
    }
}

impl Counters {
    pub(super) fn with_max_chunks(max_chunks: usize) -> Self {
        Counters {
            index: HashTable::new(),
            chunks: Vec::new(),
            free: Vec::new(),
            open: Vec::new(),
            max_chunks: max_chunks.min(MAX_CHUNKS),
        }
    }

    /// Number of counters held, dead ones not yet swept included.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// Adds `hits` to the live counter `id` (one whose window has not ended at `now`),
    /// or starts it at `hits` until `window_end()`, and answers its value. A counter
    /// there is no room for (the shard's chunks are all in use) answers `u64::MAX`,
    /// over every limit, as a saturated counter would. `rehash` is the hash of a stored
    /// identity, for the table's growth.
    #[inline(always)] // the body of the store's one common call
    pub(super) fn add(
        &mut self,
        hash: u64,
        id: &Id,
        hits: u64,
        now: u64,
        window_end: impl FnOnce() -> u64,
        rehash: impl Fn(&Id) -> u64,
    ) -> u64 {
        let Counters {
            index,
            chunks,
            free,
            open,
            max_chunks,
        } = self;
        let found = index.find_mut(hash, |&p| holds(chunks, p, id));
        if let Some(pos) = found {
            let chunk = &mut chunks[chunk_of(*pos)];
            if chunk.expires_at > now {
                let rec = &mut chunk.bytes[offset_of(*pos)..];
                let value = read_u64(rec, 0).saturating_add(hits);
                write_u64(rec, 0, value);
                return value;
            }
            // The key's window has ended: it starts over among the counters of its new one.
            return match append(chunks, free, open, *max_chunks, id, hits, window_end()) {
                Some(p) => {
                    *pos = p;
                    hits
                }
                None => u64::MAX,
            };
        }
        match append(chunks, free, open, *max_chunks, id, hits, window_end()) {
            Some(p) => {
                index.insert_unique(hash, p, |&q| rehash(&id_at(chunks, q)));
                hits
            }
            None => u64::MAX,
        }
    }

    /// The live value of the counter `id` at `now`.
    pub(super) fn value(&self, hash: u64, id: &Id, now: u64) -> Option<u64> {
        let chunks = &self.chunks;
        let pos = *self.index.find(hash, |&p| holds(chunks, p, id))?;
        let chunk = &chunks[chunk_of(pos)];
        (chunk.expires_at > now).then(|| read_u64(&chunk.bytes[offset_of(pos)..], 0))
    }

    /// Takes `hits` back from the live counter `id`, never below zero.
    pub(super) fn refund(&mut self, hash: u64, id: &Id, hits: u64, now: u64) {
        let chunks = &mut self.chunks;
        let found = self.index.find(hash, |&p| holds(chunks, p, id));
        if let Some(&pos) = found {
            let chunk = &mut chunks[chunk_of(pos)];
            if chunk.expires_at > now {
                let rec = &mut chunk.bytes[offset_of(pos)..];
                write_u64(rec, 0, read_u64(rec, 0).saturating_sub(hits));
            }
        }
    }

    /// Drops the counters whose window has ended at `now` and frees their chunks.
    pub(super) fn sweep(&mut self, now: u64) {
        let chunks = &self.chunks;
        self.index.retain(|p| chunks[chunk_of(*p)].expires_at > now);
        for (i, c) in self.chunks.iter_mut().enumerate() {
            if c.expires_at <= now && c.bytes.capacity() > 0 {
                c.bytes = Vec::new();
                self.free.push(i as u32);
            }
        }
        self.open.retain(|(expires_at, _)| *expires_at > now);
        if self.index.is_empty() {
            self.chunks = Vec::new();
            self.free = Vec::new();
            self.open.clear();
        }
    }
}

/// Writes a record for `id` into the open chunk of `expires_at` (a new chunk when it
/// has no room) and answers its position; `None` when every chunk is in use.
#[cold]
fn append(
    chunks: &mut Vec<Chunk>,
    free: &mut Vec<u32>,
    open: &mut Vec<(u64, u32)>,
    max_chunks: usize,
    id: &Id,
    value: u64,
    expires_at: u64,
) -> Option<u32> {
    let slot = open.iter().position(|(e, _)| *e == expires_at);
    let room = slot.map(|i| open[i].1).filter(|&n| {
        let b = &chunks[n as usize].bytes;
        b.capacity() - b.len() >= RECORD
    });
    let number = match room {
        Some(n) => n,
        None => {
            let capacity = slot.map_or(FIRST_CHUNK, |i| {
                (chunks[open[i].1 as usize].bytes.capacity() * 2).clamp(FIRST_CHUNK, CHUNK)
            });
            let n = new_chunk(chunks, free, max_chunks, expires_at, capacity)?;
            match slot {
                Some(i) => open[i].1 = n,
                None => open.push((expires_at, n)),
            }
            n
        }
    };
    let bytes = &mut chunks[number as usize].bytes;
    let pos = (number << OFFSET_BITS) | bytes.len() as u32;
    bytes.extend_from_slice(&value.to_le_bytes());
    bytes.extend_from_slice(id);
    Some(pos)
}

/// A free chunk (or a new one) of `capacity` bytes for counters ending at `expires_at`.
fn new_chunk(
    chunks: &mut Vec<Chunk>,
    free: &mut Vec<u32>,
    max_chunks: usize,
    expires_at: u64,
    capacity: usize,
) -> Option<u32> {
    let chunk = Chunk {
        expires_at,
        bytes: Vec::with_capacity(capacity),
    };
    if let Some(n) = free.pop() {
        chunks[n as usize] = chunk;
        return Some(n);
    }
    if chunks.len() >= max_chunks {
        return None;
    }
    chunks.push(chunk);
    Some((chunks.len() - 1) as u32)
}

#[inline(always)]
fn chunk_of(pos: u32) -> usize {
    (pos >> OFFSET_BITS) as usize
}

#[inline(always)]
fn offset_of(pos: u32) -> usize {
    (pos & ((1 << OFFSET_BITS) - 1)) as usize
}

/// The identity in the record at `pos`.
#[inline(always)]
fn id_at(chunks: &[Chunk], pos: u32) -> Id {
    let mut id = [0; 16];
    id.copy_from_slice(&chunks[chunk_of(pos)].bytes[offset_of(pos) + 8..][..16]);
    id
}

/// Whether the record at `pos` is that of `id`: two eight-byte compares.
#[inline(always)]
fn holds(chunks: &[Chunk], pos: u32, id: &Id) -> bool {
    let rec = &chunks[chunk_of(pos)].bytes[offset_of(pos)..];
    read_u64(rec, 8) == read_u64(id, 0) && read_u64(rec, 16) == read_u64(id, 8)
}

#[inline(always)]
fn read_u64(rec: &[u8], at: usize) -> u64 {
    let mut b = [0; 8];
    b.copy_from_slice(&rec[at..at + 8]);
    u64::from_le_bytes(b)
}

#[inline(always)]
fn write_u64(rec: &mut [u8], at: usize, v: u64) {
    rec[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimit_core::KeyId;

    /// Every counter in one bucket chain: only the stored identities tell them apart.
    fn collide(_: &Id) -> u64 {
        7
    }

    fn id(key: &str) -> Id {
        KeyId::of_text(key).to_bytes()
    }

    fn hash(id: &Id) -> u64 {
        KeyId::from_bytes(*id).table_hash()
    }

    fn add(c: &mut Counters, key: &str, hits: u64, now: u64, end: u64) -> u64 {
        c.add(7, &id(key), hits, now, || end, collide)
    }

    fn value(c: &Counters, key: &str, now: u64) -> Option<u64> {
        c.value(7, &id(key), now)
    }

    #[test]
    fn counters_sharing_a_hash_keep_their_own_counts() {
        let mut c = Counters::default();
        assert_eq!(add(&mut c, "a_1", 1, 0, 60), 1);
        assert_eq!(add(&mut c, "a_2", 5, 0, 60), 5);
        assert_eq!(add(&mut c, "a_1", 1, 0, 60), 2);
        assert_eq!(value(&c, "a_2", 0), Some(5));
        assert_eq!(value(&c, "a_3", 0), None);
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn identities_differing_in_any_one_byte_are_apart() {
        let mut c = Counters::default();
        let base = [b'k'; 16];
        assert_eq!(c.add(7, &base, 1, 0, || 60, collide), 1);
        for at in 0..16 {
            let mut other = base;
            other[at] = b'x';
            assert_eq!(c.add(7, &other, 2, 0, || 60, collide), 2, "at {at}");
        }
        assert_eq!(c.add(7, &base, 1, 0, || 60, collide), 2);
    }

    #[test]
    fn counts_saturate_and_restart_with_their_window() {
        let mut c = Counters::default();
        assert_eq!(add(&mut c, "k", u64::MAX - 1, 0, 60), u64::MAX - 1);
        assert_eq!(add(&mut c, "k", 5, 59, 60), u64::MAX);
        c.refund(7, &id("k"), 10, 59);
        assert_eq!(value(&c, "k", 59), Some(u64::MAX - 10));
        // At the window's end the counter is dead: a new count starts, until the new
        // end, even before a sweep has dropped the old one.
        assert_eq!(value(&c, "k", 60), None);
        assert_eq!(add(&mut c, "k", 3, 60, 120), 3);
        assert_eq!(value(&c, "k", 119), Some(3));
        c.refund(7, &id("k"), 10, 119);
        assert_eq!(value(&c, "k", 119), Some(0));
        c.sweep(60);
        assert_eq!((c.len(), value(&c, "k", 60)), (1, Some(0)));
    }

    #[test]
    fn sweeps_free_the_chunks_of_ended_windows_and_keep_the_others() {
        let mut c = Counters::default();
        for i in 0..20_000u64 {
            let k = id(&format!("key_{i}"));
            // Every fourth counter is in a window ending at 100, the others at 10.
            let end = if i % 4 == 0 { 100 } else { 10 };
            c.add(hash(&k), &k, i, 0, || end, hash);
        }
        let chunks = c.chunks.len();
        let lasting = c.chunks.iter().filter(|c| c.expires_at == 100).count();
        assert!(lasting > 0 && lasting < chunks);
        c.sweep(10);
        assert_eq!(c.len(), 5_000);
        let in_use = c.chunks.iter().filter(|c| c.bytes.capacity() > 0).count();
        assert_eq!(
            in_use, lasting,
            "the chunks of the counters ending at 10 are freed"
        );
        assert_eq!(c.free.len(), chunks - lasting);
        for i in 0..20_000u64 {
            let k = id(&format!("key_{i}"));
            let want = (i % 4 == 0).then_some(i);
            assert_eq!(c.value(hash(&k), &k, 10), want);
        }
        // Freed chunks take new counters; the old ones are still found.
        for i in 0..10_000u64 {
            let k = id(&format!("new_{i}"));
            assert_eq!(c.add(hash(&k), &k, 1, 10, || 20, hash), 1);
        }
        assert_eq!(
            c.chunks.len(),
            chunks,
            "no chunk added while freed ones were left"
        );
        let again = |c: &mut Counters, key: &str, end: u64| {
            let k = id(key);
            c.add(hash(&k), &k, 1, 10, || end, hash)
        };
        assert_eq!(again(&mut c, "key_0", 100), 1);
        assert_eq!(again(&mut c, "key_4", 100), 5);
        assert_eq!(again(&mut c, "key_1", 20), 1);
        c.sweep(100);
        assert_eq!(c.len(), 0);
        assert!(c.chunks.is_empty());
    }

    #[test]
    fn an_expirys_chunks_start_small_and_double() {
        let mut c = Counters::default();
        // One counter in each of 100 windows: 100 chunks of the first size.
        for i in 0..100 {
            assert_eq!(add(&mut c, &format!("k{i}"), 1, 0, 10 + i), 1);
        }
        let held: usize = c.chunks.iter().map(|c| c.bytes.capacity()).sum();
        assert_eq!(held, 100 * FIRST_CHUNK);
        // Many in one window: each chunk doubles the one before, up to CHUNK.
        let mut c = Counters::default();
        for i in 0..2_000 {
            add(&mut c, &format!("key_{i}"), 1, 0, 10);
        }
        let sizes: Vec<usize> = c.chunks.iter().map(|c| c.bytes.capacity()).collect();
        assert_eq!(sizes[..5], [256, 512, 1024, 2048, 4096]);
        assert!(sizes[5..].iter().all(|s| *s == CHUNK));
    }

    #[test]
    fn a_full_table_answers_saturated_until_windows_end() {
        let mut c = Counters::with_max_chunks(1);
        let key = |i: usize| format!("k{i}");
        // The one chunk, of the first size, holds this many records.
        let fit = FIRST_CHUNK / RECORD;
        for i in 0..fit {
            assert_eq!(add(&mut c, &key(i), 1, 0, 10), 1);
        }
        assert_eq!(add(&mut c, &key(fit), 1, 0, 10), u64::MAX);
        assert_eq!(add(&mut c, "other window", 1, 0, 60), u64::MAX);
        assert_eq!(value(&c, "other window", 0), None);
        // Existing counters still count.
        assert_eq!(add(&mut c, &key(0), 1, 0, 10), 2);
        // Once their window has ended, the chunk takes new counters.
        c.sweep(10);
        assert_eq!(c.len(), 0);
        assert_eq!(add(&mut c, "other window", 1, 10, 60), 1);
        assert_eq!(value(&c, "other window", 10), Some(1));
    }
}
