//! `ShouldRateLimit` over the `h2` crate alone: one `send_request` and one DATA frame that
//! ends the stream per call, the gRPC framing written here. A client shape of its own next
//! to tonic's (which goes through hyper) and the raw one (which batches its writes).

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use ratelimit_server::pb::rls;
use tokio::net::TcpStream;

const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// One HTTP/2 connection; clones share it, each call is a stream of its own.
#[derive(Clone)]
pub struct H2Conn {
    send: h2::client::SendRequest<Bytes>,
    uri: http::Uri,
}

impl H2Conn {
    pub async fn connect(addr: &str) -> std::io::Result<H2Conn> {
        let uri = format!("http://{addr}{PATH}")
            .parse()
            .map_err(std::io::Error::other)?;
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (send, conn) = h2::client::handshake(tcp)
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                eprintln!("rl-load: connection ended: {e}");
            }
        });
        Ok(H2Conn { send, uri })
    }

    /// `Some(true)` allowed, `Some(false)` over the limit, `None` failed.
    pub async fn call(&mut self, req: &rls::RateLimitRequest) -> Option<bool> {
        let message = req.encode_to_vec();
        let mut body = BytesMut::with_capacity(5 + message.len());
        body.put_u8(0);
        body.put_u32(u32::try_from(message.len()).ok()?);
        body.put_slice(&message);
        let head = http::Request::post(self.uri.clone())
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .ok()?;
        let mut send = self.send.clone().ready().await.ok()?;
        let (answer, mut stream) = send.send_request(head, false).ok()?;
        stream.send_data(body.freeze(), true).ok()?;
        let (parts, mut recv) = answer.await.ok()?.into_parts();
        let mut data = BytesMut::new();
        while let Some(chunk) = recv.data().await {
            let chunk = chunk.ok()?;
            let _ = recv.flow_control().release_capacity(chunk.len());
            data.extend_from_slice(&chunk);
        }
        let trailers = recv.trailers().await.ok()?;
        let status = trailers
            .as_ref()
            .and_then(|t| t.get("grpc-status"))
            .or(parts.headers.get("grpc-status"))?;
        if status != "0" || data.len() < 5 {
            return None;
        }
        let answer = rls::RateLimitResponse::decode(&data[5..]).ok()?;
        Some(answer.overall_code == rls::rate_limit_response::Code::Ok as i32)
    }
}
