//! Time units of a rate limit window.

use std::fmt;

/// The window of a limit. Windows are fixed and aligned to the Unix epoch, exactly as the
/// upstream service computes them, so that counters are shared across implementations.
///
/// `Week`, `Month` and `Year` are fixed-length buckets (7, 30 and 365 days), not calendar
/// periods: that is what upstream does and what its cache keys encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Unit {
    /// One second.
    Second,
    /// Sixty seconds.
    Minute,
    /// 3600 seconds.
    Hour,
    /// 86400 seconds.
    Day,
    /// 604800 seconds; windows start on Thursdays because the epoch did.
    Week,
    /// A fixed 30-day bucket.
    Month,
    /// A fixed 365-day bucket.
    Year,
}

impl Unit {
    /// Every unit, shortest first.
    pub const ALL: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];

    /// Length of the window in seconds.
    pub const fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3600,
            Unit::Day => 86_400,
            Unit::Week => 604_800,
            Unit::Month => 2_592_000,
            Unit::Year => 31_536_000,
        }
    }

    /// Upper-case name as used on the wire and in `/rlconfig`.
    pub const fn name(self) -> &'static str {
        match self {
            Unit::Second => "SECOND",
            Unit::Minute => "MINUTE",
            Unit::Hour => "HOUR",
            Unit::Day => "DAY",
            Unit::Week => "WEEK",
            Unit::Month => "MONTH",
            Unit::Year => "YEAR",
        }
    }

    /// Parses a unit name case-insensitively (`minute`, `MINUTE`, `Minute`).
    /// `UNKNOWN` and anything else yield `None`.
    pub fn parse(name: &str) -> Option<Unit> {
        Unit::ALL
            .into_iter()
            .find(|u| u.name().eq_ignore_ascii_case(name))
    }

    /// Number of the unit in `RateLimitResponse.RateLimit.Unit` (and the config proto):
    /// note that `WEEK` is 7, after `MONTH` = 5 and `YEAR` = 6.
    pub const fn proto_number(self) -> i32 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 2,
            Unit::Hour => 3,
            Unit::Day => 4,
            Unit::Month => 5,
            Unit::Year => 6,
            Unit::Week => 7,
        }
    }

    /// Inverse of [`Unit::proto_number`]; 0 (`UNKNOWN`) and unknown numbers yield `None`.
    pub const fn from_proto_number(n: i32) -> Option<Unit> {
        Some(match n {
            1 => Unit::Second,
            2 => Unit::Minute,
            3 => Unit::Hour,
            4 => Unit::Day,
            5 => Unit::Month,
            6 => Unit::Year,
            7 => Unit::Week,
            _ => return None,
        })
    }

    /// Start of the window holding `now` (Unix seconds).
    pub const fn window_start(self, now: u64) -> u64 {
        now / self.seconds() * self.seconds()
    }

    /// Seconds until the window holding `now` ends: 1 ..= `seconds()`.
    pub const fn until_reset(self, now: u64) -> u64 {
        self.seconds() - now % self.seconds()
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_match_upstream_examples() {
        assert_eq!(Unit::Second.window_start(1234), 1234);
        assert_eq!(Unit::Minute.window_start(1234), 1200);
        assert_eq!(Unit::Hour.window_start(1_000_000), 997_200);
        assert_eq!(Unit::Day.window_start(1_000_000), 950_400);
        assert_eq!(Unit::Minute.until_reset(2222), 58);
        assert_eq!(Unit::Minute.until_reset(2220), 60);
    }

    #[test]
    fn names_round_trip_case_insensitively() {
        for u in Unit::ALL {
            assert_eq!(Unit::parse(&u.name().to_lowercase()), Some(u));
            assert_eq!(Unit::from_proto_number(u.proto_number()), Some(u));
        }
        assert_eq!(Unit::parse("UNKNOWN"), None);
        assert_eq!(Unit::parse(""), None);
        assert_eq!(Unit::from_proto_number(0), None);
    }
}
