//! The replay defence: which nonces a key still accepts.
//!
//! The SDKs make nonces from their clock at different resolutions: Node, Python and PHP
//! send 17 digits (units of 100 ns), Go sends the first 18 digits of the Unix time in
//! nanoseconds (units of 10 ns); 19 and 20 digits are read as 1 ns and 0.1 ns. A nonce is
//! therefore compared as the instant it names, whatever its digit count, so one Go call
//! does not put a key out of reach of the 17-digit SDKs.
//!
//! Instead of one strictly growing value per key, a key remembers every nonce it accepted
//! within a window ([`WINDOW_MS`]) below its newest: several callers sharing a key may
//! arrive out of order, and each nonce is accepted once. The rules, in order:
//!
//! 1. more than [`MAX_AHEAD_MS`](crate::auth::MAX_AHEAD_MS) ahead of the server clock: 2014;
//! 2. used before (by anyone, with this key): 2011, a replay. Two requests with the same
//!    nonce carry the same token, so the second is a replay whoever sent it, and that
//!    includes two calls of one Node client in the same millisecond;
//! 3. at or below the key's floor: 2011. The floor is the window's start: the older of
//!    the key's newest nonce and the server clock, less the window. Nonces below it are
//!    no longer remembered one by one, so they are refused as a whole. Taking the older
//!    of the two keeps a client whose clock runs fast from pushing the floor past its
//!    neighbours, and keeps a sandbox clock moved forward from refusing the SDKs' clocks.
//!
//! Everything here is pure; the server keeps the memory (newest, floor and the nonces
//! above the floor) per key.

use crate::auth::{AuthError, MAX_AHEAD_MS};

/// How far below a key's newest nonce (or the server clock, if older) nonces are still
/// accepted once each.
pub const WINDOW_MS: u64 = 60_000;

const NS_PER_MS: u64 = 1_000_000;

/// A nonce and the instant it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nonce {
    value: u128,
    at_ns: u64,
}

impl Nonce {
    /// Reads a nonce of 17 to 20 digits as a time.
    ///
    /// ```
    /// use trading_model::replay::Nonce;
    /// let node = Nonce::new(15_922_073_240_280_000).unwrap(); // 17 digits: 100 ns units
    /// let go = Nonce::new(159_220_732_402_800_000).unwrap(); // 18 digits: 10 ns units
    /// assert_eq!(node.at_ns(), go.at_ns());
    /// assert_ne!(node, go);
    /// assert!(Nonce::new(1_234).is_err());
    /// ```
    pub fn new(value: u128) -> Result<Nonce, AuthError> {
        let digits = value.checked_ilog10().map_or(1, |l| l + 1);
        let at_ns = match digits {
            17 => value * 100,
            18 => value * 10,
            19 => value,
            20 => value / 10,
            _ => return Err(AuthError::NonceFormat),
        };
        // 20 digits reach past what u64 nanoseconds hold (the year 2554); such a nonce is
        // far ahead of any clock and refused as too big anyway.
        Ok(Nonce {
            value,
            at_ns: u64::try_from(at_ns).unwrap_or(u64::MAX),
        })
    }

    /// The nonce as sent; its identity (two nonces are the same token only if equal).
    pub fn value(&self) -> u128 {
        self.value
    }

    /// The instant it names, in nanoseconds since the Unix epoch.
    pub fn at_ns(&self) -> u64 {
        self.at_ns
    }
}

/// What a key remembers of the nonces it accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// The newest accepted nonce's instant, if any.
    pub newest_ns: Option<u64>,
    /// Nonces at or below this instant are refused without looking them up.
    pub floor_ns: u64,
}

/// What accepting a nonce changes: the key's new memory. Nonces the key remembered at or
/// below `floor_ns` may be forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// The memory after this nonce.
    pub memory: Memory,
}

