//! The signal half of the CPU profiler: a timer on the process's CPU time (`SIGPROF`) and a
//! handler that copies the interrupted thread's return addresses into a buffer that lives
//! for one profile.
//!
//! The handler may only touch memory that stays valid while it runs, and may not allocate
//! or lock. So the buffer is published through one atomic pointer, each sample takes its
//! slot with one `fetch_add`, and [`Sampling::stop`] unpublishes the buffer and waits until
//! no handler is inside it before freeing it.
#![allow(unsafe_code)]

use std::ptr;
use std::sync::Once;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicPtr, AtomicUsize};

/// Return addresses kept per sample; deeper stacks lose their outermost frames.
pub const MAX_DEPTH: usize = 64;
/// The handler's symbol: a sample's frames up to it, and the trampoline after it, are the
/// profiler's own.
pub const HANDLER_NAME: &str = "cpu_profile::sampler::on_sigprof";
/// A slot: thread id, depth, then the frames, innermost first.
const SLOT_WORDS: usize = MAX_DEPTH + 2;

/// Samples of one profile. Written by the signal handler only.
struct Buffer {
    words: Box<[AtomicUsize]>,
    capacity: usize,
    taken: AtomicUsize,
}

/// The buffer the handler writes to; null when no profile runs.
static CURRENT: AtomicPtr<Buffer> = AtomicPtr::new(ptr::null_mut());
/// How many handlers are between reading `CURRENT` and their last use of it.
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);
static INSTALL: Once = Once::new();

/// One sample: the thread it interrupted and its return addresses, innermost first.
pub struct Stack {
    pub thread: u32,
    pub frames: Vec<usize>,
}

/// What a profile collected.
pub struct Samples {
    pub stacks: Vec<Stack>,
    /// Samples that arrived after the buffer was full.
    pub dropped: usize,
}

/// A running profile. Stops (and frees its buffer) when dropped.
pub struct Sampling {
    buffer: *mut Buffer,
}

// SAFETY: `buffer` is a `Box` that only this value frees; the handler reaches it through
// `CURRENT`, never through this pointer. Moving the owner between threads is fine.
unsafe impl Send for Sampling {}

/// Why a profile did not start.
#[derive(Debug)]
pub enum StartError {
    /// Another profile runs in this process.
    Busy,
    /// The kernel refused the handler or the timer.
    Os(std::io::Error),
}

impl Sampling {
    /// Starts sampling every `1/frequency` s of the process's CPU time, keeping at most
    /// `capacity` samples.
    pub fn start(frequency: u32, capacity: usize) -> Result<Sampling, StartError> {
        install_handler().map_err(StartError::Os)?;
        let buffer = Box::into_raw(Box::new(Buffer {
            words: (0..capacity * SLOT_WORDS)
                .map(|_| AtomicUsize::new(0))
                .collect(),
            capacity,
            taken: AtomicUsize::new(0),
        }));
        if CURRENT
            .compare_exchange(ptr::null_mut(), buffer, SeqCst, SeqCst)
            .is_err()
        {
            // SAFETY: `buffer` came from `Box::into_raw` above and was never published.
            drop(unsafe { Box::from_raw(buffer) });
            return Err(StartError::Busy);
        }
        let sampling = Sampling { buffer };
        let period_us = (1_000_000 / frequency.max(1)) as libc::suseconds_t;
        set_timer(period_us).map_err(StartError::Os)?;
        Ok(sampling)
    }

    /// Stops the timer and returns what was sampled.
    pub fn stop(self) -> Samples {
        // SAFETY: any caller may quiesce (see there).
        unsafe { self.quiesce() };
        // SAFETY: no handler writes the buffer any more, and `Drop`, which frees it, runs
        // only after these reads.
        let buffer = unsafe { &*self.buffer };
        let taken = buffer.taken.load(Relaxed);
        let kept = taken.min(buffer.capacity);
        let stacks = (0..kept)
            .map(|slot| {
                let words = &buffer.words[slot * SLOT_WORDS..(slot + 1) * SLOT_WORDS];
                let depth = words[1].load(Relaxed).min(MAX_DEPTH);
                Stack {
                    thread: words[0].load(Relaxed) as u32,
                    frames: words[2..2 + depth]
                        .iter()
                        .map(|w| w.load(Relaxed))
                        .collect(),
                }
            })
            .filter(|s| !s.frames.is_empty())
            .collect();
        Samples {
            stacks,
            dropped: taken - kept,
        }
    }

