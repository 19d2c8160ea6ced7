//! The threads that serve accepted gRPC connections.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crate::log::{self, Level};
use crate::settings::{BackendType, Settings};

/// How many connection threads to serve gRPC on: `TOKIO_WORKER_THREADS` (one per CPU, the
/// knob that sizes the main runtime too) for the memory store and Redis, whose counting then
/// stays on each connection's thread (the Redis store opens a connection per such thread).
/// None for memcached: its pooled connections are shared by every caller, and on connection
/// threads they became the bottleneck (docs/benchmarks.md).
pub fn conn_threads_for(settings: &Settings) -> usize {
    if settings.backend_type == BackendType::Memcache {
        return 0;
    }
    settings.worker_threads
}

/// The threads that serve accepted gRPC connections, each a runtime with one worker of its
/// own. A connection's work (reading frames, its streams, writing answers, and the store's
/// round trips when the store keeps a connection per thread, as the Redis one does) then
/// never crosses threads, and a thread with nothing to do sleeps. On one work-stealing
/// runtime, a busy connection kept waking the idle workers, which took it over in turn.
pub(super) struct ConnThreads {
    threads: Vec<ConnThread>,
}

pub(super) struct ConnThread {
    pub(super) handle: tokio::runtime::Handle,
    /// Connections on this thread; a new one goes to the thread with the fewest.
    pub(super) live: Arc<AtomicUsize>,
    /// `None` when serving on the caller's runtime.
    pub(super) runtime: Option<tokio::runtime::Runtime>,
}

impl ConnThreads {
    pub(super) fn start(n: usize) -> Self {
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            // A multi-thread runtime of one worker rather than a current-thread runtime:
            // it needs no thread of ours blocking on it, and its LIFO slot runs a just-woken
            // task next (faster on Redis: docs/benchmarks.md).
            let built = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name(format!("grpc-conn-{i}"))
                .on_thread_park(crate::memory::release_when_idle)
                .enable_all()
                .build();
            match built {
                Ok(runtime) => threads.push(ConnThread {
                    handle: runtime.handle().clone(),
                    live: Arc::default(),
                    runtime: Some(runtime),
                }),
                Err(e) => {
                    log::log(
                        Level::Error,
                        &format!("cannot start gRPC connection thread {i}: {e}"),
                    );
                    break;
                }
            }
        }
        if threads.is_empty() {
            // None asked for, or none could start: serve on the caller's runtime.
            threads.push(ConnThread {
                handle: tokio::runtime::Handle::current(),
                live: Arc::default(),
                runtime: None,
            });
        }
        ConnThreads { threads }
    }

    pub(super) fn least_busy(&self) -> &ConnThread {
        self.threads
            .iter()
            .min_by_key(|t| t.live.load(Relaxed))
            .expect("start leaves at least one thread")
    }
}

impl Drop for ConnThread {
    fn drop(&mut self) {
        // Dropped inside the caller's runtime, where waiting for a runtime to stop is not
        // allowed; its connections were drained or aborted before this.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Counts a connection on its thread for as long as it lives.
pub(super) struct LiveGuard(Arc<AtomicUsize>);

impl LiveGuard {
    pub(super) fn new(live: Arc<AtomicUsize>) -> Self {
        live.fetch_add(1, Relaxed);
        LiveGuard(live)
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}
