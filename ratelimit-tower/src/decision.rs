//! From a request to a verdict: descriptors, the limiter, and what the answer means for
//! the response (pass, pass with headers, or a denial built here).
//!
//! On a store that counts in process (the memory store) the decision is taken during
//! `call`, into a request and response kept per thread, so that a steady stream of
//! requests allocates nothing for the core's types; other stores are awaited.

use std::cell::RefCell;

use http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{HeaderMap, StatusCode};
use ratelimit_core::{Clock, Code, CounterStore, Error, Request, Response};

use crate::client::peer_addr;
use crate::headers::{self, HeaderStyle};
use crate::matcher::RequestInfo;
use crate::settings::{FailureMode, Shared};

/// What the layer does with a request.
pub(crate) enum Verdict<B> {
    /// Hand it on; nothing to add.
    Pass,
    /// Hand it on; add these headers to its response.
    Allow(Box<HeaderMap>),
    /// Answer it with this response instead.
    Deny(Box<http::Response<B>>),
}

/// A verdict now, or the core request to decide by awaiting the store. The rare variants
/// are boxed so that the usual answer (pass) comes back in registers.
pub(crate) enum Step<B> {
    Done(Verdict<B>),
    Later(Box<Request>),
}

/// The core request and response of a thread's last in-process decision, whose strings
/// and vectors the next one reuses.
#[derive(Default)]
struct Scratch {
    req: Request,
    resp: Response,
    /// The layer ([`Shared::id`]) whose domain `req` holds; 0: none.
    domain_of: u64,
}

thread_local! {
    /// Empty until first use, so that the key can be `const`-initialised, which is cheaper
    /// to reach than a lazily initialised one.
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

impl<S: CounterStore + 'static, C: Clock + 'static> Shared<S, C> {
    fn info<'a, B>(&self, req: &'a http::Request<B>) -> RequestInfo<'a> {
        let client = if self.descriptors.needs_client() {
            self.client
                .resolve(peer_addr(req.extensions()), req.headers())
        } else {
            None
        };
        RequestInfo {
            method: req.method(),
            uri: req.uri(),
            headers: req.headers(),
            extensions: req.extensions(),
            client,
        }
    }

    /// Decides `req` during the call when the store allows it.
    pub(crate) fn decide_now<ReqB, ResB: Default>(&self, req: &http::Request<ReqB>) -> Step<ResB> {
        let info = self.info(req);
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => {
                self.decide_into(&info, scratch.get_or_insert_with(Default::default))
            }
            // Only if a custom action ran a request through a layer of its own.
            Err(_) => self.decide_into(&info, &mut Scratch::default()),
        })
    }

    fn decide_into<ResB: Default>(&self, info: &RequestInfo<'_>, s: &mut Scratch) -> Step<ResB> {
        let (creq, cresp) = (&mut s.req, &mut s.resp);
        // The same layer on this thread as last time (the usual case) left its domain there.
        if s.domain_of != self.id {
            creq.domain.clear();
            creq.domain.push_str(&self.domain);
            s.domain_of = self.id;
        }
        creq.hits_addend = 0;
        if self.descriptors.fill(info, creq) == 0 {
            return Step::Done(Verdict::Pass);
        }
        match self.limiter.should_rate_limit_now_into(creq, cresp) {
            None => Step::Later(Box::new(creq.clone())),
            Some(Ok(())) => Step::Done(self.verdict(cresp, info.headers)),
            Some(Err(e)) => Step::Done(self.failed(&e, info.headers)),
        }
    }

    /// Decides a request the store must be awaited for.
    pub(crate) async fn decide_later<ResB: Default>(
        &self,
        creq: &Request,
        headers: &HeaderMap,
    ) -> Verdict<ResB> {
        match self.limiter.should_rate_limit(creq).await {
            Ok(resp) => self.verdict(&resp, headers),
            Err(e) => self.failed(&e, headers),
        }
    }

    /// What `resp` means for a request with `headers` (read only to answer a denial in
    /// the caller's protocol).
    #[inline]
    fn verdict<ResB: Default>(&self, resp: &Response, headers: &HeaderMap) -> Verdict<ResB> {
        let denied = resp.overall_code == Code::OverLimit && !self.shadow_mode;
        if !denied && self.headers == HeaderStyle::None {
            return Verdict::Pass;
        }
        self.answer(resp, headers, denied)
    }

    /// The verdict of a denial, or of a pass with headers.
    #[inline(never)]
    fn answer<ResB: Default>(
        &self,
        resp: &Response,
        headers: &HeaderMap,
        denied: bool,
    ) -> Verdict<ResB> {
        let bound = headers::binding(resp);
        if denied {
            let mut h = HeaderMap::new();
            match bound {
                Some((status, limit)) => headers::write(self.headers, status, limit, true, &mut h),
                None => {
                    h.insert(RETRY_AFTER, HeaderValue::from_static("1"));
                }
            }
            return Verdict::Deny(Box::new(denial(
                StatusCode::TOO_MANY_REQUESTS,
                RESOURCE_EXHAUSTED,
                is_grpc(headers),
                h,
            )));
        }
        match bound {
            Some((status, limit)) if self.headers != HeaderStyle::None => {
                let mut h = HeaderMap::new();
                headers::write(self.headers, status, limit, false, &mut h);
                Verdict::Allow(Box::new(h))
            }
            _ => Verdict::Pass,
        }
    }

    #[cold]
    fn failed<ResB: Default>(&self, e: &Error, headers: &HeaderMap) -> Verdict<ResB> {
        if let Some(hook) = &self.on_error {
            hook(e);
        }
        match self.failure_mode {
            FailureMode::Open => Verdict::Pass,
            FailureMode::Closed => Verdict::Deny(Box::new(denial(
                self.status_on_error,
                UNAVAILABLE,
                is_grpc(headers),
                HeaderMap::new(),
            ))),
        }
    }
}

