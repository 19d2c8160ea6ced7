//! What every listening port does with a connection before and around its protocol: a
//! bound on open connections, a deadline for the first byte, a watch on stalled writes and
//! idleness, and accept errors that back off and log at a bounded rate.
//!
//! What it deliberately does not do: speak any protocol. The HTTP and gRPC faces hand it
//! sockets and get back a verdict (admitted, timed out, stalled, idle).

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::sync::Notify;

use crate::log::{self, Level};

mod watch;

pub use watch::{Activity, InFlight, Watched, WatchedBody};

/// How one port treats its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortLimits {
    /// Open connections at most; beyond it a new one takes the place of the oldest that has
    /// not sent a byte yet, or is closed at once.
    pub max_connections: usize,
    /// How long a new connection may stay silent (TLS handshakes included).
    pub first_byte_timeout: Duration,
    /// How long pending output may make no progress before the connection is dropped.
    pub write_timeout: Duration,
    /// How long a connection may have no request in flight; `None`: forever.
    pub idle_timeout: Option<Duration>,
}

/// The three ports' limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    /// `ShouldRateLimit` and health.
    pub grpc: PortLimits,
    /// `/json` and `/healthcheck`.
    pub http: PortLimits,
    /// The debug port (and the Prometheus endpoint).
    pub debug: PortLimits,
}

impl Ports {
    /// Lowers the bounds to fit the file limit; see [`fit_to_file_limit`].
    pub fn fit_to_file_limit(&mut self, file_limit: u64) -> Option<String> {
        fit_to_file_limit(
            &mut [
                &mut self.grpc.max_connections,
                &mut self.http.max_connections,
                &mut self.debug.max_connections,
            ],
            file_limit,
            FILES_KEPT_FOR_THE_REST,
        )
    }
}

/// Descriptors kept out of the ports' bounds for everything else the process opens: store
/// connections (one per gRPC connection thread on Redis, pools on memcached), rule files and
/// their watches, the statistics and tracing exporters, the log.
pub const FILES_KEPT_FOR_THE_REST: u64 = 256;

/// The bound on one port's open connections, and the queue of those that have not spoken.
pub struct Gate {
    port: &'static str,
    limits: PortLimits,
    open: AtomicUsize,
    silent: Mutex<Silent>,
    log: LogLimiter,
}

#[derive(Default)]
struct Silent {
    next: u64,
    /// Oldest first: the one to close when a new connection needs its place.
    waiting: BTreeMap<u64, Arc<Notify>>,
}

/// Why a connection was closed before its protocol ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// No first byte within [`PortLimits::first_byte_timeout`].
    Silent,
    /// Its place went to a newer connection while it had sent nothing.
    Evicted,
    /// Pending output made no progress for [`PortLimits::write_timeout`].
    Stalled,
    /// No request in flight for [`PortLimits::idle_timeout`].
    Idle,
    /// Older than the age its protocol allows (gRPC's `GRPC_MAX_CONNECTION_AGE`).
    Aged,
}

impl Gate {
    /// A gate for `port` (its name in logs: "gRPC", "HTTP", "debug").
    pub fn new(port: &'static str, limits: PortLimits) -> Arc<Self> {
        Arc::new(Gate {
            port,
            limits,
            open: AtomicUsize::new(0),
            silent: Mutex::default(),
            log: LogLimiter::default(),
        })
    }

