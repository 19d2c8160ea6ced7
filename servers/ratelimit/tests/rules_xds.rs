//! The xDS client against a management server written here with our generated ADS server
//! code: initial config, updates, NACKs, restarts with backoff, TLS and extra headers, and
//! the start gate.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message;
use prost_types::Any;
use ratelimit_server::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use ratelimit_server::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use ratelimit_server::pb::ratelimit::config::ratelimit::v3 as rlconf;
use ratelimit_server::provider::xds::TYPE_URL;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic::{Request, Response, Status, Streaming};

use crate::common::{Server, post_json, request_with, start_in, temp_dir};
use crate::rules_util::{VISIBLE, health_is, line, rlconfig, spawn, stat, within};

type Snapshot = Option<(String, Vec<Any>)>;

/// What the management server saw.
#[derive(Default)]
struct Seen {
    requests: Vec<DiscoveryRequest>,
    /// Each stream's opening time and headers.
    streams: Vec<(Instant, MetadataMap)>,
}

/// State shared by every incarnation of the management server.
#[derive(Clone)]
struct Mgmt {
    snapshot: Arc<watch::Sender<Snapshot>>,
    seen: Arc<Mutex<Seen>>,
    /// This many next streams are refused with UNAVAILABLE.
    refuse: Arc<AtomicU32>,
    nonce: Arc<AtomicU64>,
}

impl Mgmt {
    fn new(initial: Snapshot) -> Mgmt {
        Mgmt {
            snapshot: Arc::new(watch::Sender::new(initial)),
            seen: Arc::default(),
            refuse: Arc::default(),
            nonce: Arc::default(),
        }
    }

    fn publish(&self, version: &str, configs: Vec<rlconf::RateLimitConfig>) {
        let resources = configs
            .into_iter()
            .map(|c| Any {
                type_url: TYPE_URL.into(),
                value: c.encode_to_vec(),
            })
            .collect();
        self.snapshot
            .send_replace(Some((version.to_owned(), resources)));
    }

    fn requests(&self) -> Vec<DiscoveryRequest> {
        self.seen.lock().unwrap().requests.clone()
    }

    fn streams(&self) -> Vec<(Instant, MetadataMap)> {
        self.seen.lock().unwrap().streams.clone()
    }

