//! Counter identities for stores that count in this process: a 122-bit keyed fingerprint
//! of a cache key's structured parts, which such a store uses in place of the key's text.
//!
//! A remote store needs upstream's key text, byte for byte. A store in this process only
//! needs to tell counters apart, and building, hashing and comparing that text was a
//! quarter of a single-descriptor decision (docs/benchmarks.md). So the limiter gives an
//! in-process store a [`KeyId`] instead, computed from the parts the text would be built
//! from (domain, the limit's tag, each entry's key and value as the key holds it, the
//! prefix), with a rule's fixed head hashed once at load.
//!
//! A fixed window's key text ends with its window's start, so that each window counts on
//! a key of its own. A fingerprint holds the window's length instead, which is fixed per
//! limit and so hashed at load: the memory store keeps each counter's window end with
//! it and starts the counter over once the window has ended, so one identity serves
//! every window of a limit in turn.
//!
//! **Why two keys never share a counter by accident.** The parts are written as a
//! sequence of words below p = 2^61 − 1 that determines them (a first word gives the
//! layout; every string carries its length and is cut into 7-byte words), and the
//! sequence is hashed twice as a polynomial evaluated at a secret random point (Horner's
//! rule, starting from 1, so that sequences of different lengths are different
//! polynomials). Two different sequences of at most L words agree in one lane for at
//! most L + 1 of the p points, so in both lanes with probability at most ((L + 1) / p)²,
//! whatever the keys are, as long as they were chosen without knowing the points. With
//! L = 150 (a 1 KiB key) that is below 2^-107 a pair; a million live counters are 2^39
//! pairs. The points come from std's `RandomState` (the OS's randomness, per process)
//! and are never shown: a client learns about them only through two of its keys sharing
//! a counter, which is the event bounded above.
//!
//! **Where this differs from upstream's text**, both times by keeping apart what
//! upstream's text joins by accident:
//! - Upstream joins the parts with `_`, so a domain, key or value holding `_` can give
//!   two descriptors one key (`a_b` + `c` and `a` + `b_c` both write `a_b_c_`), and
//!   Redis counts them together. Here they are different parts, counted apart.
//! - Two untagged fixed windows of different lengths on one descriptor (a request
//!   override of another unit than the rule's) write one key text whenever their
//!   windows start at the same second (a minute's and an hour's at each full hour).
//!   Here the lengths differ, so the counters do.

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// The field's modulus, a Mersenne prime: reducing a product takes a shift and an add.
const P: u64 = (1 << 61) - 1;

/// The first word of a fingerprint taken of a whole key's text ([`KeyId::of_text`]).
const TEXT: u64 = 1;
/// The first word of a fingerprint of a key's parts has this bit, and says how the rest
/// is laid out: [`JOINT`] and the number of entries from [`ENTRIES`] up.
/// Apart from [`TEXT`], so that no text's fingerprint is a parts' one by construction.
const PARTS: u64 = 1 << 1;
/// The key is joint (its text wrapped in braces).
const JOINT: u64 = 1 << 2;
/// The shift of the number of entries in the first word.
const ENTRIES: u32 = 4;
/// Strings shorter than this carry their length in their first word (below).
const SHORT: usize = 30;

/// The identity of a counter in an in-process store: two lanes of 62 bits. The default
/// (both lanes 0) is no fingerprint: it says "named by the key's text" (a fingerprint is
/// 0 in both lanes with probability about 2^-122).
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyId {
    lanes: [u64; 2],
}

/// Lane by lane, in general-purpose registers (see [`crate::Increment::counter_id`]).
impl PartialEq for KeyId {
    #[inline(always)]
    fn eq(&self, other: &KeyId) -> bool {
        (self.lanes[0] ^ other.lanes[0]) | (self.lanes[1] ^ other.lanes[1]) == 0
    }
}

impl Eq for KeyId {}

impl KeyId {
    /// Whether this is a fingerprint (not the default, "named by the key's text").
    #[inline(always)]
    pub fn is_set(&self) -> bool {
        self.lanes[0] | self.lanes[1] != 0
    }

    /// The fingerprint of a key given as text, for callers that name counters themselves
    /// (tests, direct users of a store). It never equals a fingerprint of parts.
    pub fn of_text(key: &str) -> KeyId {
        let mut h = KeyIdState::start(TEXT);
        h.bytes(key.as_bytes());
        h.finish()
    }

    /// A 64-bit hash for tables and shards, every bit depending on both lanes. The lanes
    /// themselves will not do: the last word of a key is added to them, not multiplied,
    /// so keys differing only in a short last value differ only in the lanes' low bits.
    #[inline(always)]
    pub fn table_hash(&self) -> u64 {
        // The full 128-bit product of the lanes, its halves folded; the constants keep
        // small lanes from making small products.
        let product = u128::from(self.lanes[0] ^ 0x9e37_79b9_7f4a_7c15)
            * u128::from(self.lanes[1] ^ 0xc2b2_ae3d_27d4_eb4f);
        (product as u64) ^ (product >> 64) as u64
    }

    /// The identity as 16 bytes, for stores that keep it in packed records.
    #[inline(always)]
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0; 16];
        b[..8].copy_from_slice(&self.lanes[0].to_le_bytes());
        b[8..].copy_from_slice(&self.lanes[1].to_le_bytes());
        b
    }

    /// The identity [`KeyId::to_bytes`] wrote.
    #[inline(always)]
    pub fn from_bytes(b: [u8; 16]) -> KeyId {
        let lane = |at: usize| {
            let mut w = [0; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(w)
        };
        KeyId {
            lanes: [lane(0), lane(8)],
        }
    }
}

