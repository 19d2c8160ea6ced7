//! OTLP traces: one span per decision (domain, descriptor count, result) with a child span
//! per store call, exported over OTLP/HTTP (protobuf) or OTLP/gRPC. The standard
//! `OTEL_EXPORTER_OTLP_*` variables (endpoint, headers, timeout) are read by the exporter.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use opentelemetry::trace::{FutureExt, Span, SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue, global};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
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

/// Runs `fut` inside a server span named `name` carrying `domain`; `ok` tells from the
/// result whether the span ends in error. With tracing off (`enabled` false, upstream's
/// `TRACING_ENABLED`) it just runs `fut`: even OpenTelemetry's no-op tracer cost each
/// decision a look-up of the global provider, the domain copied into an attribute, and a
/// context swapped in and out on every poll.
pub async fn in_span<T, E: std::fmt::Display>(
    enabled: bool,
    name: &'static str,
    domain: &str,
    descriptors: usize,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    if !enabled {
        return fut.await;
    }
    let tracer = global::tracer(TRACER);
    let span = tracer
        .span_builder(name)
        .with_kind(SpanKind::Server)
        .with_attributes([
            KeyValue::new("ratelimit.domain", domain.to_owned()),
            KeyValue::new("ratelimit.descriptors", descriptors as i64),
        ])
        .start(&tracer);
    let cx = Context::current_with_span(span);
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

    async fn get(&self, now: u64, keys: &[&str], out: &mut [u64]) -> Result<(), StoreError> {
        traced("store.get", keys.len(), self.0.get(now, keys, out)).await
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
