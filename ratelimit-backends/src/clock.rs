//! The system's wall clock, read for every decision.
//!
//! On x86-64 Linux, when the kernel itself keeps time with the TSC (its clocksource is
//! `tsc`, which it picks only for a TSC that is invariant and synchronised across cores),
//! a thread reads the TSC and adds the ticks since its own anchor, a pair of TSC and OS
//! clock readings it retakes every [`SPAN_NS`]. That is ~10 ns against the vDSO's ~25 ns
//! (docs/benchmarks.md), with no calibration loop at start: the tick rate is measured
//! against `CLOCK_MONOTONIC` between a thread's anchors, and a new thread starts with the
//! rate another one measured. Anywhere else, and in a process's first 50 ms, the OS clock is
//! read directly. The same anchor gives the server's
//! response-time histograms a cheap `CLOCK_MONOTONIC`.

/// The system's wall clock: Unix seconds for window limits (upstream's resolution),
/// microseconds for token buckets and sliding windows. A time before the epoch (a clock
/// set wrong) reads as 0.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl ratelimit_core::Clock for SystemClock {
    fn now(&self) -> u64 {
        self.now_micros() / 1_000_000
    }

    #[inline]
    fn now_micros(&self) -> u64 {
        read(Reading::Wall) / 1_000
    }
}

impl SystemClock {
    /// Nanoseconds of `CLOCK_MONOTONIC` (slewed by NTP, never stepped; its zero is
    /// arbitrary), read as cheaply as the wall clock: for timing how long something took.
    /// Readings on different threads may disagree by a microsecond, so subtract with
    /// `saturating_sub`.
    #[inline]
    pub fn monotonic_nanos(&self) -> u64 {
        read(Reading::Monotonic)
    }
}

/// Which clock a reading is of.
#[derive(Clone, Copy)]
enum Reading {
    Wall,
    Monotonic,
}

#[inline(always)]
fn read(which: Reading) -> u64 {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    return tsc::nanos(which);
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    return os::nanos_of(which);
}

mod os {
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    pub(super) fn nanos_of(which: super::Reading) -> u64 {
        use super::Reading;
        match which {
            Reading::Wall => wall_nanos(),
            Reading::Monotonic => monotonic_nanos(),
        }
    }

    /// Nanoseconds since the epoch from the OS, as libc reads `CLOCK_REALTIME` (std's
    /// `SystemTime` adds checked arithmetic and a `Result` a decision does not need).
    #[cfg(target_os = "linux")]
    pub(super) fn wall_nanos() -> u64 {
        nanos(rustix::time::clock_gettime(rustix::time::ClockId::Realtime))
    }

    /// Nanoseconds of `CLOCK_MONOTONIC`, which NTP slews like the wall clock but never steps.
    #[cfg(target_os = "linux")]
    pub(super) fn monotonic_nanos() -> u64 {
        nanos(rustix::time::clock_gettime(
            rustix::time::ClockId::Monotonic,
        ))
    }

