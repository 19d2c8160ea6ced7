//! One gRPC connection: hyper's HTTP/2 connection, its streams run in its own task, and
//! the watch that ends it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};

use super::{Connections, GrpcRoutes, jittered};
use crate::conn::{Activity, Closed, PortLimits, Watched, WatchedBody};
use crate::log::{self, Level};
use crate::pb::rls;

/// One HTTP/2 connection: served until the client leaves, the server shuts down, the
/// connection reaches its age or stays idle too long (then GOAWAY, and a hard close after
/// the grace period), or its output stays stuck too long (then a hard close at once).
pub(super) async fn serve_conn<I, T>(
    io: I,
    routes: GrpcRoutes<T>,
    conns: &Connections,
    mut shutdown: watch::Receiver<bool>,
    local: bool,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: rls::rate_limit_service_server::RateLimitService,
{
    let activity = Arc::new(Activity::default());
    let (exec, mut started) = mpsc::unbounded_channel();
    let exec = if local {
        StreamExec::Local(exec)
    } else {
        StreamExec::Spawn(activity.clone())
    };
    let (ping_every, ping_timeout) = conns.keepalive;
    let conn = hyper::server::conn::http2::Builder::new(exec)
        .timer(TokioTimer::new())
        // No `date` header: gRPC clients ignore it, upstream's grpc-go does not send one,
        // and it is a formatted, changing header on every response.
        .auto_date_header(false)
        .keep_alive_interval(ping_every)
        .keep_alive_timeout(ping_timeout)
        .serve_connection(
            TokioIo::new(Watched::new(io, activity.clone())),
            TowerToHyperService::new(
                tower::ServiceExt::<http::Request<hyper::body::Incoming>>::map_response(routes, {
                    let activity = activity.clone();
                    move |r: http::Response<tonic::body::Body>| {
                        r.map(|b| WatchedBody::new(b, activity.clone()))
                    }
                }),
            ),
        );
    tokio::pin!(conn);
    let mut streams = FuturesUnordered::new();
    let limits = conns.gate.limits();
    let mut grace = conns.ageing.grace;
    tokio::select! {
        _ = drive(conn.as_mut(), &mut started, &mut streams, &activity) => return,
        _ = shutdown.changed() => {}
        closed = activity.closing(&limits, Some(jittered(conns.ageing.max_age))) => {
            log::log(Level::Debug, &format!("gRPC connection closing: {closed:?}"));
            match closed {
                Closed::Stalled => return,
                Closed::Aged => {}
                // Nothing is in flight: the client has only to answer the shutdown's PING.
                Closed::Idle | Closed::Silent | Closed::Evicted => grace = ping_timeout,
            }
        }
    }
    conn.as_mut().graceful_shutdown();
    let draining = PortLimits {
        idle_timeout: None,
        ..limits
    };
    tokio::select! {
        _ = tokio::time::timeout(grace, drive(conn, &mut started, &mut streams, &activity)) => {}
        _ = activity.closing(&draining, None) => {}
    }
}

pub(super) type StreamFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// hyper's executor for one connection's streams. hyper's usual one, `tokio::spawn` per
/// stream, made every request a task of its own: spawned, stolen by the other worker,
/// woken across threads when its answer was ready, then waking the connection's task to
/// write it. Run inside the connection's task instead, a request costs the server markedly
/// less CPU (docs/benchmarks.md). Streams still wait concurrently (on the
/// store, say); what a connection gives up is running two decisions on two cores at once,
/// and a client with more load than one core can decide opens more connections (Envoy has
/// one per worker thread).
#[derive(Clone)]
enum StreamExec {
    /// Inside the connection's task, which counts its streams for the idle timeout.
    Local(mpsc::UnboundedSender<StreamFuture>),
    /// A task each, for connections on the shared runtime (memcached's): there, local
    /// streams were slower, as all of a connection's pooled memcached round trips then
    /// waited on one worker (docs/benchmarks.md). Each counts itself in flight.
    Spawn(Arc<Activity>),
}

impl<F> hyper::rt::Executor<F> for StreamExec
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, fut: F) {
        match self {
            // Fails only once `serve_conn` has returned, and then nothing would poll it.
            StreamExec::Local(streams) => drop(streams.send(Box::pin(fut))),
            StreamExec::Spawn(activity) => {
                let in_flight = activity.begin();
                drop(tokio::spawn(async move {
                    fut.await;
                    drop(in_flight);
                }));
            }
        }
    }
}

/// How many new streams a connection starts before it lets the other tasks of its thread
/// run, when some of them wait (on the store). The Redis store's connection task, on the
/// same thread, then sends the first requests' commands while the rest are decided, and
/// their answers come back while the thread is still busy: Redis and the client work
/// alongside the thread rather than in turn. 16 ran faster on Redis than a whole batch at
/// once, and than 8 or 32, for the same CPU per decision (docs/benchmarks.md).
pub(super) const STREAMS_PER_PASS: usize = 16;

/// Polls a connection and its streams, until the connection is done; tells `activity`
/// how many streams run.
pub(super) async fn drive<C: Future>(
    mut conn: Pin<&mut C>,
    started: &mut mpsc::UnboundedReceiver<StreamFuture>,
    streams: &mut FuturesUnordered<StreamFuture>,
    activity: &Activity,
) {
    std::future::poll_fn(|cx| {
        let mut new = 0;
        loop {
            if conn.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            let mut again = false;
            let mut taken = 0;
            while taken < STREAMS_PER_PASS
                && let Poll::Ready(Some(stream)) = started.poll_recv(cx)
            {
                streams.push(stream);
                again = true;
                taken += 1;
            }
            new += taken as u64;
            while let Poll::Ready(Some(())) = streams.poll_next_unpin(cx) {
                again = true;
            }
            // Streams that all finished at once (the memory store) have nothing to hand
            // over: then carrying on costs less than a yield and an extra write.
            if taken == STREAMS_PER_PASS && !streams.is_empty() {
                activity.streams_run_here(streams.len(), new);
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            // A stream that moved has handed the connection something to send (or taken
            // flow-control window): polling the connection now writes it in this pass,
            // where returning would cost a wake-up of this task to do the same.
            if !again {
                activity.streams_run_here(streams.len(), new);
                return Poll::Pending;
            }
        }
    })
    .await
}
