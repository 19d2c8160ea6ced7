//! How the server's process holds memory.

/// Turns transparent huge pages off for this process, unless the operator set
/// `MIMALLOC_ALLOW_THP=1`.
///
/// The server's allocator (mimalloc) asks the kernel for huge pages on its arenas. The
/// kernel then backs a sparsely used 2 MiB range with a whole huge page and, in the
/// background, collapses ranges the allocator had returned page by page back into huge
/// pages. For a server whose heap is a few MB that made RSS start at about 26 MB instead of
/// 16 and left it about 15 MB higher after a burst of connections (the soak test). The
/// flag is the kernel's per-process switch (`PR_SET_THP_DISABLE`), so it also covers
/// ranges mapped before `main`.
pub fn keep_huge_pages_off() {
    if std::env::var("MIMALLOC_ALLOW_THP").is_ok_and(|v| v.trim() == "1") {
        return;
    }
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        // Not fatal: the server runs as before, with a larger RSS.
        eprintln!("ratelimit: cannot turn transparent huge pages off: {e}");
    }
}

/// Hands the memory this thread's allocator holds free back to the kernel now instead of
/// after mimalloc's purge delay, which only runs when the thread allocates again. For the
/// end of rare, large jobs (a CPU profile) on threads that may then sit idle.
#[allow(unsafe_code)]
pub fn release_freed_memory() {
    // SAFETY: `mi_collect` has no preconditions; it only walks the calling thread's heap
    // and the abandoned segments under mimalloc's own locks.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// For a runtime's `on_thread_park`: a thread going idle drops the limiter's per-thread state
/// and hands back what its allocator holds free, at most once a second. Both are otherwise
/// kept until the thread works again: the limiter's copy of a replaced rule set and its
/// buffers for the largest request, and mimalloc's empty pages, which it frees only when
/// the thread allocates. After a burst (a connection flood, large requests, reloads) they
/// would stay resident on threads that then go quiet.
pub fn release_when_idle() {
    use std::cell::Cell;
    use std::time::{Duration, Instant};
    thread_local! {
        static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    LAST.with(|last| {
        if last
            .get()
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            last.set(Some(now));
            ratelimit_core::release_thread_state();
            release_freed_memory();
        }
    });
}
