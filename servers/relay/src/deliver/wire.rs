//! The machine outputs: NATS subjects and the UDP collector.

use super::*;

impl Output {
    pub(super) async fn nats(&mut self, job: &Job) -> Result<(), String> {
        let timeout = self.timeout;
        let server = self.channel.server.as_str();
        let payload = Bytes::from(job.message.clone());
        let existing = self.nats.clone();
        let client = self
            .attempt("publish", || {
                let subject = job.target.clone();
                let payload = payload.clone();
                let existing = existing.clone();
                async move {
                    let retry = |reason: String| SendError::Retry {
                        after: None,
                        reason,
                    };
                    // The client reconnects by itself once connected; only the first
                    // connection is made here.
                    let c = match existing {
                        Some(c) => c,
                        None => tokio::time::timeout(timeout, async_nats::connect(server))
                            .await
                            .map_err(|_| {
                                retry(format!("connecting: no answer within {timeout:?}"))
                            })?
                            .map_err(|e| retry(format!("connecting: {e}")))?,
                    };
                    let publish = async {
                        c.publish(subject, payload)
                            .await
                            .map_err(|e| e.to_string())?;
                        c.flush().await.map_err(|e| e.to_string())
                    };
                    match tokio::time::timeout(timeout, publish).await {
                        Ok(Ok(())) => Ok(c),
                        Ok(Err(e)) => Err(retry(e)),
                        Err(_) => Err(retry(format!("no flush within {timeout:?}"))),
                    }
                }
            })
            .await?;
        self.nats = Some(client);
        Ok(())
    }

    pub(super) async fn collector(&self, job: &Job) -> Result<(), String> {
        let address = job.target.clone();
        let payload = job.message.clone();
        self.attempt("datagram", || {
            let address = address.clone();
            let payload = payload.clone();
            async move {
                let fatal = |e: String| SendError::Fatal(e);
                let addr = tokio::net::lookup_host(address.as_str())
                    .await
                    .map_err(|e| SendError::Retry {
                        after: None,
                        reason: format!("resolving {address}: {e}"),
                    })?
                    .next()
                    .ok_or_else(|| fatal(format!("{address}: no address")))?;
                let local = if addr.is_ipv4() {
                    "0.0.0.0:0"
                } else {
                    "[::]:0"
                };
                let sock = tokio::net::UdpSocket::bind(local)
                    .await
                    .map_err(|e| fatal(format!("binding a UDP socket: {e}")))?;
                sock.send_to(payload.as_bytes(), addr)
                    .await
                    .map_err(|e| SendError::Retry {
                        after: None,
                        reason: format!("sending to {address}: {e}"),
                    })?;
                Ok(())
            }
        })
        .await
    }
}
