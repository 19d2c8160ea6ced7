//! The [`tower_service::Service`] the layer wraps around a service, and its future.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::HeaderMap;
use pin_project_lite::pin_project;
use ratelimit_core::{Clock, CounterStore};
use tower_service::Service;

use crate::decision::{Step, Verdict};
use crate::settings::Shared;

/// A service behind a rate limit; made by [`crate::RateLimitLayer`].
pub struct RateLimitService<Svc, S, C> {
    inner: Svc,
    shared: Arc<Shared<S, C>>,
}

impl<Svc: Clone, S, C> Clone for RateLimitService<Svc, S, C> {
    fn clone(&self) -> Self {
        RateLimitService {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<Svc, S, C> RateLimitService<Svc, S, C> {
    pub(crate) fn new(inner: Svc, shared: Arc<Shared<S, C>>) -> Self {
        RateLimitService { inner, shared }
    }
}

type Boxed<B, E> = Pin<Box<dyn Future<Output = Result<http::Response<B>, E>> + Send>>;

impl<Svc, S, C, ReqB, ResB> Service<http::Request<ReqB>> for RateLimitService<Svc, S, C>
where
    Svc: Service<http::Request<ReqB>, Response = http::Response<ResB>> + Clone + Send + 'static,
    Svc::Future: Send + 'static,
    ReqB: Send + 'static,
    ResB: Default + Send + 'static,
    S: CounterStore + 'static,
    C: Clock + 'static,
{
    type Response = http::Response<ResB>;
    type Error = Svc::Error;
    type Future = ResponseFuture<Svc::Future, ResB, Svc::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    // Not inlined: the caller's wrapper future (axum's) then receives ours in place instead
    // of through a copy of a few hundred bytes.
    #[inline(never)]
    fn call(&mut self, req: http::Request<ReqB>) -> Self::Future {
        let headers = match self.shared.decide_now(&req) {
            Step::Done(Verdict::Pass) => None,
            Step::Done(Verdict::Allow(h)) => Some(h),
            Step::Done(Verdict::Deny(resp)) => {
                return ResponseFuture {
                    state: State::Ready {
                        response: Some(resp),
                    },
                };
            }
            Step::Later(creq) => {
                // The ready service goes into the future, which calls it once decided; a
                // clone stays for the next `poll_ready`.
                let clone = self.inner.clone();
                let mut inner = std::mem::replace(&mut self.inner, clone);
                let shared = self.shared.clone();
                let fut = Box::pin(async move {
                    match shared.decide_later(&creq, req.headers()).await {
                        Verdict::Pass => inner.call(req).await,
                        Verdict::Allow(h) => {
                            let mut resp = inner.call(req).await?;
                            add_headers(&mut resp, *h);
                            Ok(resp)
                        }
                        Verdict::Deny(resp) => Ok(*resp),
                    }
                });
                return ResponseFuture {
                    state: State::Deciding { fut },
                };
            }
        };
        // Decided: the service polled ready takes the request now, from one call site so
        // the request is moved once.
        let state = State::Calling {
            fut: self.inner.call(req),
            headers,
        };
        ResponseFuture { state }
    }
}

fn add_headers<B>(resp: &mut http::Response<B>, headers: HeaderMap) {
    // Ours replace any the service set: the limiter knows the limit.
    resp.headers_mut().extend(headers);
}

pin_project! {
    /// The future of [`RateLimitService`]: the inner service's response (with the rate limit
    /// headers added), or the denial.
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        state: State<F, B, E>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B, E> {
        // Decided during the call: the inner service is answering. The headers are boxed:
        // a `HeaderMap` is ~100 bytes, which every future would carry and frameworks move
        // (axum boxes each), headers or not.
        Calling { #[pin] fut: F, headers: Option<Box<HeaderMap>> },
        // Denied during the call.
        Ready { response: Option<Box<http::Response<B>>> },
        // Awaiting the store, then the inner service.
        Deciding { fut: Boxed<B, E> },
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<http::Response<B>, E>>,
{
    type Output = Result<http::Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Calling { fut, headers } => {
                // Nothing to add (the usual case): the answer is handed on without a move.
                let Some(h) = headers.take() else {
                    return fut.poll(cx);
                };
                match fut.poll(cx) {
                    Poll::Ready(Ok(mut resp)) => {
                        add_headers(&mut resp, *h);
                        Poll::Ready(Ok(resp))
                    }
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => {
                        *headers = Some(h);
                        Poll::Pending
                    }
                }
            }
            StateProj::Ready { response } => {
                Poll::Ready(Ok(*response.take().expect("polled after it completed")))
            }
            StateProj::Deciding { fut } => fut.as_mut().poll(cx),
        }
    }
}
