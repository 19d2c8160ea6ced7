//! The xDS client (`CONFIG_TYPE=GRPC_XDS_SOTW`): rules from a management server over the
//! aggregated discovery service, state of the world.
//!
//! One stream subscribes to every `RateLimitConfig` resource (wildcard: no resource names).
//! Each response is the complete configuration: its resources are converted to rule
//! documents and compiled together (`MERGE_DOMAIN_CONFIG` applies across resources), then
//! installed and ACKed (`version_info` and `response_nonce` of the response), or rejected
//! and NACKed (the last accepted `version_info`, the response's nonce, and the error text
//! in `error_detail.message`) with the previous rules still in force.
//!
//! The client never gives up: a failed connect is retried every
//! `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL`, a stream that breaks is reopened after
//! an exponential backoff (`XDS_CLIENT_BACKOFF_*`) that restarts from the initial interval
//! once a response arrives.

use std::collections::BTreeMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use prost::Message;
use ratelimit_core::RuleSet;
use ratelimit_core::config::{DescriptorConfig, Document, RateLimitConfig};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::app::App;
use crate::log::{self, Level};
use crate::pb::envoy::config::core::v3::Node;
use crate::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use crate::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use crate::pb::google::rpc::Status;
use crate::pb::ratelimit::config::ratelimit::v3 as rlconf;

/// The resource type this client subscribes to.
pub const TYPE_URL: &str = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/// gRPC's default limit on a received message, used when `XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES`
/// is 0.
const DEFAULT_MAX_MSG: usize = 4 << 20;

/// Where a CA bundle usually is when `CONFIG_GRPC_XDS_SERVER_TLS_CACERT` is not set.
const SYSTEM_CA_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// The reconnect schedule. `XDS_CLIENT_BACKOFF_RANDOM_FACTOR` is the growth factor, as in
/// upstream: attempt `n` waits `initial * factor^n`, capped at the maximum and never below
/// the initial interval (so upstream's default factor 0.5 waits the initial interval every
/// time); with jitter the wait is drawn uniformly between the initial interval and that.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// `XDS_CLIENT_BACKOFF_INITIAL_INTERVAL`
    pub initial: Duration,
    /// `XDS_CLIENT_BACKOFF_MAX_INTERVAL`
    pub max: Duration,
    /// `XDS_CLIENT_BACKOFF_RANDOM_FACTOR`
    pub factor: f64,
    /// `XDS_CLIENT_BACKOFF_JITTER`
    pub jitter: bool,
}

impl Backoff {
    /// The wait before reconnect attempt `attempt` (0-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let min = self.initial.as_secs_f64();
        let max = self.max.as_secs_f64().max(min);
        let mut d = min * self.factor.powi(attempt.min(1024) as i32);
        if !d.is_finite() || d > max {
            d = max;
        }
        if self.jitter && d > min {
            d = min + random_unit() * (d - min);
        }
        Duration::from_secs_f64(d.clamp(min, max))
    }
}

/// A number in [0, 1); quality only matters for spreading a fleet's reconnects.
fn random_unit() -> f64 {
    static N: AtomicU64 = AtomicU64::new(0);
    let r = RandomState::new().hash_one(N.fetch_add(1, Relaxed));
    (r >> 11) as f64 / (1u64 << 53) as f64
}

/// The xDS client, ready to run.
pub struct Client {
    app: Arc<App>,
    endpoint: Endpoint,
    target: String,
    headers: MetadataMap,
    node: Node,
    backoff: Backoff,
    max_msg: usize,
    loaded: watch::Sender<bool>,
}

