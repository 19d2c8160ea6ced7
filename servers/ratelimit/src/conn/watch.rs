//! A connection's watch: what it has in flight and whether its output moves, and the
//! verdict of when to close it (stalled, idle, or aged).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{Closed, PortLimits};

/// What a connection's watch reads: requests started and in flight, and write progress.
#[derive(Debug, Default)]
pub struct Activity {
    started: AtomicU64,
    in_flight: AtomicUsize,
    /// Writes to the socket and frames taken from response bodies.
    written: AtomicU64,
    /// The last write to the socket would have blocked.
    write_blocked: AtomicBool,
    /// Response bodies with a frame ready that the connection has not taken: with HTTP/2,
    /// a client that grants no flow-control window stalls here, not on the socket.
    bodies_waiting: AtomicUsize,
}

impl Activity {
    /// Counts a request in flight until the returned guard drops.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.started.fetch_add(1, Relaxed);
        self.in_flight.fetch_add(1, Relaxed);
        InFlight(self.clone())
    }

    /// For a connection that runs its streams in its own task: `running` streams now, `new`
    /// started since the last call. Cheaper than a guard per stream, whose wrapping future
    /// cost every stream an extra copy of hyper's stream state.
    pub fn streams_run_here(&self, running: usize, new: u64) {
        if new > 0 {
            self.started.fetch_add(new, Relaxed);
        }
        self.in_flight.store(running, Relaxed);
    }

    /// Resolves when the connection should be closed: its output has been stuck for
    /// `limits.write_timeout`, or no request has been in flight for `limits.idle_timeout`.
    /// It looks every half of the shorter timeout, so it fires up to half that late; the
    /// counters it compares cost a request no clock read.
    ///
    /// With `max_age`, it also resolves ([`Closed::Aged`]) once the connection is that old:
    /// one timer for both, polled each time the connection's task runs.
    pub async fn closing(&self, limits: &PortLimits, max_age: Option<Duration>) -> Closed {
        let shortest = limits
            .idle_timeout
            .map_or(limits.write_timeout, |i| i.min(limits.write_timeout));
        let tick = (shortest / 2).max(Duration::from_millis(10));
        let aged_at = max_age.and_then(|age| tokio::time::Instant::now().checked_add(age));
        let (mut stalled_for, mut idle_for) = (Duration::ZERO, Duration::ZERO);
        let mut seen = (self.started.load(Relaxed), self.written.load(Relaxed));
        loop {
            let next = tokio::time::Instant::now() + tick;
            if let Some(aged_at) = aged_at.filter(|&t| t <= next) {
                tokio::time::sleep_until(aged_at).await;
                return Closed::Aged;
            }
            tokio::time::sleep_until(next).await;
            let now = (self.started.load(Relaxed), self.written.load(Relaxed));
            let output_pending =
                self.write_blocked.load(Relaxed) || self.bodies_waiting.load(Relaxed) > 0;
            stalled_for = if output_pending && now.1 == seen.1 {
                stalled_for + tick
            } else {
                Duration::ZERO
            };
            idle_for = if self.in_flight.load(Relaxed) == 0 && now.0 == seen.0 {
                idle_for + tick
            } else {
                Duration::ZERO
            };
            seen = now;
            if stalled_for >= limits.write_timeout {
                return Closed::Stalled;
            }
            if limits.idle_timeout.is_some_and(|idle| idle_for >= idle) {
                return Closed::Idle;
            }
        }
    }
}

/// A request in flight on a connection.
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

/// A response body that tells its [`Activity`] while it has a frame the connection has
/// not taken. A body waiting on its own producer (a streaming response with nothing new)
/// is not counted: only output the client is not accepting is.
pub struct WatchedBody<B> {
    inner: B,
    activity: Arc<Activity>,
    waiting: bool,
}

impl<B> WatchedBody<B> {
    /// Wraps a response body of a connection watched by `activity`.
    pub fn new(inner: B, activity: Arc<Activity>) -> Self {
        activity.bodies_waiting.fetch_add(1, Relaxed);
        WatchedBody {
            inner,
            activity,
            waiting: true,
        }
    }

    fn set_waiting(&mut self, waiting: bool) {
        if waiting != self.waiting {
            self.waiting = waiting;
            if waiting {
                self.activity.bodies_waiting.fetch_add(1, Relaxed);
            } else {
                self.activity.bodies_waiting.fetch_sub(1, Relaxed);
            }
        }
    }
}

impl<B> Drop for WatchedBody<B> {
    fn drop(&mut self) {
        self.set_waiting(false);
    }
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for WatchedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        // After a frame the connection asks for the next one once it can send more.
        let waiting = matches!(r, Poll::Ready(Some(Ok(_)))) && !self.inner.is_end_stream();
        if matches!(r, Poll::Ready(Some(_))) {
            self.activity.written.fetch_add(1, Relaxed);
        }
        self.set_waiting(waiting);
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// A socket that reports its write progress to an [`Activity`].
pub struct Watched<I> {
    inner: I,
    activity: Arc<Activity>,
}

impl<I> Watched<I> {
    /// Wraps `inner`, reporting to `activity`.
    pub fn new(inner: I, activity: Arc<Activity>) -> Self {
        Watched { inner, activity }
    }

    fn wrote<T>(&self, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match &r {
            Poll::Pending => self.activity.write_blocked.store(true, Relaxed),
            Poll::Ready(Ok(_)) => {
                self.activity.written.fetch_add(1, Relaxed);
                self.activity.write_blocked.store(false, Relaxed);
            }
            Poll::Ready(Err(_)) => {}
        }
        r
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote(r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    // A flush moves no bytes of its own (hyper flushes after every pass, with or without
    // output): it is no progress.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(write: Duration, idle: Option<Duration>) -> PortLimits {
        PortLimits {
            max_connections: 1,
            first_byte_timeout: Duration::from_secs(10),
            write_timeout: write,
            idle_timeout: idle,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_requests_goes_idle_and_one_with_a_request_does_not() {
        let l = limits(Duration::from_secs(10), Some(Duration::from_secs(4)));
        let a = Arc::new(Activity::default());
        assert_eq!(a.closing(&l, None).await, Closed::Idle);
        let held = a.begin();
        let watch = tokio::time::timeout(Duration::from_secs(60), a.closing(&l, None));
        assert!(watch.await.is_err(), "a request in flight is not idleness");
        drop(held);
    }

    #[tokio::test(start_paused = true)]
    async fn blocked_output_without_progress_is_a_stall() {
        let l = limits(Duration::from_secs(2), None);
        let a = Arc::new(Activity::default());
        let _req = a.begin();
        a.write_blocked.store(true, Relaxed);
        assert_eq!(a.closing(&l, None).await, Closed::Stalled);
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_connection_reaches_its_age() {
        let a = Arc::new(Activity::default());
        let _req = a.begin();
        let started = tokio::time::Instant::now();
        let closed = a
            .closing(
                &limits(Duration::from_secs(10), None),
                Some(Duration::from_secs(95)),
            )
            .await;
        assert_eq!(
            (closed, started.elapsed()),
            (Closed::Aged, Duration::from_secs(95))
        );
    }
}
