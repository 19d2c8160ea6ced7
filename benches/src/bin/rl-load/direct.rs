//! tonic's generated client over a bare hyper HTTP/2 connection.

use bytes::Bytes;
use futures_util::FutureExt;
use http_body_util::{BodyExt, Full};
use tokio::net::TcpStream;

/// tonic's client on a bare hyper HTTP/2 connection. tonic's `Channel` puts a buffer task,
/// reconnection and load balancing in front of the same connection: the right thing for
/// a service, but here every request paid for a hop through that task, on the cores the
/// server under test needs. A load generator connects once and never balances.
///
/// The request goes out as one HEADERS and one DATA frame that ends the stream, as Envoy
/// sends a unary call. Handed tonic's streaming body, hyper cannot know the body ends after
/// its one message, so it sent a third, empty DATA frame to end the stream, and tonic's
/// server waits for that end before it calls the handler.
#[derive(Clone)]
pub struct Direct(hyper::client::conn::http2::SendRequest<Full<Bytes>>);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<http::Request<tonic::body::Body>> for Direct {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = BoxError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, BoxError>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let (parts, body) = req.into_parts();
        // A unary call's body is encoded when it is first polled, so it is complete at
        // once; a body that is not (a streaming call) is not what this tool sends.
        match body.collect().now_or_never() {
            Some(Ok(all)) => {
                let req = http::Request::from_parts(parts, Full::new(all.to_bytes()));
                let sent = self.0.send_request(req);
                Box::pin(async move { sent.await.map_err(Into::into) })
            }
            Some(Err(e)) => Box::pin(std::future::ready(Err(e.into()))),
            None => Box::pin(std::future::ready(Err(
                "rl-load sends unary calls only".into()
            ))),
        }
    }
}

pub async fn connect_direct(addr: &str) -> std::io::Result<Direct> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    // Each request's answer is a task of its own here. Run inside the connection's task
    // (as the server runs its streams) the request bodies and answers cost this process
    // 0.62-0.83x the CPU, but the rate fell to 0.55-0.71x (2 cores, one worker here).
    let (send, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .map_err(std::io::Error::other)?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            eprintln!("rl-load: connection ended: {e}");
        }
    });
    Ok(Direct(send))
}