/// The secret points of the two lanes, drawn once per process.
fn points() -> [u64; 2] {
    static POINTS: OnceLock<[u64; 2]> = OnceLock::new();
    *POINTS.get_or_init(|| {
        let seed = std::hash::RandomState::new();
        [1u64, 2].map(|lane| {
            let mut h = seed.build_hasher();
            h.write_u64(lane);
            // Nearly uniform in [1, p): 2^64 values folded onto 2^61.
            (h.finish() % (P - 1)) + 1
        })
    })
}

/// A fingerprint being computed: the two lanes' Horner sums so far (each below 2^62,
/// congruent modulo p to the polynomial's value so far) and the points they are
/// evaluated at.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyIdState {
    sums: [u64; 2],
    points: [u64; 2],
}

/// Shows nothing: the points are the process's secret.
impl std::fmt::Debug for KeyIdState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyIdState { .. }")
    }
}

impl KeyIdState {
    /// A fingerprint starting with the word `first`.
    fn start(first: u64) -> KeyIdState {
        let mut s = KeyIdState {
            sums: [1, 1],
            points: points(),
        };
        s.word(first);
        s
    }

    /// The start of a key's parts: its layout (joint, the number of entries that
    /// follow), the length of a fixed window in seconds (0 for the other algorithms),
    /// its domain and the limit's tag. That many [`KeyIdState::entry`] calls and
    /// [`KeyIdState::finish_key`] then end it.
    pub fn key_parts(
        joint: bool,
        window_seconds: u64,
        entries: usize,
        domain: &str,
        tag: &str,
    ) -> KeyIdState {
        // Requests hold far fewer entries than 2^40 (the servers bound them); the bound
        // only keeps the word in the field.
        let entries = (entries as u64).min(1 << 40);
        let layout = PARTS | if joint { JOINT } else { 0 } | entries << ENTRIES;
        let mut s = KeyIdState::start(layout);
        // Window lengths are far below p (a century is 2^32 seconds); the bound only
        // keeps the word in the field.
        s.word(window_seconds.min(P - 1));
        s.bytes(domain.as_bytes());
        s.bytes(tag.as_bytes());
        s
    }

    /// Mixes in one word below p.
    #[inline(always)]
    fn word(&mut self, w: u64) {
        debug_assert!(w < P);
        for (sum, point) in self.sums.iter_mut().zip(self.points) {
            *sum = mul_add(*sum, point, w);
        }
    }

    /// Mixes in a string, cut into 7-byte little-endian words. A string shorter than 30
    /// bytes (most) carries `length + 1` in bits 56-60 of its first word; a longer one
    /// is preceded by a word of `length + 1`, whose bits 56-60 are zero.
    #[inline(always)]
    pub fn bytes(&mut self, b: &[u8]) {
        if b.len() <= 7 {
            // The common case, one word, without the loop's set-up.
            self.word(load_le(b) | (b.len() as u64 + 1) << 56);
            return;
        }
        let mut length = 0;
        if b.len() < SHORT {
            length = (b.len() as u64 + 1) << 56;
        } else {
            self.word(b.len() as u64 + 1);
        }
        let mut words = b.chunks_exact(7);
        for w in &mut words {
            let mut le = [0; 8];
            le[..7].copy_from_slice(w);
            self.word(u64::from_le_bytes(le) | length);
            length = 0;
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            self.word(load_le(rest));
        }
    }

    /// Mixes in one entry: its key and its value as the cache key holds it.
    #[inline(always)]
    pub fn entry(&mut self, key: &str, value: &str) {
        self.bytes(key.as_bytes());
        self.bytes(value.as_bytes());
    }

    /// Mixes in the limiter's key prefix; the fingerprint.
    #[inline(always)]
    pub fn finish_key(mut self, prefix: &str) -> KeyId {
        if !prefix.is_empty() {
            self.bytes(prefix.as_bytes());
        }
        self.finish()
    }

    /// The sums as they are: below 2^62, congruent to the polynomial's value but not
    /// reduced to it. Equal words give equal sums bit for bit (every path runs the same
    /// steps), and sums that differ as residues differ as bits, so the bound above
    /// holds without the reduction.
    #[inline(always)]
    fn finish(self) -> KeyId {
        KeyId { lanes: self.sums }
    }
}

/// `sum × point + w` modulo p, for `sum` < 2^62, `point` < 2^61 and `w` < 2^61, left
/// below 2^62 (congruent, not fully reduced).
#[inline(always)]
fn mul_add(sum: u64, point: u64, w: u64) -> u64 {
    let product = u128::from(sum) * u128::from(point);
    // product < 2^123: its low 61 bits plus the rest (2^61 ≡ 1), plus w: below 2^63.
    let x = (product as u64 & P) + (product >> 61) as u64 + w;
    (x & P) + (x >> 61)
}

/// The bytes of `b` (at most 8) as a little-endian word, in a few fixed-size loads.
#[inline(always)]
fn load_le(b: &[u8]) -> u64 {
    let n = b.len();
    let at = |i: usize, len: usize| -> u64 {
        let mut w = [0; 8];
        w[..len].copy_from_slice(&b[i..i + len]);
        u64::from_le_bytes(w)
    };
    match n {
        0 => 0,
        // Overlapping halves: the bytes they share are equal, so or-ing is exact.
        1..=3 => {
            u64::from(b[0])
                | u64::from(b[n / 2]) << (8 * (n / 2))
                | u64::from(b[n - 1]) << (8 * (n - 1))
        }
        4..=7 => at(0, 4) | at(n - 4, 4) << (8 * (n - 4)),
        _ => at(0, 8),
    }
}

#[cfg(test)]
mod tests;