impl Client {
    /// Checks the settings and reads the TLS files; every problem here stops the server at
    /// start. `loaded` turns true after the first configuration is installed.
    pub fn new(app: Arc<App>, loaded: watch::Sender<bool>) -> Result<Client, String> {
        let s = &app.settings;
        // Upstream takes `host:port`; a scheme is accepted, but TLS is what the TLS
        // setting says.
        let host_port = s
            .xds_server_url
            .split_once("://")
            .map_or(s.xds_server_url.as_str(), |(_, rest)| rest)
            .trim_end_matches('/');
        let target = format!(
            "{}://{host_port}",
            if s.xds_use_tls { "https" } else { "http" }
        );
        let mut endpoint = Endpoint::from_shared(target.clone())
            .map_err(|e| format!("CONFIG_GRPC_XDS_SERVER_URL {:?}: {e}", s.xds_server_url))?
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            // Notices a management server that vanished without closing the connection.
            // TCP keepalive rather than HTTP/2 pings: grpc-go servers (go-control-plane)
            // answer pings more frequent than every 5 minutes with GOAWAY.
            .tcp_keepalive(Some(Duration::from_secs(60)));
        if s.xds_use_tls {
            endpoint = endpoint
                .tls_config(client_tls(&app)?)
                .map_err(|e| format!("xDS TLS: {e}"))?;
        }
        let mut headers = MetadataMap::new();
        for (k, v) in &s.xds_additional_headers {
            let key = AsciiMetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes()).map_err(
                |_| format!("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: {k:?} is not a valid header name"),
            )?;
            let value = AsciiMetadataValue::try_from(v.as_str()).map_err(|_| {
                format!(
                    "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: the value of {k:?} is not a valid header value"
                )
            })?;
            headers.append(key, value);
        }
        let metadata = (!s.xds_node_metadata.is_empty()).then(|| prost_types::Struct {
            fields: s
                .xds_node_metadata
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        prost_types::Value {
                            kind: Some(prost_types::value::Kind::StringValue(v.clone())),
                        },
                    )
                })
                .collect::<BTreeMap<_, _>>(),
        });
        let node = Node {
            id: s.xds_node_id.clone(),
            metadata,
            ..Node::default()
        };
        let backoff = Backoff {
            initial: s.xds_backoff_initial,
            max: s.xds_backoff_max,
            factor: s.xds_backoff_factor,
            jitter: s.xds_backoff_jitter,
        };
        let max_msg = if s.xds_max_msg_size == 0 {
            DEFAULT_MAX_MSG
        } else {
            s.xds_max_msg_size
        };
        Ok(Client {
            app: app.clone(),
            endpoint,
            target,
            headers,
            node,
            backoff,
            max_msg,
            loaded,
        })
    }

    /// Connects, follows the stream, reconnects; forever.
    pub async fn run(self) {
        let mut attempt = 0u32;
        let mut last_acked = String::new();
        loop {
            let channel = loop {
                match self.endpoint.connect().await {
                    Ok(c) => break c,
                    Err(e) => {
                        let wait = self.app.settings.xds_connect_retry_interval;
                        log::log(
                            Level::Warn,
                            &format!(
                                "cannot connect to the xDS server {}: {}; retrying in {wait:?}",
                                self.target,
                                error_chain(&e)
                            ),
                        );
                        tokio::time::sleep(wait).await;
                    }
                }
            };
            let e = self.session(channel, &mut attempt, &mut last_acked).await;
            let wait = self.backoff.delay(attempt);
            attempt = attempt.saturating_add(1);
            log::log(
                Level::Warn,
                &format!(
                    "xDS stream to {} ended: {e}; reconnecting in {wait:?}",
                    self.target
                ),
            );
            tokio::time::sleep(wait).await;
        }
    }

    fn request(&self, version: String, nonce: String, error: Option<String>) -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: version,
            node: Some(self.node.clone()),
            resource_names: Vec::new(),
            type_url: TYPE_URL.to_owned(),
            response_nonce: nonce,
            error_detail: error.map(|message| Status {
                // Upstream leaves the code at 0; INVALID_ARGUMENT says what happened.
                code: tonic::Code::InvalidArgument as i32,
                message,
                details: Vec::new(),
            }),
        }
    }

    /// One stream, until it breaks. Returns why it ended.
    async fn session(
        &self,
        channel: Channel,
        attempt: &mut u32,
        last_acked: &mut String,
    ) -> String {
        let (tx, rx) = mpsc::channel(4);
        if tx
            .send(self.request(String::new(), String::new(), None))
            .await
            .is_err()
        {
            return "cannot queue the first request".into();
        }
        let mut req = tonic::Request::new(ReceiverStream::new(rx));
        *req.metadata_mut() = self.headers.clone();
        let mut client =
            AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(self.max_msg);
        let mut inbound = match client.stream_aggregated_resources(req).await {
            Ok(r) => r.into_inner(),
            Err(s) => return status_text(&s),
        };
        log::log(Level::Info, &format!("xDS stream to {} open", self.target));
        loop {
            let resp = match inbound.message().await {
                Ok(Some(r)) => r,
                Ok(None) => return "closed by the server".into(),
                Err(s) => return status_text(&s),
            };
            // A response proves the server is back: the next failure starts the backoff
            // from the initial interval again.
            *attempt = 0;
            let next = match self.apply(&resp) {
                Ok(()) => {
                    last_acked.clone_from(&resp.version_info);
                    self.request(resp.version_info.clone(), resp.nonce.clone(), None)
                }
                Err(e) => self.request(last_acked.clone(), resp.nonce.clone(), Some(e)),
            };
            if tx.send(next).await.is_err() {
                return "the request stream closed".into();
            }
        }
    }

    /// Converts, compiles and installs one response; the error text goes into the NACK.
    fn apply(&self, resp: &DiscoveryResponse) -> Result<(), String> {
        let source = format!("xDS version {:?}", resp.version_info);
        let outcome = if resp.type_url != TYPE_URL {
            Err(format!(
                "unexpected type_url {:?}, expected {TYPE_URL}",
                resp.type_url
            ))
        } else {
            documents_from_resources(&resp.resources).and_then(|docs| {
                RuleSet::compile(
                    &docs,
                    self.app.settings.merge_domain_config,
                    self.app.limiter.stats(),
                )
                .map_err(|e| e.to_string())
            })
        };
        let err = outcome.as_ref().err().cloned();
        if super::install(&self.app, &source, outcome) {
            self.loaded.send_replace(true);
        }
        err.map_or(Ok(()), Err)
    }
}

