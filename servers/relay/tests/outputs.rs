//! The real `event-relay` binary against fake Telegram, Slack, Workplace, Grafana and OTLP
//! servers written here (hyper on 127.0.0.1:0), a real `nats-server` and a UDP socket:
//! every sample payload is posted and the exact requests the fakes received are checked.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value as Json, json};
use test_support::process::{Capture, Proc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

mod accept_errors;
mod expression_line;
mod stalled_requests;

const PNG: &[u8] = b"\x89PNG\r\n\x1a\nfake panel image";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn payload(name: &str) -> Vec<u8> {
    std::fs::read(repo().join("relay-templates/tests/payloads").join(name)).unwrap()
}

fn template(name: &str) -> String {
    repo()
        .join("relay-templates/tests/templates")
        .join(name)
        .display()
        .to_string()
}

/// A request one of the fakes received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    /// Path and query.
    uri: String,
    headers: HashMap<String, String>,
    body: Bytes,
    at: Instant,
}

impl Seen {
    fn path(&self) -> &str {
        self.uri.split('?').next().unwrap()
    }

    fn json(&self) -> Json {
        serde_json::from_slice(&self.body).unwrap()
    }

    fn form(&self) -> HashMap<String, String> {
        form_urlencoded::parse(&self.body).into_owned().collect()
    }

    /// Multipart fields: name -> (filename, content type, bytes).
    fn multipart(&self) -> HashMap<String, (Option<String>, Option<String>, Bytes)> {
        let ct = &self.headers["content-type"];
        let boundary = ct.split("boundary=").nth(1).expect("multipart boundary");
        let delim = format!("--{boundary}");
        let body = &self.body[..];
        let mut out = HashMap::new();
        let mut rest = body;
        while let Some(start) = find(rest, delim.as_bytes()) {
            rest = &rest[start + delim.len()..];
            if rest.starts_with(b"--") {
                break;
            }
            rest = &rest[2..]; // CRLF
            let head_end = find(rest, b"\r\n\r\n").unwrap();
            let head = std::str::from_utf8(&rest[..head_end]).unwrap();
            let content = &rest[head_end + 4..];
            let end = find(content, format!("\r\n{delim}").as_bytes()).unwrap();
            let value = Bytes::copy_from_slice(&content[..end]);
            let attr = |k: &str| {
                head.split(';')
                    .map(str::trim)
                    .find_map(|p| p.strip_prefix(&format!("{k}=\"")))
                    .map(|v| v.trim_end_matches('"').to_string())
            };
            let ctype = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Type: "))
                .map(str::to_string);
            let filename = head
                .lines()
                .next()
                .and_then(|l| l.split("; ").find_map(|p| p.strip_prefix("filename=\"")))
                .map(|v| v.trim_end_matches('"').to_string());
            out.insert(attr("name").unwrap(), (filename, ctype, value));
            rest = &content[end + 2..];
        }
        out
    }