    /// The port's limits.
    pub fn limits(&self) -> PortLimits {
        self.limits
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Relaxed)
    }

    /// Lets a just-accepted connection in, or says no (the caller closes it). At the bound,
    /// the oldest connection that has not sent a byte is told to close and the new one takes
    /// its place: a flood of idle sockets cannot keep out a client that speaks. Until the
    /// told one has closed (it is woken at once), the port holds one more than its bound.
    pub fn admit(self: &Arc<Self>) -> Option<Ticket> {
        let mut silent = self.silent.lock().unwrap_or_else(|p| p.into_inner());
        if self.open.load(Relaxed) >= self.limits.max_connections {
            match silent.waiting.pop_first() {
                Some((_, evict)) => evict.notify_one(),
                None => {
                    drop(silent);
                    self.log.warn(&format!(
                        "{} port: {} connections open, the most allowed: closing new ones",
                        self.port, self.limits.max_connections
                    ));
                    return None;
                }
            }
        }
        self.open.fetch_add(1, Relaxed);
        let id = silent.next;
        silent.next += 1;
        let evict = Arc::new(Notify::new());
        silent.waiting.insert(id, evict.clone());
        Some(Ticket {
            gate: self.clone(),
            id,
            evict,
        })
    }

    /// Logs an accept error at most once a second and says how long to wait before the next
    /// accept: the usual cause, too many open files, does not clear by retrying at once.
    pub fn accept_failed(&self, e: &io::Error, backoff: &mut Backoff) -> Duration {
        self.log
            .error(&format!("{} port: accept failed: {e}", self.port));
        backoff.next()
    }

    fn spoke(&self, id: u64) {
        let mut silent = self.silent.lock().unwrap_or_else(|p| p.into_inner());
        silent.waiting.remove(&id);
    }
}

/// One admitted connection's place at its gate; dropping it frees the place.
pub struct Ticket {
    gate: Arc<Gate>,
    id: u64,
    evict: Arc<Notify>,
}

impl Ticket {
    /// Waits until the connection has a byte to read (or is closed by its peer), for at most
    /// the port's first-byte timeout, and leaves the queue of silent connections.
    pub async fn first_byte<S: Readable>(&self, socket: &S) -> Result<(), Closed> {
        let limits = self.gate.limits;
        let outcome = tokio::select! {
            r = tokio::time::timeout(limits.first_byte_timeout, wait_for_first_byte(socket)) => match r {
                Ok(_) => Ok(()),
                Err(_) => Err(Closed::Silent),
            },
            _ = self.evict.notified() => Err(Closed::Evicted),
        };
        self.gate.spoke(self.id);
        outcome
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.gate.spoke(self.id);
        self.gate.open.fetch_sub(1, Relaxed);
    }
}

/// Sockets that can be waited on for a first byte without taking it.
pub trait Readable {
    /// Resolves once a read might not block (readiness can be spurious).
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send;
    /// Looks at the next byte without taking it: `WouldBlock` while nothing has arrived.
    fn try_peek(&self) -> io::Result<usize>;
}

/// Resolves once `socket` has a byte to read, has been closed by its peer, or failed.
async fn wait_for_first_byte<S: Readable>(socket: &S) {
    loop {
        if socket.readable().await.is_err() {
            return;
        }
        match socket.try_peek() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            _ => return,
        }
    }
}

fn peek(socket: socket2::SockRef<'_>) -> io::Result<usize> {
    let mut byte = [std::mem::MaybeUninit::uninit()];
    socket.peek(&mut byte)
}

impl Readable for tokio::net::TcpStream {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
        tokio::net::TcpStream::readable(self)
    }

    fn try_peek(&self) -> io::Result<usize> {
        self.try_io(Interest::READABLE, || peek(socket2::SockRef::from(self)))
    }
}

impl Readable for tokio::net::UnixStream {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
        tokio::net::UnixStream::readable(self)
    }

    fn try_peek(&self) -> io::Result<usize> {
        self.try_io(Interest::READABLE, || peek(socket2::SockRef::from(self)))
    }
}

/// Doubling waits after accept errors: 5 ms up to 1 s, back to the start after a success.
#[derive(Debug, Default)]
pub struct Backoff {
    wait: Option<Duration>,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MOST: Duration = Duration::from_secs(1);

    fn next(&mut self) -> Duration {
        let wait = self.wait.map_or(Self::FIRST, |w| (w * 2).min(Self::MOST));
        self.wait = Some(wait);
        wait
    }

    /// An accept succeeded.
    pub fn reset(&mut self) {
        self.wait = None;
    }
}