fn client_tls(app: &App) -> Result<ClientTlsConfig, String> {
    let s = &app.settings;
    let ca_path = if s.xds_server_tls_cacert.is_empty() {
        SYSTEM_CA_BUNDLES
            .into_iter()
            .find(|p| std::path::Path::new(p).is_file())
            .ok_or("CONFIG_GRPC_XDS_SERVER_USE_TLS=true needs CONFIG_GRPC_XDS_SERVER_TLS_CACERT (no system CA bundle found)")?
    } else {
        s.xds_server_tls_cacert.as_str()
    };
    let ca = std::fs::read(ca_path)
        .map_err(|e| format!("cannot read the xDS server CA {ca_path}: {e}"))?;
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
    if !s.xds_server_tls_san.is_empty() {
        tls = tls.domain_name(s.xds_server_tls_san.clone());
    }
    match (
        s.xds_client_tls_cert.is_empty(),
        s.xds_client_tls_key.is_empty(),
    ) {
        (true, true) => {}
        (false, false) => {
            let cert = std::fs::read(&s.xds_client_tls_cert).map_err(|e| {
                format!(
                    "cannot read the xDS client certificate {}: {e}",
                    s.xds_client_tls_cert
                )
            })?;
            let key = std::fs::read(&s.xds_client_tls_key).map_err(|e| {
                format!(
                    "cannot read the xDS client key {}: {e}",
                    s.xds_client_tls_key
                )
            })?;
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        _ => {
            return Err(
                "CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY must be set together"
                    .into(),
            );
        }
    }
    Ok(tls)
}

fn status_text(s: &tonic::Status) -> String {
    format!("{:?}: {}", s.code(), s.message())
}

/// The causes of a transport error ("transport error" alone says nothing).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cur = c.source();
    }
    out
}