    #[cfg(target_os = "linux")]
    fn nanos(t: rustix::time::Timespec) -> u64 {
        let sub = u64::try_from(t.tv_nsec).unwrap_or(0);
        u64::try_from(t.tv_sec).map_or(0, |s| s.saturating_mul(1_000_000_000) + sub)
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn monotonic_nanos() -> u64 {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let start = *START.get_or_init(std::time::Instant::now);
        u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn wall_nanos() -> u64 {
        use std::time::{SystemTime, UNIX_EPOCH};
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// How long a thread's anchor serves before it reads the OS clocks again. A wall clock
/// stepped by NTP shows within this; between anchors the error is the rate's, under a
/// microsecond here (the test below bounds it).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
const SPAN_NS: u64 = 100_000_000;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod tsc {
    use std::cell::Cell;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    use super::{Reading, SPAN_NS, os};

    /// One thread's pairing of the TSC with the OS clocks.
    #[derive(Clone, Copy)]
    struct Anchor {
        ticks: u64,
        wall_ns: u64,
        monotonic_ns: u64,
        /// Nanoseconds per tick in 32.32 fixed point; 0 until measured (by this thread or
        /// another, [`RATE`]) or if the TSC is not to be trusted: every read goes to the OS.
        ns_per_tick: u64,
    }

    thread_local! {
        static ANCHOR: Cell<Anchor> = const {
            Cell::new(Anchor { ticks: 0, wall_ns: 0, monotonic_ns: 0, ns_per_tick: 0 })
        };
    }

    #[inline]
    pub(super) fn nanos(which: Reading) -> u64 {
        let ticks = read_tsc();
        let a = ANCHOR.get();
        let since = (u128::from(ticks.wrapping_sub(a.ticks)) * u128::from(a.ns_per_tick)) >> 32;
        if a.ns_per_tick != 0 && since < u128::from(SPAN_NS) {
            // `since` < SPAN_NS fits; the anchor's readings are the OS's, far from the end.
            let base = match which {
                Reading::Wall => a.wall_ns,
                Reading::Monotonic => a.monotonic_ns,
            };
            return base + since as u64;
        }
        let (wall_ns, monotonic_ns) = reanchor(a);
        match which {
            Reading::Wall => wall_ns,
            Reading::Monotonic => monotonic_ns,
        }
    }

    /// The tick rate (as [`Anchor::ns_per_tick`]) a thread measured last, for threads that
    /// have not measured their own yet: the TSC runs at one rate on every core.
    static RATE: AtomicU64 = AtomicU64::new(0);

    /// One pairing of the TSC with the OS clocks: how many ticks the reads took, the tick
    /// between them, the wall and the monotonic reading.
    fn sample() -> (u64, u64, u64, u64) {
        let before = read_tsc();
        let wall_ns = os::wall_nanos();
        let monotonic_ns = os::monotonic_nanos();
        let reads = read_tsc().wrapping_sub(before);
        (reads, before.wrapping_add(reads / 2), wall_ns, monotonic_ns)
    }

    /// The OS's wall and monotonic readings, taking them as the thread's new anchor when
    /// they can serve as one.
    #[cold]
    #[inline(never)]
    fn reanchor(old: Anchor) -> (u64, u64) {
        static TRUSTED: OnceLock<bool> = OnceLock::new();
        if !*TRUSTED.get_or_init(kernel_uses_tsc) {
            return (os::wall_nanos(), os::monotonic_nanos());
        }
        let mut best = sample();
        let known = match old.ns_per_tick {
            0 => RATE.load(Relaxed),
            rate => rate,
        };
        if known == 0 && old.ticks != 0 && best.3.wrapping_sub(old.monotonic_ns) < SPAN_NS / 2 {
            // No rate anywhere yet, and too short a baseline to measure one: keep the first
            // anchor, so that a later read measures over a longer one.
            return (best.2, best.3);
        }
        // The pairing is as good as the reads are quick: an interruption between them would
        // put it off by its length for a whole span. The quickest of three is kept.
        for _ in 0..2 {
            let s = sample();
            if s.0 < best.0 {
                best = s;
            }
        }
        let (_, ticks, wall_ns, monotonic_ns) = best;
        let elapsed_ns = monotonic_ns.wrapping_sub(old.monotonic_ns);
        let measured = (old.ticks != 0 && ticks > old.ticks && elapsed_ns >= SPAN_NS / 2)
            .then(|| (u128::from(elapsed_ns) << 32) / u128::from(ticks - old.ticks))
            .and_then(|rate| u64::try_from(rate).ok())
            .filter(|rate| *rate != 0);
        if let Some(rate) = measured {
            RATE.store(rate, Relaxed);
        }
        ANCHOR.set(Anchor {
            ticks,
            wall_ns,
            monotonic_ns,
            ns_per_tick: measured.unwrap_or(known),
        });
        (wall_ns, monotonic_ns)
    }

    /// Whether this thread reads the TSC now (it has measured the tick rate).
    #[cfg(test)]
    pub(super) fn in_use() -> bool {
        ANCHOR.get().ns_per_tick != 0
    }

    /// The kernel keeps time with the TSC only after checking that it is invariant and in
    /// step across CPUs; then it is as good a clock for us as for the vDSO.
    pub(super) fn kernel_uses_tsc() -> bool {
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc")
    }

    #[inline]
    #[allow(unsafe_code)]
    fn read_tsc() -> u64 {
        // SAFETY: RDTSC takes no operands and touches no memory; every x86-64 CPU has it. It
        // is `unsafe` only as all `core::arch` intrinsics once were. We reach here only when
        // the kernel's own clocksource is the TSC, which the vDSO reads with the same
        // instruction from user space, so it is enabled for this process.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use ratelimit_core::Clock;

    use super::SystemClock;

    fn micros(t: SystemTime) -> u64 {
        let d = t.duration_since(UNIX_EPOCH).expect("after the epoch");
        u64::try_from(d.as_micros()).expect("fits")
    }

    /// Each reading lies between std's (or, monotonic, the OS's) readings before and after
    /// it, within `slack` µs.
    fn check_readings(n: usize, pause: Duration, slack: u64) {
        for _ in 0..n {
            let before = micros(SystemTime::now());
            let ours = SystemClock.now_micros();
            let after = micros(SystemTime::now());
            assert!(
                (before.saturating_sub(slack)..=after + slack).contains(&ours),
                "{before} <= {ours} <= {after} (± {slack} µs)"
            );
            let secs = SystemClock.now();
            assert!((before / 1_000_000..=after / 1_000_000 + 1).contains(&secs));
            #[cfg(target_os = "linux")]
            {
                let before = super::os::monotonic_nanos();
                let ours = SystemClock.monotonic_nanos();
                let after = super::os::monotonic_nanos();
                assert!(
                    (before.saturating_sub(slack * 1_000)..=after + slack * 1_000).contains(&ours),
                    "monotonic: {before} <= {ours} <= {after} (± {slack} µs)"
                );
            }
            std::thread::sleep(pause);
        }
    }

    #[test]
    fn the_system_clock_is_the_wall_clock_in_both_resolutions() {
        check_readings(1, Duration::ZERO, 0);
    }

    /// Long enough for a thread to measure its tick rate and to re-anchor twice: readings
    /// taken from the TSC stay within 5 µs of the OS clock's (a rate 0.1% off would be 100 µs off).
    #[test]
    fn readings_between_anchors_stay_with_the_wall_clock() {
        check_readings(150, Duration::from_millis(2), 5);
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        assert_eq!(super::tsc::in_use(), super::tsc::kernel_uses_tsc());
    }

    /// A thread started once the rate is known reads the TSC from its second reading on.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn a_new_thread_starts_with_the_known_rate() {
        if !super::tsc::kernel_uses_tsc() {
            return;
        }
        let t0 = std::time::Instant::now();
        while !super::tsc::in_use() {
            assert!(t0.elapsed() < Duration::from_secs(5), "no rate measured");
            SystemClock.now_micros();
            std::thread::sleep(Duration::from_millis(1));
        }
        let fresh = std::thread::spawn(|| {
            SystemClock.now_micros();
            let in_use = super::tsc::in_use();
            check_readings(20, Duration::ZERO, 5);
            in_use
        });
        assert!(fresh.join().expect("no panic"));
    }
}