/// One log line a second at most, with the count of the lines left out since the last one:
/// a flood of refused connections must not become a flood of log lines.
#[derive(Default)]
pub struct LogLimiter {
    last: Mutex<Option<Instant>>,
    left_out: AtomicU64,
}

impl LogLimiter {
    fn warn(&self, msg: &str) {
        self.emit(Level::Warn, msg);
    }

    fn error(&self, msg: &str) {
        self.emit(Level::Error, msg);
    }

    fn emit(&self, level: Level, msg: &str) {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| now.duration_since(t) < Duration::from_secs(1)) {
            self.left_out.fetch_add(1, Relaxed);
            return;
        }
        *last = Some(now);
        drop(last);
        match self.left_out.swap(0, Relaxed) {
            0 => log::log(level, msg),
            n => log::log(
                level,
                &format!("{msg} ({n} more like this in the last second)"),
            ),
        }
    }
}

/// Scales the ports' bounds down, in proportion, when together with `reserve` descriptors
/// (store connections, rule files, logs) they would not fit under the file limit: the
/// process then refuses connections instead of failing every `accept` and every file open
/// with "too many open files". Returns a warning when it had to.
pub fn fit_to_file_limit(
    bounds: &mut [&mut usize],
    file_limit: u64,
    reserve: u64,
) -> Option<String> {
    let wanted: u64 = bounds.iter().map(|b| **b as u64).sum();
    let room = file_limit.saturating_sub(reserve).max(bounds.len() as u64);
    if wanted <= room {
        return None;
    }
    for b in bounds.iter_mut() {
        **b = ((**b as u64 * room / wanted) as usize).max(1);
    }
    Some(format!(
        "the file limit ({file_limit}) cannot hold the connection bounds ({wanted} in all, plus \
         {reserve} for the rest of the process): each port's bound was lowered in proportion"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize) -> PortLimits {
        PortLimits {
            max_connections: max,
            first_byte_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            idle_timeout: None,
        }
    }

    #[tokio::test]
    async fn at_the_bound_the_oldest_silent_connection_makes_room() {
        let gate = Gate::new("test", limits(2));
        let first = gate.admit().unwrap();
        let second = gate.admit().unwrap();
        let third = gate.admit().expect("a silent connection makes room");
        // The first one was told to go: its wait for a first byte ends at once.
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        assert_eq!(first.first_byte(&a).await, Err(Closed::Evicted));
        drop(first);
        assert_eq!(gate.open(), 2);
        drop((second, third));
        assert_eq!(gate.open(), 0);
    }

    #[tokio::test]
    async fn at_the_bound_with_everyone_speaking_a_new_connection_is_refused() {
        let gate = Gate::new("test", limits(1));
        let ticket = gate.admit().unwrap();
        let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut b, b"x")
            .await
            .unwrap();
        assert_eq!(ticket.first_byte(&a).await, Ok(()));
        assert!(gate.admit().is_none());
        drop(ticket);
        assert!(gate.admit().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_times_out() {
        let gate = Gate::new("test", limits(1));
        let ticket = gate.admit().unwrap();
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        assert_eq!(ticket.first_byte(&a).await, Err(Closed::Silent));
    }

    #[test]
    fn bounds_shrink_in_proportion_to_fit_the_file_limit() {
        let (mut a, mut b) = (3000, 1000);
        assert!(fit_to_file_limit(&mut [&mut a, &mut b], 1 << 20, 256).is_none());
        assert_eq!((a, b), (3000, 1000));
        let warning = fit_to_file_limit(&mut [&mut a, &mut b], 1024, 224).unwrap();
        assert_eq!((a, b), (600, 200));
        assert!(warning.contains("1024"), "{warning}");
    }

    #[test]
    fn backoff_doubles_to_a_second_and_starts_over() {
        let mut b = Backoff::default();
        let waits: Vec<_> = (0..10).map(|_| b.next().as_millis()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.reset();
        assert_eq!(b.next().as_millis(), 5);
    }
}