/// Judges `nonce` for a key with `memory`; `seen` says whether the key accepted this
/// very nonce before (the caller looks it up among the ones it remembers).
///
/// ```
/// use trading_model::replay::{judge, Memory, Nonce};
/// use trading_model::auth::AuthError;
/// let now_ms = 1_592_207_324_028;
/// let n = |v| Nonce::new(v).unwrap();
/// let first = judge(&n(15_922_073_240_280_000), &Memory::default(), false, now_ms).unwrap();
/// // An older nonce of another caller, inside the window: accepted once.
/// let older = n(15_922_073_230_000_000);
/// assert!(judge(&older, &first.memory, false, now_ms).is_ok());
/// assert_eq!(judge(&older, &first.memory, true, now_ms), Err(AuthError::NonceReused));
/// // Older than the window: refused.
/// let stale = n(15_922_072_000_000_000);
/// assert_eq!(judge(&stale, &first.memory, false, now_ms), Err(AuthError::NonceTooSmall));
/// ```
pub fn judge(
    nonce: &Nonce,
    memory: &Memory,
    seen: bool,
    now_ms: u64,
) -> Result<Accepted, AuthError> {
    let now_ns = now_ms.saturating_mul(NS_PER_MS);
    if nonce.at_ns > now_ns.saturating_add(MAX_AHEAD_MS * NS_PER_MS) {
        return Err(AuthError::NonceTooBig(nonce.value));
    }
    if seen {
        return Err(AuthError::NonceReused);
    }
    let window_floor = memory
        .newest_ns
        .map_or(0, |newest| newest.min(now_ns))
        .saturating_sub(WINDOW_MS * NS_PER_MS);
    if nonce.at_ns <= memory.floor_ns.max(window_floor) {
        return Err(AuthError::NonceTooSmall);
    }
    let newest_ns = memory.newest_ns.map_or(nonce.at_ns, |n| n.max(nonce.at_ns));
    let floor_ns = newest_ns
        .min(now_ns)
        .saturating_sub(WINDOW_MS * NS_PER_MS)
        .max(memory.floor_ns);
    Ok(Accepted {
        memory: Memory {
            newest_ns: Some(newest_ns),
            floor_ns,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW_MS: u64 = 1_592_207_324_028;

    fn node(ms: u64) -> Nonce {
        Nonce::new(u128::from(ms) * 10_000).unwrap()
    }

    fn go(ns: u64) -> Nonce {
        Nonce::new(u128::from(ns / 10)).unwrap()
    }

    #[test]
    fn digit_counts_name_the_same_time() {
        let at = NOW_MS * NS_PER_MS;
        for (value, digits) in [
            (u128::from(at / 100), 17),
            (u128::from(at / 10), 18),
            (u128::from(at), 19),
            (u128::from(at) * 10, 20),
        ] {
            assert_eq!(value.to_string().len(), digits);
            assert_eq!(Nonce::new(value).unwrap().at_ns(), at);
        }
        assert_eq!(Nonce::new(10u128.pow(15)), Err(AuthError::NonceFormat));
        assert_eq!(Nonce::new(10u128.pow(20)), Err(AuthError::NonceFormat));
    }

    #[test]
    fn a_go_call_does_not_lock_out_the_others() {
        let after_go = judge(&go(NOW_MS * NS_PER_MS), &Memory::default(), false, NOW_MS)
            .unwrap()
            .memory;
        // The Node client's next call, one millisecond later, with 17 digits.
        assert!(judge(&node(NOW_MS + 1), &after_go, false, NOW_MS).is_ok());
        // ... and one a little earlier than the Go call (arrived late): still fine.
        assert!(judge(&node(NOW_MS - 5), &after_go, false, NOW_MS).is_ok());
    }

    #[test]
    fn a_fast_client_clock_does_not_raise_the_floor_past_the_server_clock() {
        let ahead = judge(&node(NOW_MS + 50_000), &Memory::default(), false, NOW_MS)
            .unwrap()
            .memory;
        assert_eq!(ahead.floor_ns, (NOW_MS - WINDOW_MS) * NS_PER_MS);
        assert!(judge(&node(NOW_MS - 1_000), &ahead, false, NOW_MS).is_ok());
    }

    #[test]
    fn the_floor_never_goes_down() {
        let m = Memory {
            newest_ns: Some(NOW_MS * NS_PER_MS),
            floor_ns: (NOW_MS - 10) * NS_PER_MS,
        };
        let next = judge(&node(NOW_MS + 1), &m, false, NOW_MS).unwrap().memory;
        assert_eq!(next.floor_ns, m.floor_ns);
        assert_eq!(
            judge(&node(NOW_MS - 10), &next, false, NOW_MS),
            Err(AuthError::NonceTooSmall)
        );
    }

    #[test]
    fn too_far_ahead_is_refused_before_anything_else() {
        let n = node(NOW_MS + MAX_AHEAD_MS + 1);
        assert!(matches!(
            judge(&n, &Memory::default(), true, NOW_MS),
            Err(AuthError::NonceTooBig(_))
        ));
    }

    proptest! {
        /// Whatever order distinct nonces inside the window arrive in, each is accepted
        /// once and only once.
        #[test]
        fn each_nonce_inside_the_window_is_accepted_exactly_once(
            offsets in proptest::collection::vec(0u64..WINDOW_MS * 10_000, 1..60),
        ) {
            let mut memory = Memory::default();
            let mut seen = std::collections::HashSet::new();
            let base = u128::from(NOW_MS - WINDOW_MS / 2) * 10_000;
            for o in offsets.iter().chain(offsets.iter()) {
                let n = Nonce::new(base + u128::from(*o)).unwrap();
                let r = judge(&n, &memory, seen.contains(&n.value()), NOW_MS);
                if seen.contains(&n.value()) {
                    prop_assert_eq!(r, Err(AuthError::NonceReused));
                } else if let Ok(a) = r {
                    memory = a.memory;
                    seen.insert(n.value());
                } else {
                    // Only a nonce older than the window may be refused when new.
                    let newest = memory.newest_ns.unwrap();
                    prop_assert!(n.at_ns() <= newest.min(NOW_MS * NS_PER_MS) - WINDOW_MS * NS_PER_MS);
                }
            }
        }
    }
}