/// Decodes every resource of a response into a rule document.
pub fn documents_from_resources(resources: &[prost_types::Any]) -> Result<Vec<Document>, String> {
    resources
        .iter()
        .enumerate()
        .map(|(i, any)| {
            if any.type_url != TYPE_URL {
                return Err(format!(
                    "resource {i}: unexpected type_url {:?}, expected {TYPE_URL}",
                    any.type_url
                ));
            }
            let cfg = rlconf::RateLimitConfig::decode(any.value.as_slice())
                .map_err(|e| format!("resource {i}: cannot decode RateLimitConfig: {e}"))?;
            Ok(document_from_pb(i, cfg))
        })
        .collect()
}

/// One `RateLimitConfig` as a rule document, field for field. `value_to_metric` and
/// `share_threshold` do not exist in the proto and stay off. The resource's `name` takes
/// the place of the file name in error messages (`resource <i>` when it is empty).
pub fn document_from_pb(index: usize, cfg: rlconf::RateLimitConfig) -> Document {
    Document {
        name: if cfg.name.is_empty() {
            format!("resource {index}")
        } else {
            cfg.name
        },
        domain: cfg.domain,
        descriptors: cfg
            .descriptors
            .into_iter()
            .map(descriptor_from_pb)
            .collect(),
    }
}

fn descriptor_from_pb(d: rlconf::RateLimitDescriptor) -> DescriptorConfig {
    DescriptorConfig {
        key: d.key,
        value: d.value,
        rate_limit: d.rate_limit.map(|p| RateLimitConfig {
            // The enum's name, as upstream's converter writes it into YAML: `UNKNOWN` is
            // then "no unit", which only an unlimited rule may have.
            unit: rlconf::RateLimitUnit::try_from(p.unit)
                .map_or_else(|_| p.unit.to_string(), |u| u.as_str_name().to_owned()),
            requests_per_unit: p.requests_per_unit,
            unlimited: p.unlimited,
            name: p.name,
            replaces: p.replaces.into_iter().map(|r| r.name).collect(),
            // Upstream's proto has no fields for the algorithm extensions: they are
            // file-only (docs/algorithms.md).
            ..RateLimitConfig::default()
        }),
        rate_limits: None,
        descriptors: d.descriptors.into_iter().map(descriptor_from_pb).collect(),
        shadow_mode: d.shadow_mode,
        quota_mode: d.quota_mode,
        detailed_metric: d.detailed_metric,
        value_to_metric: false,
        share_threshold: false,
        metadata: d.metadata.map(|s| struct_to_json(&s)),
    }
}

fn struct_to_json(s: &prost_types::Struct) -> serde_json::Map<String, serde_json::Value> {
    s.fields
        .iter()
        .map(|(k, v)| (k.clone(), value_to_json(v)))
        .collect()
}

fn value_to_json(v: &prost_types::Value) -> serde_json::Value {
    use prost_types::value::Kind;
    match &v.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => serde_json::Value::Bool(*b),
        // Whole numbers print as integers, as they do from YAML rules (and in protojson).
        Some(Kind::NumberValue(n)) if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 => {
            serde_json::Value::from(*n as i64)
        }
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(*n)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Some(Kind::StringValue(s)) => serde_json::Value::String(s.clone()),
        Some(Kind::StructValue(s)) => serde_json::Value::Object(struct_to_json(s)),
        Some(Kind::ListValue(l)) => {
            serde_json::Value::Array(l.values.iter().map(value_to_json).collect())
        }
    }
}

#[cfg(test)]
mod tests;
