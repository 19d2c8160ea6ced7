//! The layer and its builder: which limiter, which descriptors, what a denial and a
//! failure look like.

use std::sync::Arc;

use http::StatusCode;
use ratelimit_core::{Clock, CounterStore, Error, Limiter};

use crate::actions::{Action, Descriptors};
use crate::client::ClientAddress;
use crate::headers::HeaderStyle;
use crate::service::RateLimitService;
use crate::settings::{BuildError, ErrorHook, FailureMode, Shared};

/// A [`tower_layer::Layer`] that rate limits `http::Request`s with a shared
/// [`Limiter`]. Cloning it is cheap; one limiter may serve several layers (one per
/// route, each with its own descriptors).
pub struct RateLimitLayer<S, C> {
    shared: Arc<Shared<S, C>>,
}

impl<S, C> Clone for RateLimitLayer<S, C> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            shared: self.shared.clone(),
        }
    }
}

impl<Svc, S, C> tower_layer::Layer<Svc> for RateLimitLayer<S, C> {
    type Service = RateLimitService<Svc, S, C>;

    fn layer(&self, inner: Svc) -> Self::Service {
        RateLimitService::new(inner, self.shared.clone())
    }
}

impl<S: CounterStore + 'static, C: Clock + 'static> RateLimitLayer<S, C> {
    /// Starts a layer that asks `limiter` about `domain`.
    pub fn builder(limiter: Arc<Limiter<S, C>>, domain: impl Into<String>) -> LayerBuilder<S, C> {
        LayerBuilder {
            limiter,
            domain: domain.into(),
            descriptors: Descriptors::default(),
            client: ClientAddress::default(),
            headers: HeaderStyle::None,
            shadow_mode: false,
            failure_mode: FailureMode::Open,
            status_on_error: StatusCode::INTERNAL_SERVER_ERROR,
            on_error: None,
        }
    }

    /// The limiter, for reloading rules or reading statistics.
    pub fn limiter(&self) -> &Arc<Limiter<S, C>> {
        &self.shared.limiter
    }
}

/// Builds a [`RateLimitLayer`]; see [`RateLimitLayer::builder`].
pub struct LayerBuilder<S, C> {
    limiter: Arc<Limiter<S, C>>,
    domain: String,
    descriptors: Descriptors,
    client: ClientAddress,
    headers: HeaderStyle,
    shadow_mode: bool,
    failure_mode: FailureMode,
    status_on_error: StatusCode,
    on_error: Option<ErrorHook>,
}

impl<S: CounterStore + 'static, C: Clock + 'static> LayerBuilder<S, C> {
    /// Adds a descriptor: one entry per action, in order (an Envoy route's
    /// `rate_limits` entry). Call it again for more descriptors per request.
    pub fn descriptor(mut self, actions: impl IntoIterator<Item = Action>) -> Self {
        self.descriptors.push(actions.into_iter().collect());
        self
    }

    /// Trusts `hops` proxies in front of the service to append the client to
    /// `X-Forwarded-For` (Envoy's `xff_num_trusted_hops`); 0, the default, ignores it.
    pub fn xff_trusted_hops(mut self, hops: u32) -> Self {
        self.client.trusted_hops = hops;
        self
    }

    /// Reads `X-Forwarded-For` only from peers in these networks (e.g. `10.0.0.0/8`).
    pub fn trusted_proxies(mut self, nets: impl IntoIterator<Item = ipnet::IpNet>) -> Self {
        self.client.trusted_proxies = nets.into_iter().collect();
        self
    }

    /// How the client address is found, all at once.
    pub fn client_address(mut self, client: ClientAddress) -> Self {
        self.client = client;
        self
    }

    /// Which rate limit headers responses carry.
    pub fn headers(mut self, style: HeaderStyle) -> Self {
        self.headers = style;
        self
    }

    /// Decides and counts, but never denies: for trying rules on real traffic.
    pub fn shadow_mode(mut self, on: bool) -> Self {
        self.shadow_mode = on;
        self
    }

    /// What happens when the limiter cannot decide.
    pub fn failure_mode(mut self, mode: FailureMode) -> Self {
        self.failure_mode = mode;
        self
    }

    /// The status of a request refused in [`FailureMode::Closed`] (default 500).
    pub fn status_on_error(mut self, status: StatusCode) -> Self {
        self.status_on_error = status;
        self
    }

    /// Called with every error the limiter returns, whatever the failure mode.
    pub fn on_error(mut self, hook: impl Fn(&Error) + Send + Sync + 'static) -> Self {
        self.on_error = Some(Arc::new(hook));
        self
    }

    /// The layer; an error when it would limit nothing (no descriptor, or an empty
    /// domain).
    pub fn build(self) -> Result<RateLimitLayer<S, C>, BuildError> {
        if self.domain.is_empty() {
            return Err(BuildError::new("the domain must not be empty"));
        }
        if self.descriptors.is_empty() {
            return Err(BuildError::new(
                "no descriptor: add one with LayerBuilder::descriptor",
            ));
        }
        Ok(RateLimitLayer {
            shared: Arc::new(Shared {
                id: crate::settings::next_id(),
                limiter: self.limiter,
                domain: self.domain,
                descriptors: self.descriptors,
                client: self.client,
                headers: self.headers,
                shadow_mode: self.shadow_mode,
                failure_mode: self.failure_mode,
                status_on_error: self.status_on_error,
                on_error: self.on_error,
            }),
        })
    }
}
