//! One multiplexed Redis connection for the counting commands: every call queued while the
//! previous write was in flight goes out in the next single write, and replies are matched
//! to callers in order (Redis answers a connection's commands in the order it got them).
//!
//! Why not fred for this: fred flushes its socket whenever its own queue is empty, which
//! under load is after nearly every command (one `writev` each, measured with strace), so
//! concurrent decisions never share a write. Everything else (PING, health, `GET`,
//! refunds, Sentinel, Cluster, TLS) stays on fred; this speaks only plain RESP over TCP or a
//! Unix socket, with `AUTH` when configured.

mod connection;
mod resp;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use connection::drive;
#[doc(hidden)]
pub use resp::check_parse;
pub use resp::{Reply, encode, parse, push_bulk, push_header};

type Responder = oneshot::Sender<Result<Reply, String>>;

/// A queued call.
struct Call {
    frame: Vec<u8>,
    /// Commands in `frame`, each owed a reply.
    commands: usize,
    tx: Responder,
    /// When the caller gets a timeout instead, written or not.
    deadline: Instant,
}

/// Where and how to connect.
#[derive(Clone)]
pub struct Target {
    /// `host:port`, or a socket path when `unix`.
    pub addr: String,
    /// A Unix socket rather than TCP.
    pub unix: bool,
    /// `AUTH` arguments: `[password]` or `[user, password]`; empty for none.
    pub auth: Vec<String>,
    /// Bound on connecting (and authenticating), and on each call, from the call to its
    /// answer: a call still unanswered then gets an error saying it timed out.
    pub timeout: Duration,
    /// TLS over TCP, and the name the certificate is checked against.
    pub tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the AUTH arguments: this ends up in logs.
        f.debug_struct("Target")
            .field("addr", &self.addr)
            .field("unix", &self.unix)
            .field("timeout", &self.timeout)
            .field("tls", &self.tls.as_ref().map(|(_, name)| name))
            .finish_non_exhaustive()
    }
}

/// The handle callers use; each connection lives in a task.
///
/// A caller on a runtime of several workers (or none) shares the connection started with
/// the handle. A caller on a runtime of one worker (a current-thread runtime, or a
/// multi-thread one sized 1) gets a connection of its own thread, started on first use: a
/// server that runs a one-worker runtime per core (ours does, for its gRPC connections)
/// then keeps each decision, its Redis round trip included, on one thread. Through one
/// shared connection, each batch of replies woke the callers' threads from the
/// connection's.
#[derive(Debug, Clone)]
pub struct Mux {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    target: Target,
    /// The connection started with the handle, for callers without one of their own.
    home: mpsc::UnboundedSender<Call>,
    /// Per-thread connections. The home one is listed too when it was started on a
    /// one-worker runtime, so that its own thread does not open a second.
    own: Mutex<Vec<(ThreadId, mpsc::UnboundedSender<Call>)>>,
}

impl Mux {
    /// Starts the connection task (it connects on its own, and again after any failure).
    pub fn start(target: Target) -> Mux {
        let (home, rx) = mpsc::unbounded_channel();
        tokio::spawn(drive(target.clone(), rx));
        let mut own = Vec::new();
        if one_worker_runtime().is_some() {
            own.push((std::thread::current().id(), home.clone()));
        }
        Mux {
            shared: Arc::new(Shared {
                target,
                home,
                own: Mutex::new(own),
            }),
        }
    }

    /// Sends one encoded command and waits for its reply, at most the target's timeout.
    /// A dropped or timed-out call leaves the connection in step: its reply is read and
    /// discarded.
    pub async fn call(&self, frame: Vec<u8>) -> Result<Reply, String> {
        self.call_many(frame, 1).await
    }

    /// Sends a frame of `commands` encoded commands (they leave together, in order) and
    /// answers with the first command's reply, or with the first error any of them got:
    /// one wake-up for the caller however many commands it needed.
    ///
    /// The timeout is kept by the connection's task, not by a timer per call: arming a
    /// tokio timer due before anything else on the runtime wakes the runtime's I/O driver
    /// (an `eventfd` write, and one more `epoll_wait` to take it), and at 20,000 decisions/s
    /// that was 0.3-0.6 extra system calls per decision (strace, docs/benchmarks.md).
    pub async fn call_many(&self, frame: Vec<u8>, commands: usize) -> Result<Reply, String> {
        let (tx, rx) = oneshot::channel();
        self.send(Call {
            frame,
            commands: commands.max(1),
            tx,
            deadline: Instant::now() + self.shared.target.timeout,
        })
        .map_err(|_| "redis connection task is gone".to_owned())?;
        rx.await.map_err(|_| "redis connection closed".to_owned())?
    }

    fn send(&self, call: Call) -> Result<(), mpsc::error::SendError<Call>> {
        let Some(runtime) = one_worker_runtime() else {
            return self.shared.home.send(call);
        };
        let me = std::thread::current().id();
        // Held only to find or add this thread's sender: sends do not block.
        let mut own = self.shared.own.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, tx)) = own.iter().find(|(id, _)| *id == me) {
            return tx.send(call);
        }
        // A thread's runtime that has stopped took its connection task with it.
        own.retain(|(_, tx)| !tx.is_closed());
        let (tx, rx) = mpsc::unbounded_channel();
        runtime.spawn(drive(self.shared.target.clone(), rx));
        let sent = tx.send(call);
        own.push((me, tx));
        sent
    }
}

/// The runtime of the calling task, when it has a single worker: then that runtime's tasks
/// all run on one thread.
fn one_worker_runtime() -> Option<tokio::runtime::Handle> {
    tokio::runtime::Handle::try_current()
        .ok()
        .filter(|h| h.metrics().num_workers() == 1)
}
