//! OTLP traces: one span per decision (domain, descriptor count, result) with a child span
//! per store call, exported over OTLP/HTTP (protobuf) or OTLP/gRPC. The standard
//! `OTEL_EXPORTER_OTLP_*` variables (endpoint, headers, timeout) are read by the exporter.
//! A decision's span continues the caller's trace (W3C trace context, baggage, B3).

pub mod b3;

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    FutureExt, Span, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer,
};
use opentelemetry::{Context, KeyValue, global};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::{Sampler, SamplingDecision, SdkTracerProvider, ShouldSample};
use ratelimit_core::{CounterStore, Increment, StoreError};

const TRACER: &str = "ratelimit";

/// `TRACING_*` settings.
#[derive(Debug, Clone)]
pub struct TracingSettings {
    /// `TRACING_ENABLED`
    pub enabled: bool,
    /// `TRACING_EXPORTER_PROTOCOL`: `http` or `grpc`.
    pub grpc: bool,
    /// `TRACING_SERVICE_NAME` (RateLimit)
    pub service_name: String,
    /// `TRACING_SERVICE_NAMESPACE`
    pub service_namespace: String,
    /// `TRACING_SERVICE_INSTANCE_ID` (a random UUID by default)
    pub instance_id: String,
    /// `TRACING_SAMPLING_RATE` (0..=1)
    pub sampling_rate: f64,
}

/// Installs the global tracer provider; keep the returned provider and call `shutdown`
/// on it at exit so buffered spans are sent.
pub fn init(s: &TracingSettings) -> Result<SdkTracerProvider, String> {
    let exporter = if s.grpc {
        opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_timeout(Duration::from_secs(5))
            .build()
    } else {
        opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_timeout(Duration::from_secs(5))
            .build()
    }
    .map_err(|e| format!("OTLP exporter: {e}"))?;
    let mut attrs = vec![KeyValue::new("service.instance.id", s.instance_id.clone())];
    if !s.service_namespace.is_empty() {
        attrs.push(KeyValue::new(
            "service.namespace",
            s.service_namespace.clone(),
        ));
    }
    let resource = Resource::builder()
        .with_service_name(s.service_name.clone())
        .with_attributes(attrs)
        .build();
    // The exporters' HTTP and gRPC clients need the tokio runtime, so the batch processor
    // runs as a task on it rather than on the SDK's own thread.
    let processor =
        opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            exporter,
            opentelemetry_sdk::runtime::Tokio,
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            s.sampling_rate,
        ))))
        .with_resource(resource)
        .build();
    global::set_tracer_provider(provider.clone());
    Ok(provider)
}

/// What a decision's span hangs from: nothing at all with tracing off, else the caller's
/// trace context (an empty one, so a root span, when the caller sent none that parses).
pub struct SpanParent(Option<Context>);

impl SpanParent {
    /// Whether tracing is off, so a decision opens no span.
    pub fn is_off(&self) -> bool {
        self.0.is_none()
    }

    /// Reads `traceparent`/`tracestate` and `baggage`, then B3 (the single `b3` header, else
    /// the `X-B3-*` headers); a usable B3 context replaces a W3C one, as upstream's composite
    /// propagator (trace context, baggage, B3, in that order) does. Baggage rides along in
    /// the context and becomes no span attribute, as upstream's. With tracing off nothing
    /// is read, so decisions pay nothing for this.
    pub fn from_headers(s: &TracingSettings, headers: &http::HeaderMap) -> Self {
        if !s.enabled {
            return SpanParent(None);
        }
        let carrier = Headers(headers);
        let cx = TraceContextPropagator::new().extract_with_context(&Context::new(), &carrier);
        let cx = BaggagePropagator::new().extract_with_context(&cx, &carrier);
        let b3 = match carrier.get("b3") {
            Some(v) => b3::parse_single(v),
            None => None,
        }
        .or_else(|| {
            b3::parse_multi(
                carrier.get("x-b3-traceid"),
                carrier.get("x-b3-spanid"),
                carrier.get("x-b3-parentspanid"),
                carrier.get("x-b3-sampled"),
                carrier.get("x-b3-flags"),
            )
        });
        let cx = match b3 {
            Some(b) => cx.with_remote_span_context(b3_span_context(b, s.sampling_rate)),
            None => cx,
        };
        SpanParent(Some(cx))
    }
}