    /// Disarms the timer, unpublishes the buffer and waits for handlers still inside it.
    ///
    /// # Safety
    /// Call only from a thread that is not itself inside the handler (the handler never
    /// calls back into this module, so any caller qualifies).
    unsafe fn quiesce(&self) {
        let _ = set_timer(0);
        // Only this profile's buffer is replaced: if it is already gone, nothing happens.
        let _ = CURRENT.compare_exchange(self.buffer, ptr::null_mut(), SeqCst, SeqCst);
        // A handler that read the old pointer incremented `IN_HANDLER` before reading it
        // (both SeqCst), so it is counted here until its last use of the buffer.
        while IN_HANDLER.load(SeqCst) != 0 {
            std::thread::yield_now();
        }
    }
}

impl Drop for Sampling {
    fn drop(&mut self) {
        // SAFETY: see `quiesce`. After it no handler holds the buffer and none can reach it,
        // and `self.buffer` came from `Box::into_raw` in `start`.
        unsafe {
            self.quiesce();
            drop(Box::from_raw(self.buffer));
        }
    }
}

/// Installs the handler once for the life of the process. It stays installed: with no
/// buffer published it does nothing, whereas restoring the default action would let a
/// `SIGPROF` still pending when a profile ends terminate the process.
fn install_handler() -> std::io::Result<()> {
    let mut result = Ok(());
    INSTALL.call_once(|| {
        // SAFETY: a zeroed `sigaction` is a valid value (empty mask, no flags); the handler
        // is an `extern "C" fn(c_int)` as `sa_handler` requires without `SA_SIGINFO`.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigprof as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(libc::SIGPROF, &action, ptr::null_mut()) != 0 {
                result = Err(std::io::Error::last_os_error());
            }
        }
    });
    result
}

/// Arms `ITIMER_PROF` with the given period, or disarms it with 0.
fn set_timer(period_us: libc::suseconds_t) -> std::io::Result<()> {
    let period = libc::timeval {
        tv_sec: 0,
        tv_usec: period_us,
    };
    let timer = libc::itimerval {
        it_interval: period,
        it_value: period,
    };
    // SAFETY: both pointers are valid for the call; the old value is not asked for.
    if unsafe { libc::setitimer(libc::ITIMER_PROF, &timer, ptr::null_mut()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

extern "C" fn on_sigprof(_signal: libc::c_int) {
    // SAFETY: `__errno_location` returns this thread's errno; the unwinder may change it
    // and the interrupted code must find it as it was.
    let errno = unsafe { *libc::__errno_location() };
    IN_HANDLER.fetch_add(1, SeqCst);
    let buffer = CURRENT.load(SeqCst);
    if !buffer.is_null() {
        // SAFETY: a non-null `CURRENT` read after incrementing `IN_HANDLER` stays allocated
        // until this handler decrements it: `quiesce` unpublishes first, then waits for
        // zero, and only then is the buffer freed.
        record(unsafe { &*buffer });
    }
    IN_HANDLER.fetch_sub(1, SeqCst);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

fn record(buffer: &Buffer) {
    let slot = buffer.taken.fetch_add(1, Relaxed);
    if slot >= buffer.capacity {
        return;
    }
    let words = &buffer.words[slot * SLOT_WORDS..(slot + 1) * SLOT_WORDS];
    // SAFETY: `gettid` has no preconditions and is async-signal-safe.
    words[0].store(unsafe { libc::gettid() } as usize, Relaxed);
    let mut depth = 0;
    // SAFETY: unsynchronized tracing is what a signal handler may use: it takes no lock
    // and allocates nothing (libgcc's unwinder; glibc finds unwind tables through
    // `_dl_find_object`, which is async-signal-safe). The closure only stores integers.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            let ip = frame.ip() as usize;
            if ip == 0 {
                return false; // past the outermost frame
            }
            words[2 + depth].store(ip, Relaxed);
            depth += 1;
            depth < MAX_DEPTH
        });
    }
    words[1].store(depth, Relaxed);
}
