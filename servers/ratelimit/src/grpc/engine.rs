//! The connection engine: accepts on the gRPC port (TCP, optionally TLS, or a unix socket),
//! hands each connection to the least busy connection thread ([`threads`]) and serves it
//! there with hyper's HTTP/2 ([`connection`]), with upstream's connection ageing and
//! keepalive. It knows nothing of rate limits: any [`GrpcRoutes`] will do.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::service::GrpcRoutes;
use crate::conn::{Backoff, Gate, Readable};
use crate::log::{self, Level};
use crate::pb::rls;
use crate::tls::SharedConfig;

mod connection;
mod threads;

use connection::serve_conn;
pub use threads::conn_threads_for;
use threads::{ConnThreads, LiveGuard};

/// Where the gRPC port listens.
pub enum GrpcListener {
    /// `GRPC_HOST:GRPC_PORT`.
    Tcp(TcpListener),
    /// `GRPC_UDS`.
    Unix(UnixListener),
}

/// Connection lifetime settings.
#[derive(Debug, Clone, Copy)]
pub struct Ageing {
    /// `GRPC_MAX_CONNECTION_AGE`, before jitter.
    pub max_age: Duration,
    /// `GRPC_MAX_CONNECTION_AGE_GRACE`.
    pub grace: Duration,
}

/// `age` +/- 10%, different for each connection so a fleet does not reconnect in step.
fn jittered(age: Duration) -> Duration {
    static N: AtomicU64 = AtomicU64::new(0);
    let r = RandomState::new().hash_one(N.fetch_add(1, Relaxed));
    let factor = 0.9 + 0.2 * (r % 10_001) as f64 / 10_000.0;
    age.mul_f64(factor)
}

/// How the gRPC port treats its connections.
#[derive(Clone)]
pub struct Connections {
    /// Upstream's connection ageing.
    pub ageing: Ageing,
    /// How often the server PINGs a connection (`GRPC_KEEPALIVE_TIME`; `None`: never), and
    /// how long it waits for the answer before closing it (`GRPC_KEEPALIVE_TIMEOUT`).
    pub keepalive: (Option<Duration>, Duration),
    /// The bound on open connections and their timeouts.
    pub gate: Arc<Gate>,
    /// Connection threads (see [`conn_threads_for`]); 0: the caller's runtime.
    pub threads: usize,
}

impl Connections {
    /// The port as `settings` describe it, on `threads` connection threads.
    pub fn from_settings(settings: &crate::settings::Settings, threads: usize) -> Self {
        Connections {
            ageing: Ageing {
                max_age: settings.grpc_max_connection_age,
                grace: settings.grpc_max_connection_age_grace,
            },
            keepalive: (
                settings.grpc_keepalive_time,
                settings.grpc_keepalive_timeout,
            ),
            gate: Gate::new("gRPC", settings.ports.grpc),
            threads,
        }
    }
}

/// Serves gRPC until `shutdown` flips, then drains connections for at most `drain`.
pub async fn serve_grpc<T: rls::rate_limit_service_server::RateLimitService>(
    listener: GrpcListener,
    routes: GrpcRoutes<T>,
    tls: Option<SharedConfig>,
    conns: Connections,
    mut shutdown: watch::Receiver<bool>,
    drain: Duration,
) {
    let threads = ConnThreads::start(conns.threads);
    let mut tasks = JoinSet::new();
    let mut backoff = Backoff::default();
    loop {
        while tasks.try_join_next().is_some() {}
        let accepted = tokio::select! {
            a = accept(&listener) => a,
            _ = shutdown.changed() => break,
        };
        let (io, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                tokio::time::sleep(conns.gate.accept_failed(&e, &mut backoff)).await;
                continue;
            }
        };
        backoff.reset();
        let Some(ticket) = conns.gate.admit() else {
            continue;
        };
        let routes = routes.for_connection(peer);
        let shutdown = shutdown.clone();
        let tls = tls.as_ref().map(|t| t.load_full());
        let thread = threads.least_busy();
        let local = thread.runtime.is_some();
        let live = LiveGuard::new(thread.live.clone());
        let conns = conns.clone();
        tasks.spawn_on(
            async move {
                let _live = live;
                // The socket moves to this thread's own reactor.
                let io = match io.register() {
                    Ok(io) => io,
                    Err(e) => {
                        log::log(
                            Level::Debug,
                            &format!("gRPC connection lost on hand-over: {e}"),
                        );
                        return;
                    }
                };
                if ticket.first_byte(&io).await.is_err() {
                    return;
                }
                let handshake = conns.gate.limits().first_byte_timeout;
                match (io, tls) {
                    (Accepted::Tcp(s), Some(cfg)) => {
                        let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
                        match tokio::time::timeout(handshake, acceptor.accept(s)).await {
                            Ok(Ok(tls)) => serve_conn(tls, routes, &conns, shutdown, local).await,
                            Ok(Err(e)) => {
                                log::log(Level::Debug, &format!("gRPC TLS handshake failed: {e}"))
                            }
                            Err(_) => log::log(Level::Debug, "gRPC TLS handshake timed out"),
                        }
                    }
                    (Accepted::Tcp(s), None) => {
                        serve_conn(s, routes, &conns, shutdown, local).await
                    }
                    (Accepted::Unix(s), _) => serve_conn(s, routes, &conns, shutdown, local).await,
                }
                drop(ticket);
            },
            &thread.handle,
        );
    }
    drop(listener);
    let _ = tokio::time::timeout(drain, async { while tasks.join_next().await.is_some() {} }).await;
    tasks.abort_all();
}

enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Readable for Accepted {
    async fn readable(&self) -> std::io::Result<()> {
        match self {
            Accepted::Tcp(s) => s.readable().await,
            Accepted::Unix(s) => s.readable().await,
        }
    }

    fn try_peek(&self) -> std::io::Result<usize> {
        match self {
            Accepted::Tcp(s) => s.try_peek(),
            Accepted::Unix(s) => s.try_peek(),
        }
    }
}

/// An accepted socket between the accepting runtime and a connection thread.
enum Unregistered {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Unregistered {
    /// Registers the socket with the reactor of the runtime this is called on.
    fn register(self) -> std::io::Result<Accepted> {
        Ok(match self {
            Unregistered::Tcp(s) => Accepted::Tcp(tokio::net::TcpStream::from_std(s)?),
            Unregistered::Unix(s) => Accepted::Unix(tokio::net::UnixStream::from_std(s)?),
        })
    }
}

/// An accepted socket, with the peer's address on TCP.
async fn accept(l: &GrpcListener) -> std::io::Result<(Unregistered, Option<std::net::IpAddr>)> {
    match l {
        GrpcListener::Tcp(l) => {
            let (s, addr) = l.accept().await?;
            let _ = s.set_nodelay(true);
            Ok((Unregistered::Tcp(s.into_std()?), Some(addr.ip())))
        }
        GrpcListener::Unix(l) => Ok((Unregistered::Unix(l.accept().await?.0.into_std()?), None)),
    }
}

#[cfg(test)]
mod tests;