/// A B3 context as OpenTelemetry's. A deferred sampling decision is ours to make: the
/// same trace id ratio our root spans get, so that the parent-based sampler then follows
/// it.
fn b3_span_context(b: b3::B3, sampling_rate: f64) -> SpanContext {
    let trace_id = TraceId::from(b.trace_id);
    let sampled = b.sampled.unwrap_or_else(|| {
        let r = Sampler::TraceIdRatioBased(sampling_rate).should_sample(
            None,
            trace_id,
            "",
            &SpanKind::Server,
            &[],
            &[],
        );
        r.decision == SamplingDecision::RecordAndSample
    });
    let flags = if sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    SpanContext::new(
        trace_id,
        SpanId::from(b.span_id),
        flags,
        true,
        TraceState::NONE,
    )
}

/// gRPC metadata and HTTP headers as a propagator's carrier; values that are not visible
/// ASCII count as absent.
struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Runs `fut` inside a server span named `name` carrying `domain`, a child of `parent`;
/// the result tells whether the span ends in error. With tracing off (`parent` from
/// settings with upstream's `TRACING_ENABLED` false) it just runs `fut`: even
/// OpenTelemetry's no-op tracer cost each decision a look-up of the global provider, the
/// domain copied into an attribute, and a context swapped in and out on every poll.
pub async fn in_span<T, E: std::fmt::Display>(
    parent: SpanParent,
    name: &'static str,
    domain: &str,
    descriptors: usize,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let Some(parent) = parent.0 else {
        return fut.await;
    };
    let tracer = global::tracer(TRACER);
    let span = tracer
        .span_builder(name)
        .with_kind(SpanKind::Server)
        .with_attributes([
            KeyValue::new("ratelimit.domain", domain.to_owned()),
            KeyValue::new("ratelimit.descriptors", descriptors as i64),
        ])
        .start_with_context(&tracer, &parent);
    let cx = parent.with_span(span);
    let r = fut.with_context(cx.clone()).await;
    let span = cx.span();
    if let Err(e) = &r {
        span.set_status(Status::error(e.to_string()));
    }
    span.end();
    r
}

/// A store wrapper that opens a child span for each store call, so traces show how much of
/// a decision the store took.
pub struct TracedStore<S>(pub S);

async fn traced<T>(
    op: &'static str,
    keys: usize,
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let tracer = global::tracer(TRACER);
    let mut span = tracer
        .span_builder(op)
        .with_kind(SpanKind::Client)
        .with_attributes([KeyValue::new("ratelimit.store.keys", keys as i64)])
        .start(&tracer);
    let r = fut.await;
    if let Err(e) = &r {
        span.set_status(Status::error(e.message.clone()));
    }
    span.end();
    r
}

#[async_trait]
impl<S: CounterStore> CounterStore for TracedStore<S> {
    async fn increment(
        &self,
        now: u64,
        batch: &[Increment],
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        traced(
            "store.increment",
            batch.len(),
            self.0.increment(now, batch, counts),
        )
        .await
    }

    async fn get(&self, now: u64, batch: &[Increment], out: &mut [u64]) -> Result<(), StoreError> {
        traced("store.get", batch.len(), self.0.get(now, batch, out)).await
    }

    async fn refund(&self, now: u64, batch: &[Increment]) -> Result<(), StoreError> {
        traced("store.refund", batch.len(), self.0.refund(now, batch)).await
    }

    fn healthy(&self) -> bool {
        self.0.healthy()
    }
}

/// A random version 4 UUID, without a crate for it.
pub fn random_uuid() -> String {
    use std::hash::BuildHasher;
    let r = std::collections::hash_map::RandomState::new();
    let a = r.hash_one(std::time::SystemTime::now());
    let b = r.hash_one(std::process::id());
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..].copy_from_slice(&b.to_le_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let h: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}