    /// The request answering the response with `nonce`.
    fn reply_to(&self, nonce: &str) -> Option<DiscoveryRequest> {
        let deadline = Instant::now() + VISIBLE;
        loop {
            if let Some(r) = self
                .requests()
                .into_iter()
                .find(|r| r.response_nonce == nonce)
            {
                return Some(r);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn last_nonce(&self) -> String {
        self.nonce.load(Ordering::SeqCst).to_string()
    }
}

/// One incarnation of the server: its ADS streams end when it is stopped.
struct Incarnation {
    mgmt: Mgmt,
    stop: watch::Receiver<bool>,
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Incarnation {
    type StreamAggregatedResourcesStream = ReceiverStream<Result<DiscoveryResponse, Status>>;

    async fn stream_aggregated_resources(
        &self,
        req: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let m = self.mgmt.clone();
        m.seen
            .lock()
            .unwrap()
            .streams
            .push((Instant::now(), req.metadata().clone()));
        if m.refuse
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(Status::unavailable("not ready yet"));
        }
        let mut inbound = req.into_inner();
        let (tx, rx) = mpsc::channel(4);
        let mut snap = m.snapshot.subscribe();
        snap.mark_changed();
        let mut stop = self.stop.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    msg = inbound.message() => match msg {
                        Ok(Some(r)) => m.seen.lock().unwrap().requests.push(r),
                        _ => break,
                    },
                    changed = snap.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        let current = snap.borrow_and_update().clone();
                        if let Some((version, resources)) = current {
                            let nonce = m.nonce.fetch_add(1, Ordering::SeqCst) + 1;
                            let resp = DiscoveryResponse {
                                version_info: version,
                                resources,
                                type_url: TYPE_URL.into(),
                                nonce: nonce.to_string(),
                                ..Default::default()
                            };
                            if tx.send(Ok(resp)).await.is_err() {
                                break;
                            }
                        }
                    }
                    _ = async { stop.wait_for(|s| *s).await.is_ok() } => {
                        let _ = tx.send(Err(Status::unavailable("shutting down"))).await;
                        break;
                    }
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

struct Running {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    port: u16,
}

/// Serves `mgmt` on 127.0.0.1:`port` (0 = any) until stopped.
fn serve(
    rt: &tokio::runtime::Runtime,
    mgmt: &Mgmt,
    port: u16,
    tls: Option<ServerTlsConfig>,
) -> Running {
    let (stop_tx, stop_rx) = watch::channel(false);
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
        .expect("bind the management server");
    let port = listener.local_addr().unwrap().port();
    let svc = AggregatedDiscoveryServiceServer::new(Incarnation {
        mgmt: mgmt.clone(),
        stop: stop_rx.clone(),
    });
    let mut stop = stop_rx;
    let task = rt.spawn(async move {
        let mut builder = tonic::transport::Server::builder();
        if let Some(t) = tls {
            builder = builder.tls_config(t).unwrap();
        }
        let _ = builder
            .add_service(svc)
            .serve_with_incoming_shutdown(TcpIncoming::from(listener), async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
    });
    Running {
        stop: stop_tx,
        task,
        port,
    }
}

impl Running {
    fn shut(self, rt: &tokio::runtime::Runtime) {
        self.stop.send_replace(true);
        rt.block_on(async {
            if tokio::time::timeout(Duration::from_secs(10), self.task)
                .await
                .is_err()
            {
                panic!("the management server did not stop");
            }
        });
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn conf(name: &str, domain: &str, key: &str, per_minute: u32) -> rlconf::RateLimitConfig {
    rlconf::RateLimitConfig {
        name: name.into(),
        domain: domain.into(),
        descriptors: vec![rlconf::RateLimitDescriptor {
            key: key.into(),
            rate_limit: Some(rlconf::RateLimitPolicy {
                unit: rlconf::RateLimitUnit::Minute as i32,
                requests_per_unit: per_minute,
                ..Default::default()
            }),
            ..Default::default()
        }],
    }
}

fn xds_env(port: u16) -> Vec<(String, String)> {
    [
        ("CONFIG_TYPE", "GRPC_XDS_SOTW".to_owned()),
        ("CONFIG_GRPC_XDS_SERVER_URL", format!("127.0.0.1:{port}")),
        ("CONFIG_GRPC_XDS_NODE_ID", "node-7".into()),
        ("CONFIG_GRPC_XDS_NODE_METADATA", "zone=z1,team=rl".into()),
        (
            "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
            "100ms".into(),
        ),
        ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "200ms".into()),
        ("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "3s".into()),
        ("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "2".into()),
        ("XDS_CLIENT_BACKOFF_JITTER", "false".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

fn env_refs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

fn shows(srv: &Server, expected: &str) -> bool {
    within(VISIBLE, || rlconfig(srv).contains(expected)).is_some()
}

fn json_limit(srv: &Server, domain: &str, key: &str) -> (u16, String) {
    let body = format!(
        r#"{{"domain":"{domain}","descriptors":[{{"entries":[{{"key":"{key}","value":"v"}}]}}]}}"#
    );
    let r = post_json(srv.http, &body);
    (r.status, r.text())
}

#[test]
fn xds_initial_update_nack_and_reconnect_with_backoff() {
    let rt = runtime();
    let mgmt = Mgmt::new(None);
    mgmt.publish("v1", vec![conf("first", "xd", "k", 5)]);
    let server = serve(&rt, &mgmt, 0, None);
    let port = server.port;
    let env = xds_env(port);
    let srv = start_in(temp_dir("xds"), &[], &env_refs(&env));

    // Initial config, and the exchange that brought it.
    assert!(
        rlconfig(&srv).contains(&line("xd", "k", 5)),
        "{}",
        rlconfig(&srv)
    );
    let ack = mgmt.reply_to("1").expect("ACK of the first response");
    let first = &mgmt.requests()[0];
    assert_eq!(
        (first.version_info.as_str(), first.response_nonce.as_str()),
        ("", "")
    );
    assert_eq!(first.type_url, TYPE_URL);
    assert!(first.resource_names.is_empty());
    let node = first.node.as_ref().expect("node");
    assert_eq!(node.id, "node-7");
    let md = &node.metadata.as_ref().expect("node metadata").fields;
    let text = |k: &str| match &md[k].kind {
        Some(prost_types::value::Kind::StringValue(s)) => s.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!((text("zone"), text("team")), ("z1".into(), "rl".into()));
    assert_eq!(ack.version_info, "v1");
    assert!(ack.error_detail.is_none());
    assert_eq!(ack.node.as_ref().unwrap().id, "node-7");

    // An update.
    mgmt.publish("v2", vec![conf("first", "xd", "k", 7)]);
    assert!(shows(&srv, &line("xd", "k", 7)));
    let ack = mgmt.reply_to("2").expect("ACK of v2");
    assert_eq!(ack.version_info, "v2");
    assert!(ack.error_detail.is_none());

    // An invalid config: NACK with the last accepted version, old rules still served.
    let mut bad = conf("broken", "xd", "k", 9);
    bad.descriptors[0].rate_limit.as_mut().unwrap().unit = 0;
    mgmt.publish("v3", vec![bad]);
    let nack = mgmt.reply_to("3").expect("NACK of v3");
    assert_eq!(nack.version_info, "v2");
    let detail = nack.error_detail.expect("error_detail on a NACK");
    assert_eq!(
        detail.message,
        "broken: invalid rate limit unit 'UNKNOWN' (at descriptors[0].rate_limit)"
    );
    assert_eq!(stat(&srv, "ratelimit.service.config_load_error"), 1);
    assert!(rlconfig(&srv).contains(&line("xd", "k", 7)));
    let (status, body) = json_limit(&srv, "xd", "k");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""requestsPerUnit":7"#), "{body}");

    // The management server goes away: rules stay and requests are still answered.
    server.shut(&rt);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(json_limit(&srv, "xd", "k").0, 200);

    // It comes back on the same port but refuses the first three streams: the client backs
    // off 400ms, 800ms, 1600ms between them (initial 200ms, factor 2; the 200ms wait was
    // spent on the stream the shutdown broke).
    let streams_before = mgmt.streams().len();
    mgmt.refuse.store(3, Ordering::SeqCst);
    mgmt.publish("v4", vec![conf("first", "xd", "k", 11)]);
    let server = serve(&rt, &mgmt, port, None);
    assert!(
        within(Duration::from_secs(10), || rlconfig(&srv)
            .contains(&line("xd", "k", 11)))
        .is_some(),
        "reconnected: {}",
        rlconfig(&srv)
    );
    let opened: Vec<Instant> = mgmt.streams()[streams_before..]
        .iter()
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(opened.len(), 4, "three refused streams and one served");
    let gaps: Vec<Duration> = opened.windows(2).map(|w| w[1] - w[0]).collect();
    eprintln!("gaps between reconnects: {gaps:?}");
    for (gap, expected) in gaps.iter().zip([400u64, 800, 1600]) {
        let expected = Duration::from_millis(expected);
        assert!(
            *gap >= expected && *gap < expected + Duration::from_millis(1500),
            "gaps {gaps:?}"
        );
    }
    // The new stream starts over: empty version and nonce.
    let reopened = mgmt
        .requests()
        .into_iter()
        .rfind(|r| r.response_nonce.is_empty())
        .unwrap();
    assert_eq!(reopened.version_info, "");
    let ack = mgmt.reply_to(&mgmt.last_nonce()).unwrap();
    assert_eq!(ack.version_info, "v4");
    server.shut(&rt);
}

#[test]
fn xds_start_waits_for_the_first_config_and_health_follows_loads() {
    let rt = runtime();
    let mgmt = Mgmt::new(None);
    let server = serve(&rt, &mgmt, 0, None);
    let mut env = xds_env(server.port);
    env.push((
        "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED".into(),
        "true".into(),
    ));
    let dir = temp_dir("xds-gate");
    let mut pending = spawn(&dir, &env_refs(&env));
    assert!(
        pending
            .wait_listening(Duration::from_millis(1500))
            .is_none(),
        "no listener before the first config"
    );
    assert!(
        pending
            .drain()
            .iter()
            .any(|l| l.contains("waiting for the initial rate limit configuration")),
        "{:?}",
        pending.log
    );
    mgmt.publish("v1", vec![conf("a", "xd", "k", 5)]);
    let srv = pending
        .wait_listening(Duration::from_secs(10))
        .expect("listeners after the first config");
    assert!(rlconfig(&srv).contains(&line("xd", "k", 5)));
    assert!(health_is(&srv, true));

    // A config without any domain: "no configuration found", unhealthy.
    mgmt.publish("v2", vec![]);
    assert!(within(VISIBLE, || health_is(&srv, false)).is_some());
    assert_eq!(rlconfig(&srv), "");
    // A rejected config changes nothing.
    mgmt.publish("v3", vec![conf("a", "", "k", 5)]);
    let nack = mgmt.reply_to("3").expect("NACK");
    assert!(
        nack.error_detail
            .unwrap()
            .message
            .contains("config file cannot have empty domain")
    );
    assert!(health_is(&srv, false));
    // Two resources of one domain need MERGE_DOMAIN_CONFIG.
    mgmt.publish("v4", vec![conf("a", "xd", "k", 5), conf("b", "xd", "j", 6)]);
    let nack = mgmt.reply_to("4").expect("NACK");
    assert!(
        nack.error_detail
            .unwrap()
            .message
            .contains("b: duplicate domain 'xd' in config file")
    );
    mgmt.publish("v5", vec![conf("a", "xd", "k", 5), conf("b", "xe", "j", 6)]);
    assert!(within(VISIBLE, || health_is(&srv, true)).is_some());
    assert!(rlconfig(&srv).contains(&line("xe", "j", 6)));
    drop(srv);
    server.shut(&rt);
}

#[test]
fn xds_forced_start_answers_no_config_until_rules_arrive() {
    let rt = runtime();
    let mgmt = Mgmt::new(None);
    let server = serve(&rt, &mgmt, 0, None);
    let mut env = xds_env(server.port);
    env.push(("FORCE_START_WITHOUT_INITIAL_CONFIG".into(), "true".into()));
    env.push(("MERGE_DOMAIN_CONFIG".into(), "true".into()));
    let srv = start_in(temp_dir("xds-force"), &[], &env_refs(&env));
    let body = r#"{"domain":"xd","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}"#;
    let r = request_with(srv.http, "POST", "/json", &[], body.as_bytes());
    assert_eq!(r.status, 400);
    assert_eq!(
        r.header("x-ratelimit-error"),
        Some("no rate limit configuration loaded")
    );
    // Health does not wait for rules unless HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED.
    assert!(health_is(&srv, true));
    mgmt.publish("v1", vec![conf("a", "xd", "k", 5), conf("b", "xd", "j", 6)]);
    assert!(shows(&srv, &line("xd", "j", 6)), "merged across resources");
    assert_eq!(json_limit(&srv, "xd", "k").0, 200);
    server.shut(&rt);
}

struct Pki {
    ca: String,
    server: (String, String),
    client: (String, String),
}

fn pki() -> Pki {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "xds test CA");
    let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let leaf = |name: &str| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    Pki {
        ca: issuer.pem(),
        server: leaf("xds.internal"),
        client: leaf("ratelimit.internal"),
    }
}

#[test]
fn xds_over_mutual_tls_with_san_override_and_extra_headers() {
    let rt = runtime();
    let pki = pki();
    let mgmt = Mgmt::new(None);
    mgmt.publish("v1", vec![conf("a", "tls", "k", 3)]);
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(&pki.server.0, &pki.server.1))
        .client_ca_root(Certificate::from_pem(&pki.ca));
    let server = serve(&rt, &mgmt, 0, Some(tls));

    // Not a server's directory: servers remove theirs when dropped.
    let dir = temp_dir("xds-certs");
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let ca = file("ca.pem", &pki.ca);
    let cert = file("client.pem", &pki.client.0);
    let key = file("client.key", &pki.client.1);
    let mut env = xds_env(server.port);
    for (k, v) in [
        ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
        ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ca.as_str()),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", cert.as_str()),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", key.as_str()),
        (
            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
            "authorization:Bearer s3cret,x-tenant:blue",
        ),
    ] {
        env.push((k.into(), v.into()));
    }

    // The certificate names xds.internal, not 127.0.0.1: without the SAN override the
    // client refuses the server.
    let mut no_san = env.clone();
    no_san.push(("FORCE_START_WITHOUT_INITIAL_CONFIG".into(), "true".into()));
    let mut p = spawn(&temp_dir("xds-no-san"), &env_refs(&no_san));
    let refused = p.wait_listening(Duration::from_secs(20)).unwrap();
    let mut log = p.log.clone();
    let logged = within(VISIBLE, || {
        log.extend(refused.proc.lines.try_iter());
        log.iter()
            .any(|l| l.contains("cannot connect to the xDS server"))
    });
    assert!(logged.is_some(), "the TLS failure is logged: {log:?}");
    assert_eq!(rlconfig(&refused), "");
    drop(refused);

    env.push((
        "CONFIG_GRPC_XDS_SERVER_TLS_SAN".into(),
        "xds.internal".into(),
    ));
    let mut p = spawn(&temp_dir("xds-san"), &env_refs(&env));
    let srv = p
        .wait_listening(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("not loaded over TLS: {:#?}", p.drain()));
    assert!(rlconfig(&srv).contains(&line("tls", "k", 3)));
    let streams = mgmt.streams();
    let (_, headers) = streams.last().unwrap();
    assert_eq!(
        headers.get("authorization").unwrap().to_str().unwrap(),
        "Bearer s3cret"
    );
    assert_eq!(headers.get("x-tenant").unwrap().to_str().unwrap(), "blue");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
    server.shut(&rt);
}

#[test]
fn bad_xds_settings_stop_the_server_at_start() {
    let dir = temp_dir("xds-bad");
    for (extra, expected) in [
        (
            vec![
                ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
                ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/nonexistent/ca.pem"),
            ],
            "cannot read the xDS server CA /nonexistent/ca.pem",
        ),
        (
            vec![("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "bad header:x")],
            "is not a valid header name",
        ),
        (
            vec![("CONFIG_GRPC_XDS_NODE_METADATA", "novalue")],
            "CONFIG_GRPC_XDS_NODE_METADATA",
        ),
    ] {
        let mut env = vec![("CONFIG_TYPE", "GRPC_XDS_SOTW")];
        env.extend(extra);
        let out = crate::common::command(&dir, &env).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains(expected), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn xds_responses_over_the_size_limit_are_refused() {
    let rt = runtime();
    let mgmt = Mgmt::new(None);
    mgmt.publish("big", vec![conf("big", "xd", &"k".repeat(600), 1)]);
    let server = serve(&rt, &mgmt, 0, None);
    let mut env = xds_env(server.port);
    env.push(("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES".into(), "300".into()));
    env.push(("FORCE_START_WITHOUT_INITIAL_CONFIG".into(), "true".into()));
    let srv = start_in(temp_dir("xds-size"), &[], &env_refs(&env));
    let mut log = Vec::new();
    let refused = within(VISIBLE, || {
        log.extend(srv.proc.lines.try_iter());
        log.iter()
            .any(|l| l.contains("ended") && l.contains("too large"))
    });
    assert!(refused.is_some(), "{log:#?}");
    assert_eq!(rlconfig(&srv), "");
    // A response within the limit loads on the next stream.
    mgmt.publish("small", vec![conf("s", "xd", "k", 1)]);
    assert!(shows(&srv, &line("xd", "k", 1)), "{}", rlconfig(&srv));
    server.shut(&rt);
}