    fn field(&self, name: &str) -> String {
        String::from_utf8(self.multipart()[name].2.to_vec()).unwrap()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

type Responder = Arc<dyn Fn(&Seen, usize) -> (u16, Vec<(String, String)>, Bytes) + Send + Sync>;

/// A fake HTTP API: records every request and answers with `responder(request, index)`.
struct Fake {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Fake {
    async fn start(responder: Responder) -> Fake {
        Fake::start_slow(responder, Duration::ZERO).await
    }

    /// Like `start`, answering each request only after `delay`.
    async fn start_slow(responder: Responder, delay: Duration) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let log = Arc::clone(&log);
                let responder = Arc::clone(&responder);
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let log = Arc::clone(&log);
                        let responder = Arc::clone(&responder);
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body.collect().await.unwrap().to_bytes();
                            let seen = Seen {
                                method: parts.method.to_string(),
                                uri: parts.uri.to_string(),
                                headers: parts
                                    .headers
                                    .iter()
                                    .map(|(k, v)| {
                                        (k.to_string(), v.to_str().unwrap_or("").to_string())
                                    })
                                    .collect(),
                                body,
                                at: Instant::now(),
                            };
                            let n = {
                                let mut l = log.lock().unwrap();
                                l.push(seen.clone());
                                l.len() - 1
                            };
                            tokio::time::sleep(delay).await;
                            let (status, headers, body) = responder(&seen, n);
                            let mut r = Response::builder().status(status);
                            for (k, v) in headers {
                                r = r.header(k, v);
                            }
                            Ok::<_, Infallible>(r.body(Full::new(body)).unwrap())
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Fake { addr, seen }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until `n` requests matching `pred` arrived (or 10 s passed).
    async fn wait(&self, n: usize, pred: impl Fn(&Seen) -> bool) -> Vec<Seen> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got: Vec<Seen> = self.seen().into_iter().filter(|s| pred(s)).collect();
            if got.len() >= n || Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn ok_json(body: Json) -> (u16, Vec<(String, String)>, Bytes) {
    (
        200,
        vec![("content-type".into(), "application/json".into())],
        Bytes::from(body.to_string()),
    )
}

/// Answers like Telegram's Bot API.
fn telegram_ok() -> Responder {
    Arc::new(|_, _| ok_json(json!({"ok": true, "result": {"message_id": 1}})))
}

/// Answers like Slack's Web API; upload URLs point back at the fake itself.
fn slack(addr: Arc<Mutex<String>>) -> Responder {
    Arc::new(move |s, n| match s.path() {
        "/api/files.getUploadURLExternal" => ok_json(json!({
            "ok": true,
            "upload_url": format!("{}/upload/F{n}", addr.lock().unwrap()),
            "file_id": format!("F{n}"),
        })),
        p if p.starts_with("/upload/") => (200, vec![], Bytes::from_static(b"OK - 17")),
        _ => ok_json(json!({"ok": true})),
    })
}

/// Answers like Grafana: dashboards are created, panels render as `PNG`.
fn grafana() -> Responder {
    Arc::new(|s, n| match (s.method.as_str(), s.path()) {
        ("POST", "/api/dashboards/db") => {
            let uid = s.json()["dashboard"]["uid"].as_str().unwrap().to_string();
            ok_json(json!({"id": n, "uid": uid, "slug": "relay-panel", "status": "success"}))
        }
        ("GET", p) if p.starts_with("/render/d-solo/") => (
            200,
            vec![("content-type".into(), "image/png".into())],
            Bytes::from_static(PNG),
        ),
        ("DELETE", _) => ok_json(json!({"title": "gone"})),
        _ => (404, vec![], Bytes::new()),
    })
}

/// The relay binary, killed by PID when dropped; its stdout is collected.
struct Relay {
    proc: Proc,
    addr: String,
    /// The stdout lines read so far.
    lines: Mutex<Vec<String>>,
}

impl Relay {
    fn start(args: &[String], env: &[(&str, String)]) -> Relay {
        Relay::spawn(Command::new(env!("CARGO_BIN_EXE_event-relay")), args, env)
    }

    /// The relay under a limit of `files` open files (util-linux's prlimit execs it).
    fn start_with_file_limit(files: u64, args: &[String], env: &[(&str, String)]) -> Relay {
        let mut cmd = Command::new("prlimit");
        cmd.arg(format!("--nofile={files}:{files}"))
            .arg(env!("CARGO_BIN_EXE_event-relay"));
        Relay::spawn(cmd, args, env)
    }

    fn spawn(mut cmd: Command, args: &[String], env: &[(&str, String)]) -> Relay {
        cmd.args(["--http-listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("EVENTS_STDOUT_FORMAT", "json")
            .env("EVENTS_STDOUT_LEVEL", "debug");
        let proc = Proc::spawn(cmd, Capture::Stdout);
        let first = proc
            .find_line(Duration::from_secs(20), |l| Some(l.to_owned()))
            .expect("the relay's first line");
        let first: Json =
            serde_json::from_str(&first).unwrap_or_else(|e| panic!("first line {first:?}: {e}"));
        let addr = first["listen"].as_str().unwrap().to_string();
        Relay {
            proc,
            addr,
            lines: Mutex::default(),
        }
    }

    fn records(&self) -> Vec<Json> {
        let mut lines = self.lines.lock().unwrap();
        lines.extend(self.proc.lines.try_iter());
        lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Rendered messages the relay logged for `output`, in order.
    fn rendered(&self, output: &str) -> Vec<String> {
        self.records()
            .into_iter()
            .filter(|r| r["output"] == output)
            .map(|r| r["msg"].as_str().unwrap().to_string())
            .collect()
    }

    async fn post(&self, path: &str, body: &[u8]) -> (u16, String, Duration) {
        let t = Instant::now();
        let (status, body) = request(&self.addr, "POST", path, body).await;
        (status, body, t.elapsed())
    }

    async fn get(&self, path: &str) -> String {
        let (status, body) = request(&self.addr, "GET", path, b"").await;
        assert_eq!(status, 200, "{path}: {body}");
        body
    }

    /// A counter from `/metrics`.
    async fn metric(&self, name: &str, output: Option<&str>) -> u64 {
        let text = self.get("/metrics").await;
        let key = match output {
            Some(o) => format!("{name}{{output=\"{o}\"}} "),
            None => format!("{name} "),
        };
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .unwrap_or_else(|| panic!("{key} not in {text}"))
            .parse()
            .unwrap()
    }

    /// Waits until a counter reaches `want` (or 10 s passed) and returns it.
    async fn wait_metric(&self, name: &str, output: Option<&str>, want: u64) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let v = self.metric(name, output).await;
            if v >= want || Instant::now() > deadline {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn request(addr: &str, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    let headers = [("Content-Type", "application/json")];
    let r = test_support::http::request_async(addr, method, path, &headers, body).await;
    (r.status, r.text())
}

/// A `nats-server` on a free port, killed by PID when dropped.
struct Nats {
    _proc: Proc,
    url: String,
}

fn nats_binary() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("NATS_SERVER_BIN") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("nats-server"))
        .chain([PathBuf::from("/usr/sbin/nats-server")])
        .find(|p| p.is_file())
}

async fn start_nats() -> Option<Nats> {
    let Some(bin) = nats_binary() else {
        assert!(
            std::env::var("RELAY_REQUIRE_NATS").is_err(),
            "RELAY_REQUIRE_NATS is set but nats-server is not installed (scripts/deps.d/relay.sh)"
        );
        eprintln!(
            "nats-server not found: skipping the NATS part (scripts/deps.d/relay.sh installs it)"
        );
        return None;
    };
    let port = test_support::net::free_port();
    let mut cmd = Command::new(bin);
    cmd.args(["-a", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let nats = Nats {
        _proc: Proc::spawn(cmd, Capture::Nothing),
        url: format!("nats://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "nats-server did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Some(nats)
}

const WORKCHAT_TEMPLATE: &str = r#"{{- if eq .type "K8sEvent" -}}
{{- if not (regexMatch "^system:" .data.user.name) }}{{ .data.operation }} {{ .data.kind }} {{ .data.location }} by "{{ .data.user.name }}"{{ end -}}
{{- else }}{{ .data.status | toUpper }}: {{ .data.labels.alertname }}{{ end -}}"#;

const COLLECTOR_TEMPLATE: &str = r#"{{- if eq .type "K8sEvent" -}}
{{ .data.operation }},kind={{ .data.kind }},location={{ .data.location }} user="{{ .data.user.name }}"
{{- else -}}
{{ .data.status }},alertname={{ .data.labels.alertname }} fingerprint="{{ .data.fingerprint }}"
{{- end }} {{ .channel }}"#;

const EXPR_LATENCY: &str = "histogram_quantile(0.99, sum by (le, instance) (rate(http_request_duration_seconds_bucket[5m]))) > 0.5";
const EXPR_CRASH: &str = r#"max_over_time(kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff"}[5m]) >= 1"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_payload_reaches_every_output() {
    let tg = Fake::start(telegram_ok()).await;
    let slack_addr = Arc::new(Mutex::new(String::new()));
    let sl = Fake::start(slack(Arc::clone(&slack_addr))).await;
    *slack_addr.lock().unwrap() = sl.url();
    let wc = Fake::start(Arc::new(|_, _| ok_json(json!({"message_id": "m.1"})))).await;
    let gf = Fake::start(grafana()).await;
    let otel = Fake::start(Arc::new(|_, _| ok_json(json!({})))).await;
    let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let nats = start_nats().await;

    let mut args: Vec<String> = [
        "--http-k8s-url",
        "/k8s",
        "--http-alertmanager-url",
        "/alertmanager",
        "--telegram-message-template",
        &template("telegram.message"),
        "--slack-message-template",
        &template("slack.message"),
        "--workchat-message-template",
        WORKCHAT_TEMPLATE,
        "--output-backoff-ms",
        "10",
        "--opentelemetry-flush-ms",
        "50",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend([
        "--telegram-url".into(),
        format!("{}/bot123:abc/sendMessage?chat_id=-100200", tg.url()),
        "--slack-url".into(),
        format!("{}/api/files.upload?token=xoxb-1&channels=C1", sl.url()),
        "--workchat-url".into(),
        format!(
            "{}/v9.0/me/messages?access_token=wp-1&recipient=%7B%22thread_key%22%3A%22t1%22%7D",
            wc.url()
        ),
        "--opentelemetry-endpoint".into(),
        otel.url(),
    ]);
    let mut sub = None;
    if let Some(n) = &nats {
        args.extend([
            "--nats-url".into(),
            n.url.clone(),
            "--nats-subject".into(),
            "events.relay".into(),
            "--nats-message-template".into(),
            "{{ toJSON . }}".into(),
        ]);
        let client = async_nats::connect(n.url.as_str()).await.unwrap();
        sub = Some(client.subscribe("events.relay").await.unwrap());
        client.flush().await.unwrap();
    }
    let env = [
        ("EVENTS_GRAFANA_URL", gf.url()),
        ("EVENTS_GRAFANA_API_KEY", "glsa_key".to_string()),
        (
            "EVENTS_COLLECTOR_ADDRESS",
            udp.local_addr().unwrap().to_string(),
        ),
        (
            "EVENTS_COLLECTOR_MESSAGE_TEMPLATE",
            COLLECTOR_TEMPLATE.to_string(),
        ),
    ];
    let relay = Relay::start(&args, &env);

    // Every answer comes at once; sending happens behind it.
    let k8s = [
        "admission-v1-deployment-create.json",
        "admission-v1-pod-delete.json",
        "admission-v1beta1-pod-create-serviceaccount.json",
    ];
    // Each request's events are rendered (the collector is rendered last) before the next
    // is posted, so the order at every fake is known.
    for (i, f) in k8s.iter().enumerate() {
        let (status, body, took) = relay.post("/k8s", &payload(f)).await;
        assert_eq!(status, 200, "{f}: {body}");
        assert!(body.contains(r#""allowed":true"#), "{f}: {body}");
        assert!(took < Duration::from_secs(2), "{f} took {took:?}");
        let n = i as u64 + 1;
        assert_eq!(
            relay
                .wait_metric("events_output_rendered_total", Some("collector"), n)
                .await,
            n
        );
    }
    for (i, f) in [
        "alertmanager-firing-2-alerts.json",
        "alertmanager-resolved-2-alerts.json",
        "alertmanager-mixed-firing-resolved.json",
    ]
    .iter()
    .enumerate()
    {
        let (status, body, _) = relay.post("/alertmanager", &payload(f)).await;
        assert_eq!((status, body.as_str()), (200, r#"{"Message":"OK"}"#), "{f}");
        let n = 3 + 2 * (i as u64 + 1);
        assert_eq!(
            relay
                .wait_metric("events_output_rendered_total", Some("collector"), n)
                .await,
            n
        );
    }

    // Telegram: two admission messages (the service account is filtered out by the
    // template), then a photo with caption per alert.
    let got = tg.wait(8, |_| true).await;
    assert_eq!(got.len(), 8, "{got:#?}");
    let tg_msgs = relay.rendered("telegram");
    assert_eq!(tg_msgs.len(), 8);
    for (i, s) in got[..2].iter().enumerate() {
        assert_eq!(s.method, "POST");
        assert_eq!(s.uri, "/bot123:abc/sendMessage?chat_id=-100200");
        let f = s.multipart();
        assert_eq!(
            f.keys()
                .map(String::as_str)
                .collect::<std::collections::BTreeSet<_>>(),
            [
                "disable_notification",
                "disable_web_page_preview",
                "parse_mode",
                "text"
            ]
            .into()
        );
        assert_eq!(s.field("text"), tg_msgs[i]);
        assert_eq!(s.field("parse_mode"), "HTML");
        assert_eq!(s.field("disable_web_page_preview"), "true");
        assert_eq!(s.field("disable_notification"), "false");
    }
    assert!(
        got[0]
            .field("text")
            .starts_with("<b>CREATE</b>: Deployment / shop.web\n<b>k8s</b>: ")
    );
    assert!(
        got[1]
            .field("text")
            .starts_with("<b>DELETE</b>: Pod / shop.web-7d9c8b6f5d-x2l4q")
    );
    let exprs = [
        EXPR_LATENCY,
        EXPR_LATENCY,
        EXPR_LATENCY,
        EXPR_LATENCY,
        EXPR_CRASH,
        EXPR_CRASH,
    ];
    for (i, s) in got[2..].iter().enumerate() {
        assert_eq!(s.uri, "/bot123:abc/sendPhoto?chat_id=-100200");
        let f = s.multipart();
        let escaped = exprs[i]
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert_eq!(
            s.field("caption"),
            format!("{}\n<i>{escaped}</i>", tg_msgs[2 + i])
        );
        assert_eq!(s.field("parse_mode"), "HTML");
        let (filename, ctype, bytes) = &f["photo"];
        assert_eq!(filename.as_deref(), Some("alert.png"));
        assert_eq!(ctype.as_deref(), Some("image/png"));
        assert_eq!(&bytes[..], PNG);
    }
    assert!(
        got[2]
            .field("caption")
            .trim_start()
            .starts_with("<b>FIRING</b>: HighRequestLatency")
    );
    assert!(
        got[4]
            .field("caption")
            .trim_start()
            .starts_with("<b>RESOLVED</b>: HighRequestLatency")
    );

    // Grafana: one dashboard, render and delete per alert, shared by the three chats.
    let g = gf.wait(18, |_| true).await;
    assert_eq!(g.len(), 18, "{g:#?}");
    let creates: Vec<&Seen> = g.iter().filter(|s| s.method == "POST").collect();
    let renders: Vec<&Seen> = g.iter().filter(|s| s.method == "GET").collect();
    let deletes: Vec<&Seen> = g.iter().filter(|s| s.method == "DELETE").collect();
    assert_eq!((creates.len(), renders.len(), deletes.len()), (6, 6, 6));
    for s in &g {
        assert_eq!(s.headers["authorization"], "Bearer glsa_key");
    }
    let mut by_uid = HashMap::new();
    for c in &creates {
        assert_eq!(c.uri, "/api/dashboards/db");
        let d = c.json();
        let panel = &d["dashboard"]["panels"][0];
        assert_eq!(panel["datasource"], "Prometheus");
        by_uid.insert(d["dashboard"]["uid"].as_str().unwrap().to_string(), d);
    }
    for r in &renders {
        let rest = r.uri.strip_prefix("/render/d-solo/").unwrap();
        let (uid, query) = rest.split_once("/relay-panel?").unwrap();
        let d = &by_uid[uid];
        let q: HashMap<String, String> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        assert_eq!(q["orgId"], "1");
        assert_eq!(q["panelId"], "1");
        assert_eq!(
            (q["width"].as_str(), q["height"].as_str(), q["tz"].as_str()),
            ("1280", "640", "utc")
        );
        let span: i64 = q["to"].parse::<i64>().unwrap() - q["from"].parse::<i64>().unwrap();
        let panel = &d["dashboard"]["panels"][0];
        let steps = &panel["fieldConfig"]["defaults"]["thresholds"]["steps"];
        if panel["targets"][0]["expr"]
            == "histogram_quantile(0.99, sum by (le, instance) (rate(http_request_duration_seconds_bucket[5m])))"
        {
            assert_eq!(span, 30 * 60_000, "minutes label");
            assert_eq!(d["dashboard"]["time"]["from"], "now-30m");
            assert_eq!(steps[1]["value"], 0.5);
            assert_eq!(panel["fieldConfig"]["defaults"]["unit"], "s");
        } else {
            assert_eq!(
                panel["targets"][0]["expr"],
                r#"max_over_time(kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff"}[5m])"#
            );
            assert_eq!(span, 60 * 60_000, "default period");
            assert_eq!(steps[1]["value"], 1.0);
        }
    }
    let mut deleted: Vec<&str> = deletes
        .iter()
        .map(|s| s.uri.strip_prefix("/api/dashboards/uid/").unwrap())
        .collect();
    deleted.sort();
    let mut created: Vec<&str> = by_uid.keys().map(String::as_str).collect();
    created.sort();
    assert_eq!(deleted, created);

    // Slack: chat.postMessage for the admissions, the external upload trio per alert.
    let sl_msgs = relay.rendered("slack");
    assert_eq!(sl_msgs.len(), 8);
    let s = sl.wait(2 + 6 * 3, |_| true).await;
    assert_eq!(s.len(), 20, "{s:#?}");
    for (i, r) in s[..2].iter().enumerate() {
        assert_eq!(r.uri, "/api/chat.postMessage");
        assert_eq!(r.headers["authorization"], "Bearer xoxb-1");
        assert_eq!(r.headers["content-type"], "application/json; charset=utf-8");
        assert_eq!(r.json(), json!({"channel": "C1", "text": sl_msgs[i]}));
    }
    for (i, trio) in s[2..].chunks(3).enumerate() {
        assert_eq!(trio[0].uri, "/api/files.getUploadURLExternal");
        assert_eq!(trio[0].headers["authorization"], "Bearer xoxb-1");
        let f = trio[0].form();
        assert_eq!(
            (f["filename"].as_str(), f["length"].as_str()),
            ("alert.png", PNG.len().to_string().as_str())
        );
        let n = 2 + i * 3;
        assert_eq!(trio[1].uri, format!("/upload/F{n}"));
        assert_eq!(&trio[1].body[..], PNG);
        assert!(
            !trio[1].headers.contains_key("authorization"),
            "token sent to the upload URL"
        );
        assert_eq!(trio[2].uri, "/api/files.completeUploadExternal");
        let f = trio[2].form();
        assert_eq!(f["channel_id"], "C1");
        assert_eq!(f["initial_comment"], sl_msgs[2 + i]);
        assert_eq!(
            serde_json::from_str::<Json>(&f["files"]).unwrap(),
            json!([{"id": format!("F{n}"), "title": exprs[i]}])
        );
    }

    // Workplace: text for admissions; image then text (with the query line) per alert; the
    // message is JSON.
    let w = wc.wait(2 + 6 * 2, |_| true).await;
    assert_eq!(w.len(), 14, "{w:#?}");
    for r in &w {
        assert_eq!(
            r.uri,
            "/v9.0/me/messages?access_token=wp-1&recipient=%7B%22thread_key%22%3A%22t1%22%7D"
        );
        assert_eq!(r.field("notification_type"), "REGULAR");
    }
    assert_eq!(
        serde_json::from_str::<Json>(&w[0].field("message")).unwrap(),
        json!({"text": "Create Deployment shop.web by \"alice@example.com\""})
    );
    assert_eq!(
        serde_json::from_str::<Json>(&w[2].field("message")).unwrap(),
        json!({"attachment": {"type": "image", "payload": {"is_reusable": true}}})
    );
    let (filename, ctype, bytes) = &w[2].multipart()["filedata"];
    assert_eq!(
        (filename.as_deref(), ctype.as_deref(), &bytes[..]),
        (Some("alert.png"), Some("image/png"), PNG)
    );
    assert_eq!(
        serde_json::from_str::<Json>(&w[3].field("message")).unwrap(),
        json!({"text": format!("FIRING: HighRequestLatency\n_{EXPR_LATENCY}_")})
    );

    // UDP collector: one datagram per event, the service account included.
    let mut datagrams = Vec::new();
    let mut buf = vec![0u8; 65536];
    while datagrams.len() < 9 {
        let n = tokio::time::timeout(Duration::from_secs(10), udp.recv(&mut buf))
            .await
            .expect("datagram")
            .unwrap();
        datagrams.push(String::from_utf8(buf[..n].to_vec()).unwrap());
    }
    assert_eq!(
        datagrams[..3],
        [
            r#"Create,kind=Deployment,location=shop.web user="alice@example.com" k8s"#,
            r#"Delete,kind=Pod,location=shop.web-7d9c8b6f5d-x2l4q user="bob@example.com" k8s"#,
            r#"Create,kind=Pod,location=batch.report-1571746740-glbhp user="system:serviceaccount:kube-system:job-controller" k8s"#,
        ]
    );
    assert!(datagrams[3].starts_with("firing,alertname=HighRequestLatency fingerprint="));
    assert!(
        datagrams
            .iter()
            .all(|d| relay.rendered("collector").contains(d))
    );

    // NATS: the whole event as JSON, one message per event.
    if let Some(sub) = sub.as_mut() {
        use futures_util::StreamExt;
        let mut types = Vec::new();
        for _ in 0..9 {
            let m = tokio::time::timeout(Duration::from_secs(10), sub.next())
                .await
                .expect("NATS message")
                .unwrap();
            assert_eq!(m.subject.as_str(), "events.relay");
            let j: Json = serde_json::from_slice(&m.payload).unwrap();
            types.push(j["type"].as_str().unwrap().to_string());
            if types.len() == 1 {
                assert_eq!(j["channel"], "k8s");
                assert_eq!(j["data"]["kind"], "Deployment");
                assert_eq!(j["data"]["operation"], "Create");
            }
        }
        assert_eq!(types.iter().filter(|t| *t == "K8sEvent").count(), 3);
        assert_eq!(
            types.iter().filter(|t| *t == "AlertmanagerEvent").count(),
            6
        );
    }

    // Counters.
    for (output, sent) in [
        ("telegram", 8),
        ("slack", 8),
        ("workchat", 8),
        ("collector", 9),
    ] {
        assert_eq!(
            relay
                .wait_metric("events_output_sent_total", Some(output), sent)
                .await,
            sent,
            "{output}"
        );
        assert_eq!(
            relay
                .metric("events_output_rendered_total", Some(output))
                .await,
            sent
        );
        assert_eq!(
            relay
                .metric("events_output_failed_total", Some(output))
                .await,
            0
        );
        assert_eq!(
            relay
                .metric("events_output_dropped_total", Some(output))
                .await,
            0
        );
    }
    if nats.is_some() {
        assert_eq!(
            relay
                .wait_metric("events_output_sent_total", Some("nats"), 9)
                .await,
            9
        );
    }
    assert_eq!(relay.metric("events_received_total", None).await, 9);
    let metrics = relay.get("/metrics").await;
    assert!(
        metrics.contains("events_grafana_renders_total{result=\"ok\"} 6\n"),
        "{metrics}"
    );

    // Traces: a span per event, a child per delivery pointing at it.
    let outputs = if nats.is_some() { 5 } else { 4 };
    let want_children = 8 * 3 + 9 * (outputs - 3);
    let deadline = Instant::now() + Duration::from_secs(10);
    let (events, children) = loop {
        let spans: Vec<Json> = otel
            .seen()
            .iter()
            .flat_map(|s| {
                assert_eq!(s.uri, "/v1/traces");
                assert_eq!(s.headers["content-type"], "application/json");
                let d = s.json();
                assert_eq!(
                    d["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"],
                    "events"
                );
                d["resourceSpans"][0]["scopeSpans"][0]["spans"]
                    .as_array()
                    .unwrap()
                    .clone()
            })
            .collect();
        let (events, children): (Vec<Json>, Vec<Json>) =
            spans.into_iter().partition(|s| s["name"] == "event");
        if (events.len() >= 9 && children.len() >= want_children) || Instant::now() > deadline {
            break (events, children);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(events.len(), 9);
    assert_eq!(children.len(), want_children);
    let ids: HashMap<&str, &str> = events
        .iter()
        .map(|e| {
            (
                e["spanId"].as_str().unwrap(),
                e["traceId"].as_str().unwrap(),
            )
        })
        .collect();
    for c in &children {
        let parent = c["parentSpanId"].as_str().unwrap();
        assert_eq!(
            ids.get(parent),
            Some(&c["traceId"].as_str().unwrap()),
            "{c}"
        );
        assert!(c["name"].as_str().unwrap().starts_with("send "));
        assert_eq!(c["status"]["code"], 1);
    }

    // No token reached the logs.
    let lines = relay.lines.lock().unwrap().join("\n");
    for secret in ["123:abc", "xoxb-1", "wp-1", "glsa_key"] {
        assert!(!lines.contains(secret), "{secret} logged");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_messages_are_split_and_429_is_honoured() {
    // The first call is refused with Telegram's 429 and `retry_after: 1`.
    let tg = Fake::start(Arc::new(|_, n| {
        if n == 0 {
            (
                429,
                vec![("content-type".into(), "application/json".into())],
                Bytes::from(
                    json!({"ok": false, "error_code": 429,
                        "description": "Too Many Requests: retry after 1",
                        "parameters": {"retry_after": 1}})
                    .to_string(),
                ),
            )
        } else {
            ok_json(json!({"ok": true, "result": {"message_id": n}}))
        }
    }))
    .await;
    // 60 lines of about 90 characters inside one <i>: about 5,500 characters.
    let dir = std::env::temp_dir().join(format!("relay-split-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tpl = dir.join("long.message");
    std::fs::write(
        &tpl,
        r#"{{- define "line" }}<b>{{ .data.kind }}</b> {{ .data.location }} by {{ .data.user.name }}: a line of padding text here
{{ end -}}
{{- define "ten" }}{{ template "line" . }}{{ template "line" . }}{{ template "line" . }}{{ template "line" . }}{{ template "line" . }}{{ template "line" . }}{{ template "line" . }}{{ template "line" . }}{{ template "line" . }}{{ template "line" . }}{{ end -}}
{{- define "telegram-message" }}<i>{{ template "ten" . }}{{ template "ten" . }}{{ template "ten" . }}{{ template "ten" . }}{{ template "ten" . }}{{ template "ten" . }}end</i>{{ end -}}"#,
    )
    .unwrap();
    let args: Vec<String> = vec![
        "--http-k8s-url".into(),
        "/k8s".into(),
        "--telegram-url".into(),
        format!("{}/bot9:tok/sendMessage?chat_id=42", tg.url()),
        "--telegram-message-template".into(),
        tpl.display().to_string(),
    ];
    let relay = Relay::start(&args, &[]);
    let (status, _, took) = relay
        .post("/k8s", &payload("admission-v1-deployment-create.json"))
        .await;
    assert_eq!(status, 200);
    assert!(
        took < Duration::from_millis(900),
        "answer waited for Telegram: {took:?}"
    );

    let got = tg.wait(3, |_| true).await;
    assert_eq!(got.len(), 3, "{got:#?}");
    let texts: Vec<String> = got.iter().map(|s| s.field("text")).collect();
    // The refused part is sent again, unchanged, after the wait Telegram asked for.
    assert_eq!(texts[0], texts[1]);
    let waited = got[1].at - got[0].at;
    assert!(
        waited >= Duration::from_millis(990),
        "retried after {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "retried after {waited:?}");
    // Two parts, each within Telegram's limit, cut at a line end, tags balanced.
    let full = relay.rendered("telegram").pop().unwrap();
    assert!(full.chars().count() > 4096);
    for t in &texts[1..] {
        assert!(t.encode_utf16().count() <= 4096, "{}", t.len());
        assert_eq!(t.matches("<i>").count(), t.matches("</i>").count(), "{t}");
        assert_eq!(t.matches("<b>").count(), t.matches("</b>").count(), "{t}");
    }
    assert!(texts[1].ends_with("a line of padding text here</i>"));
    assert!(texts[2].starts_with("<i><b>Deployment</b> shop.web"));
    let rejoined = format!(
        "{}\n{}",
        texts[1].strip_suffix("</i>").unwrap(),
        texts[2].strip_prefix("<i>").unwrap()
    );
    assert_eq!(rejoined, full);
    assert_eq!(
        relay
            .wait_metric("events_output_sent_total", Some("telegram"), 1)
            .await,
        1
    );
    assert_eq!(
        relay
            .metric("events_output_retries_total", Some("telegram"))
            .await,
        1
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_channel_never_delays_the_answer() {
    // Telegram accepts connections and never answers; Slack's port refuses them.
    let hang = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hang_addr = hang.local_addr().unwrap();
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let keep = Arc::clone(&held);
    tokio::spawn(async move {
        while let Ok((s, _)) = hang.accept().await {
            keep.lock().unwrap().push(s);
        }
    });
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_addr = closed.local_addr().unwrap();
    drop(closed);
    let args: Vec<String> = vec![
        "--http-alertmanager-url".into(),
        "/alertmanager".into(),
        "--telegram-url".into(),
        format!("http://{hang_addr}/botX:Y/sendMessage?chat_id=1"),
        "--telegram-message-template".into(),
        "{{ .data.labels.alertname }}".into(),
        "--slack-url".into(),
        format!("http://{closed_addr}/api/files.upload?token=t&channels=C"),
        "--slack-message-template".into(),
        "{{ .data.labels.alertname }}".into(),
        "--output-queue-size".into(),
        "1".into(),
        "--output-retries".into(),
        "2".into(),
        "--output-backoff-ms".into(),
        "10".into(),
    ];
    let relay = Relay::start(&args, &[]);
    for _ in 0..3 {
        let (status, body, took) = relay
            .post(
                "/alertmanager",
                &payload("alertmanager-firing-2-alerts.json"),
            )
            .await;
        assert_eq!((status, body.as_str()), (200, r#"{"Message":"OK"}"#));
        assert!(took < Duration::from_millis(500), "answer took {took:?}");
        // Let the workers pick up what they can, so the drop count is known.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Telegram: one message stuck in flight, one waiting in the queue, the rest dropped.
    assert_eq!(
        relay
            .metric("events_output_rendered_total", Some("telegram"))
            .await,
        6
    );
    // (5 when the second alert of the first request came before the worker took the first.)
    let dropped = relay
        .wait_metric("events_output_dropped_total", Some("telegram"), 4)
        .await;
    assert!(dropped == 4 || dropped == 5, "{dropped}");
    assert_eq!(
        relay
            .metric("events_output_sent_total", Some("telegram"))
            .await,
        0
    );
    // Slack: every message tried three times, then counted as failed (or dropped while
    // the queue was busy with retries).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let failed = relay
            .metric("events_output_failed_total", Some("slack"))
            .await;
        let dropped = relay
            .metric("events_output_dropped_total", Some("slack"))
            .await;
        if failed + dropped == 6 || Instant::now() > deadline {
            assert_eq!(failed + dropped, 6);
            assert!(failed >= 3, "{failed}");
            let retries = relay
                .metric("events_output_retries_total", Some("slack"))
                .await;
            assert_eq!(retries, failed * 2);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let health: Json = serde_json::from_str(&relay.get("/healthz").await).unwrap();
    assert_eq!(health["outputs"]["telegram"]["dropped"], dropped);
    assert!(
        relay
            .records()
            .iter()
            .any(|r| r["level"] == "warn" && r["msg"] == "telegram: queue full, message dropped")
    );
    assert!(relay.records().iter().any(|r| {
        r["level"] == "error"
            && r["msg"]
                .as_str()
                .unwrap()
                .starts_with("slack: not sent: chat.postMessage: request failed")
    }));
    assert_eq!(
        held.lock().unwrap().len(),
        1,
        "one connection to the stuck chat"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_images_fall_back_to_text_and_long_captions_move_to_the_text() {
    let tg = Fake::start(telegram_ok()).await;
    // The first render fails (no image renderer installed, say); the second works.
    let renders = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&renders);
    let ok = grafana();
    let gf = Fake::start(Arc::new(move |s, n| {
        if s.method == "GET" && count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            return (500, vec![], Bytes::from_static(b"renderer missing"));
        }
        ok(s, n)
    }))
    .await;
    let otel = Fake::start(Arc::new(|_, _| ok_json(json!({})))).await;
    // About 1,400 characters: too long for a caption (1,024), fine for a message.
    let long = format!(
        "{{{{ .data.labels.alertname }}}}{}",
        " {{ .data.annotations.summary }}".repeat(33)
    );
    let args: Vec<String> = vec![
        "--http-alertmanager-url".into(),
        "/alertmanager".into(),
        "--telegram-url".into(),
        format!("{}/bot7:k/sendMessage?chat_id=5", tg.url()),
        "--telegram-message-template".into(),
        long,
        "--grafana-url".into(),
        gf.url(),
        "--grafana-api-key".into(),
        "viewer:secret".into(),
        "--opentelemetry-endpoint".into(),
        otel.url(),
        "--opentelemetry-flush-ms".into(),
        "50".into(),
    ];
    let relay = Relay::start(&args, &[]);
    let body = payload("alertmanager-firing-2-alerts.json");
    let mut s = TcpStream::connect(&relay.addr).await.unwrap();
    let head = format!(
        "POST /alertmanager HTTP/1.1\r\nHost: relay\r\nConnection: close\r\nContent-Type: application/json\r\nX-Trace-ID: 4bf92f3577b34da6a3ce929d0e0e4736\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body).await.unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");

    let got = tg.wait(3, |_| true).await;
    assert_eq!(got.len(), 3, "{got:#?}");
    let msgs = relay.rendered("telegram");
    // First alert: no image, so the message goes as text with its query line.
    assert_eq!(got[0].uri, "/bot7:k/sendMessage?chat_id=5");
    assert_eq!(
        got[0].field("text"),
        format!("{}\n<i>{}</i>", msgs[0], EXPR_LATENCY.replace('>', "&gt;"))
    );
    // Second alert: the photo carries the query, the message follows as text.
    assert_eq!(got[1].uri, "/bot7:k/sendPhoto?chat_id=5");
    assert_eq!(
        got[1].field("caption"),
        format!("<i>{}</i>", EXPR_LATENCY.replace('>', "&gt;"))
    );
    assert_eq!(&got[1].multipart()["photo"].2[..], PNG);
    assert_eq!(got[2].uri, "/bot7:k/sendMessage?chat_id=5");
    assert_eq!(got[2].field("text"), msgs[1]);
    assert!(msgs[1].chars().count() > 1024);

    // Both dashboards were deleted, the failed one too; Basic auth for user:password.
    let g = gf.wait(6, |_| true).await;
    assert_eq!(
        g.iter().filter(|s| s.method == "DELETE").count(),
        2,
        "{g:#?}"
    );
    assert!(
        g.iter()
            .all(|s| s.headers["authorization"] == "Basic dmlld2VyOnNlY3JldA==")
    );
    let metrics = relay.get("/metrics").await;
    assert!(
        metrics.contains("events_grafana_renders_total{result=\"ok\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("events_grafana_renders_total{result=\"error\"} 1\n"),
        "{metrics}"
    );
    assert!(relay.records().iter().any(|r| r["level"] == "warn"
        && r["msg"]
            == "telegram: no alert image, sending text only: grafana: rendering: HTTP 500"));

    // The trace id from the request header is continued.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let spans: Vec<Json> = otel
            .seen()
            .iter()
            .flat_map(|s| {
                s.json()["resourceSpans"][0]["scopeSpans"][0]["spans"]
                    .as_array()
                    .unwrap()
                    .clone()
            })
            .collect();
        if spans.len() >= 4 || Instant::now() > deadline {
            assert_eq!(spans.len(), 4, "{spans:#?}");
            assert!(
                spans
                    .iter()
                    .all(|s| s["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736")
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_delivers_what_is_queued_before_exiting() {
    let tg = Fake::start_slow(telegram_ok(), Duration::from_millis(200)).await;
    let args: Vec<String> = vec![
        "--http-alertmanager-url".into(),
        "/alertmanager".into(),
        "--telegram-url".into(),
        format!("{}/bot1:t/sendMessage?chat_id=3", tg.url()),
        "--telegram-message-template".into(),
        "{{ .data.labels.instance }}".into(),
    ];
    let mut relay = Relay::start(&args, &[]);
    let (status, _, _) = relay
        .post(
            "/alertmanager",
            &payload("alertmanager-firing-2-alerts.json"),
        )
        .await;
    assert_eq!(status, 200);
    let t = Instant::now();
    assert!(relay.proc.signal("TERM"));
    let code = tokio::task::spawn_blocking(move || {
        let code = relay.proc.child.wait().unwrap().code();
        (code, relay)
    })
    .await
    .unwrap();
    assert_eq!(code.0, Some(0));
    // Two answers of 200 ms each were waited for, not ten seconds.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let got = tg.seen();
    assert_eq!(got.len(), 2, "{got:#?}");
    let texts: Vec<String> = got.iter().map(|s| s.field("text")).collect();
    let line = format!("\n<i>{}</i>", EXPR_LATENCY.replace('>', "&gt;"));
    assert_eq!(
        texts,
        [
            format!("10.0.1.15:8080{line}"),
            format!("10.0.1.16:8080{line}")
        ]
    );
    assert!(code.1.records().iter().any(|r| {
        r["msg"]
            .as_str()
            .unwrap()
            .starts_with("stopping: delivering queued messages")
    }));
}
