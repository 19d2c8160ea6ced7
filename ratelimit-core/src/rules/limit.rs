//! One limit of a rule: its numbers, its algorithm, and what its keys hold.

use std::fmt::Write as _;

use crate::algorithm::{Algorithm, AlgorithmName};
use crate::key_id::KeyIdState;
use crate::unit::Unit;

/// One limit of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// Allowed hits per window (0 blocks everything).
    pub requests_per_unit: u32,
    /// The unit of the window.
    pub unit: Unit,
    /// The window is this many units.
    pub unit_multiplier: u32,
    /// A token bucket's `burst` as written (`None`: `requests_per_unit`).
    pub burst: Option<u32>,
    /// How the limit counts, with its numbers.
    pub algorithm: Algorithm,
    /// The limit's `name` ("" when none): reported in `current_limit`.
    pub name: String,
    /// What the key of this limit holds between the descriptor part and the window
    /// start: empty for upstream's keys (a lone fixed window), else the algorithm and
    /// window length, so that the limits of one descriptor never share a key.
    pub key_tag: String,
    /// The key's descriptor part is wrapped in braces, a Redis Cluster hash tag: the
    /// limits of one descriptor are decided in one atomic step, on one slot.
    pub joint: bool,
    /// The fingerprint of this limit's keys up to the rule's first descriptor key
    /// (joint, domain, tag, key), hashed at load; `None` for a request override's limit.
    pub(crate) id_head: Option<KeyIdState>,
}

impl Limit {
    /// A fixed window of one unit, as upstream counts: the limit of a request override.
    pub fn fixed(requests_per_unit: u32, unit: Unit) -> Limit {
        Limit {
            requests_per_unit,
            unit,
            unit_multiplier: 1,
            burst: None,
            algorithm: Algorithm::FixedWindow {
                seconds: unit.seconds(),
            },
            name: String::new(),
            key_tag: String::new(),
            joint: false,
            id_head: None,
        }
    }

    /// The limit as the arithmetic of [`crate::decide`] sees it.
    #[inline]
    pub fn spec(&self, shadow_mode: bool) -> crate::decide::LimitSpec<'_> {
        crate::decide::LimitSpec {
            requests_per_unit: self.requests_per_unit,
            unit: self.unit,
            name: &self.name,
            shadow_mode,
            algorithm: self.algorithm,
        }
    }

    /// The limit's line in `/rlconfig` after the rule's key: upstream's text, and the
    /// extensions when they differ from upstream's behaviour.
    pub(crate) fn dump_line(&self, shadow_mode: bool, quota_mode: bool) -> String {
        let mut line = format!(
            "unit={} requests_per_unit={}, shadow_mode: {shadow_mode}, quota_mode: {quota_mode}",
            self.unit.name(),
            self.requests_per_unit,
        );
        let algorithm = self.algorithm.name();
        if algorithm != AlgorithmName::FixedWindow || self.unit_multiplier != 1 {
            let _ = write!(
                line,
                ", algorithm: {}, unit_multiplier: {}",
                algorithm.name(),
                self.unit_multiplier
            );
        }
        if let Algorithm::TokenBucket(b) = self.algorithm {
            let _ = write!(line, ", burst: {}", b.capacity);
        }
        if !self.name.is_empty() && self.joint {
            let _ = write!(line, ", name: {}", self.name);
        }
        line
    }
}