/// gRPC's `RESOURCE_EXHAUSTED` and `UNAVAILABLE`, with the messages sent along.
const RESOURCE_EXHAUSTED: (&str, &str) = ("8", "rate limited");
const UNAVAILABLE: (&str, &str) = ("14", "rate limit unavailable");

/// Whether the caller speaks gRPC, and so reads the answer from `grpc-status`.
fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// A refusal: `status` with `headers` over HTTP; for gRPC callers a trailers-only
/// response (HTTP 200, the status in the headers) as gRPC requires, the headers going
/// along as metadata.
fn denial<B: Default>(
    status: StatusCode,
    (grpc_status, message): (&'static str, &'static str),
    grpc: bool,
    headers: HeaderMap,
) -> http::Response<B> {
    let mut resp = http::Response::new(B::default());
    *resp.headers_mut() = headers;
    if grpc {
        let h = resp.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        h.insert("grpc-status", HeaderValue::from_static(grpc_status));
        h.insert("grpc-message", HeaderValue::from_static(message));
    } else {
        *resp.status_mut() = status;
    }
    resp
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use http::{Request, Response, StatusCode};
    use tower::{Layer, Service, ServiceExt};

    use crate::{Action, PeerAddr, RateLimit, RateLimitLayer, Rules};

    fn status<S>(svc: &mut S) -> StatusCode
    where
        S: Service<Request<()>, Response = Response<String>, Error = std::convert::Infallible>,
    {
        let mut req = Request::new(());
        let peer = SocketAddr::from(([10, 0, 0, 1], 4000));
        req.extensions_mut().insert(PeerAddr(peer));
        futures_executor::block_on(async {
            let resp = svc.ready().await.unwrap().call(req).await;
            resp.unwrap().status()
        })
    }

    #[test]
    fn layers_sharing_a_thread_keep_their_own_domains() {
        let layer = |domain: &str, per_minute: u32| {
            let rules =
                Rules::new(domain).limit(["remote_address"], RateLimit::per_minute(per_minute));
            let limiter = Arc::new(crate::in_memory(rules).unwrap());
            let layer = RateLimitLayer::builder(limiter, domain)
                .descriptor([Action::remote_address()])
                .build()
                .unwrap();
            layer.layer(tower::service_fn(|_: Request<()>| async {
                Ok::<_, std::convert::Infallible>(Response::new(String::new()))
            }))
        };
        let (mut one, mut many) = (layer("one", 1), layer("many", 100));
        // Each limiter knows only its own domain: a request sent with the other layer's
        // would match no rule and pass.
        assert_eq!(status(&mut many), StatusCode::OK);
        assert_eq!(status(&mut one), StatusCode::OK);
        assert_eq!(status(&mut many), StatusCode::OK);
        assert_eq!(status(&mut one), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(status(&mut many), StatusCode::OK);
    }
}
