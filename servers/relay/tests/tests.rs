//! Loopback tests: the relay served on 127.0.0.1:0 in-process (stdout captured in memory)
//! and the real `event-relay` binary.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::DateTime;
use relay_server::log::{Logger, Memory};
use relay_server::settings::StdoutFormat;
use relay_server::{App, Settings, serve};
use serde_json::Value as Json;
use test_support::http::Response;
use test_support::process::{Capture, Proc};
use tokio::net::TcpListener;

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

async fn request(
    addr: &str,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> Response {
    let headers: Vec<(&str, &str)> = content_type
        .map(|ct| ("Content-Type", ct))
        .into_iter()
        .collect();
    test_support::http::request_async(addr, method, path, &headers, body).await
}

async fn post(addr: &str, path: &str, body: &[u8]) -> Response {
    request(addr, "POST", path, Some("application/json"), body).await
}

struct Relay {
    addr: String,
    sink: Arc<Memory>,
    app: Arc<App>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

async fn start(args: &[&str]) -> Relay {
    // Nothing listens on port 9: sends fail at once and are not retried.
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    args.extend(["--output-retries".to_string(), "0".to_string()]);
    let settings = Settings::parse(&args, &|_| None).unwrap();
    let sink = Arc::new(Memory::default());
    let log = Logger::new(sink.clone(), StdoutFormat::Json, "debug", "").unwrap();
    let env: relay_templates::relay::Lookup = Arc::new(|k: &str| match k {
        "EVENTS_TELEGRAM_BOT_DEVOPS" => Some("111:dev=-1001".to_string()),
        "EVENTS_TELEGRAM_BOT_PLATFORM" => Some("123:abc=-100200".to_string()),
        _ => None,
    });
    let mut app = App::new(settings, log, env).unwrap();
    app.clock = Box::new(|| {
        DateTime::parse_from_rfc3339("2024-03-18T10:04:05.123456789Z")
            .unwrap()
            .to_utc()
    });
    let app = Arc::new(app);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(serve(app.clone(), listener, async move {
        let _ = rx.await;
    }));
    Relay {
        addr,
        sink,
        app,
        stop: Some(tx),
    }
}

/// Records with an `output` field (rendered messages), waiting until `n` have arrived.
async fn messages(sink: &Memory, n: usize) -> Vec<Json> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got: Vec<Json> = sink
            .lines()
            .iter()
            .map(|l| serde_json::from_str::<Json>(l).unwrap())
            .filter(|j| j.get("output").is_some())
            .collect();
        if got.len() >= n || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_payload_is_answered_and_rendered() {
    let telegram = template("telegram.message");
    let selector = template("telegram.selector");
    let slack = template("slack.message");
    let r = start(&[
        "--http-k8s-url",
        "/k8s",
        "--http-alertmanager-url",
        "/alertmanager",
        "--telegram-url",
        "http://127.0.0.1:9/bot%s/sendMessage?chat_id=%s",
        "--telegram-message-template",
        &telegram,
        "--telegram-selector-template",
        &selector,
        "--slack-url",
        "http://127.0.0.1:9/api/chat.postMessage?token=xoxb-1&channels=C1",
        "--slack-message-template",
        &slack,
    ])
    .await;

    let a = post(
        &r.addr,
        "/k8s",
        &payload("admission-v1-deployment-create.json"),
    )
    .await;
    assert_eq!(a.status, 200);
    let j: Json = serde_json::from_str(&a.text()).unwrap();
    assert_eq!(
        j,
        serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "0df28fbd-5f5f-11e8-bc74-36e6bb280816", "allowed": true}})
    );
    let got = messages(&r.sink, 2).await;
    assert_eq!(got.len(), 2, "{got:?}");
    let tg = got.iter().find(|m| m["output"] == "telegram").unwrap();
    assert!(
        tg["msg"]
            .as_str()
            .unwrap()
            .starts_with("<b>CREATE</b>: Deployment / shop.web\n<b>k8s</b>: 18.03.24 10:04:05")
    );
    assert!(
        tg["msg"]
            .as_str()
            .unwrap()
            .ends_with("<b>metrics</b> => nginx/nginx-prometheus-exporter:1.1.0 [TCP: 9113]")
    );
    // The selector chose the devops chat; the token is not printed.
    assert_eq!(
        tg["target"],
        "http://127.0.0.1:9/bot***/sendMessage?chat_id=-1001"
    );
    assert_eq!(tg["event_type"], "K8sEvent");
    let sl = got.iter().find(|m| m["output"] == "slack").unwrap();
    assert_eq!(
        sl["target"],
        "http://127.0.0.1:9/api/chat.postMessage?token=***&channels=C1"
    );
    assert!(
        sl["msg"]
            .as_str()
            .unwrap()
            .starts_with("*CREATE*: Deployment / shop.web")
    );

    // A service-account user: allowed, but both templates print nothing, so nothing is sent.
    let a = post(
        &r.addr,
        "/k8s",
        &payload("admission-v1beta1-pod-create-serviceaccount.json"),
    )
    .await;
    assert_eq!(a.status, 200);
    let j: Json = serde_json::from_str(&a.text()).unwrap();
    assert_eq!(
        j["response"],
        serde_json::json!({"uid": "a1b2c3d4-e5f6-11e9-953e-0050568aa55b", "allowed": true})
    );
    assert_eq!(j["apiVersion"], "admission.k8s.io/v1beta1");

    let a = post(&r.addr, "/k8s", &payload("admission-v1-pod-delete.json")).await;
    assert_eq!(a.status, 200);
    let got = messages(&r.sink, 4).await;
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(got[2..].iter().any(|m| {
        m["msg"]
            .as_str()
            .unwrap()
            .starts_with("<b>DELETE</b>: Pod / shop.web-7d9c8b6f5d-x2l4q")
    }));

    // Alerts: one event per alert, each rendered for both channels.
    for (file, total) in [
        ("alertmanager-firing-2-alerts.json", 8),
        ("alertmanager-resolved-2-alerts.json", 12),
        ("alertmanager-mixed-firing-resolved.json", 16),
    ] {
        let a = post(&r.addr, "/alertmanager", &payload(file)).await;
        assert_eq!(
            (a.status, a.text().as_str()),
            (200, r#"{"Message":"OK"}"#),
            "{file}"
        );
        let got = messages(&r.sink, total).await;
        assert_eq!(got.len(), total, "{file}");
    }
    let got = messages(&r.sink, 16).await;
    let resolved: Vec<&Json> = got
        .iter()
        .filter(|m| m["output"] == "telegram" && m["msg"].as_str().unwrap().contains("RESOLVED"))
        .collect();
    assert_eq!(resolved.len(), 3);
    assert!(
        resolved
            .iter()
            .all(|m| m["target"] == "http://127.0.0.1:9/bot***/sendMessage?chat_id=-100200")
    );
    assert!(got.iter().any(|m| {
        m["msg"]
            .as_str()
            .unwrap()
            .contains("<b>endsAt</b>: 18.03.24 10:29:35")
    }));

    let h = request(&r.addr, "GET", "/healthz", None, b"").await;
    assert_eq!(h.status, 200);
    let h: Json = serde_json::from_str(&h.text()).unwrap();
    assert_eq!(h["received"], 9);
    assert_eq!(h["rendered"], 16);
    assert_eq!(h["dropped"], 0);
    assert_eq!(
        r.app
            .stats
            .failed
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_say_what_is_wrong() {
    let r = start(&[
        "--http-k8s-url",
        "/k8s",
        "--http-alertmanager-url",
        "/alertmanager",
    ])
    .await;
    // method, path, content type, body, status, message
    type Case<'a> = (&'a str, &'a str, Option<&'a str>, &'a [u8], u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/k8s",
            Some("application/json"),
            b"",
            400,
            "empty body",
        ),
        (
            "POST",
            "/k8s",
            Some("application/json"),
            b"{nope",
            400,
            "invalid JSON",
        ),
        (
            "POST",
            "/k8s",
            Some("application/json"),
            b"[1]",
            400,
            "admission review: expected an object, got array",
        ),
        (
            "POST",
            "/k8s",
            Some("application/json"),
            br#"{"request":{"uid":7}}"#,
            400,
            "request.uid: expected a string, got number",
        ),
        (
            "POST",
            "/alertmanager",
            Some("application/json"),
            br#"{"alerts":{}}"#,
            400,
            "alerts: expected an array, got object",
        ),
        (
            "POST",
            "/alertmanager",
            Some("application/json"),
            br#"{"alerts":[{"startsAt":"soon"}]}"#,
            400,
            "alerts[0].startsAt: parsing time",
        ),
        (
            "POST",
            "/k8s",
            Some("text/plain"),
            b"{}",
            415,
            "invalid Content-Type, expect application/json",
        ),
        ("POST", "/k8s", None, b"{}", 415, "invalid Content-Type"),
        ("GET", "/k8s", None, b"", 405, "use POST"),
        (
            "POST",
            "/other",
            Some("application/json"),
            b"{}",
            404,
            "no handler for /other",
        ),
    ];
    for (method, path, ct, body, status, msg) in cases {
        let a = request(&r.addr, method, path, ct, body).await;
        assert_eq!(
            a.status,
            status,
            "{method} {path} {:?}: {}",
            String::from_utf8_lossy(body),
            a.text()
        );
        assert!(
            a.text().contains(msg),
            "{method} {path}: {:?} lacks {msg:?}",
            a.text()
        );
    }
    // Charset parameters are fine; a kind the relay does not report is still allowed.
    let a = request(
        &r.addr,
        "POST",
        "/k8s",
        Some("application/json; charset=utf-8"),
        br#"{"request":{"uid":"u9","kind":{"kind":"Lease"}}}"#,
    )
    .await;
    assert_eq!(a.status, 200);
    assert!(
        a.text().contains(r#""allowed":true"#) && a.text().contains(r#""uid":"u9""#),
        "{}",
        a.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_runs_and_failing_templates_never_block_the_answer() {
    let r = start(&[
        "--http-k8s-url",
        "/k8s",
        "--telegram-out-id-token",
        "1:x",
        "--telegram-out-chat-id",
        "-5",
        "--telegram-out-message",
        "{{ .data.kind }} {{ toUpper .data.nope }}",
    ])
    .await;
    let mut dry: Json =
        serde_json::from_slice(&payload("admission-v1-deployment-create.json")).unwrap();
    dry["request"]["dryRun"] = Json::Bool(true);
    let a = post(&r.addr, "/k8s", dry.to_string().as_bytes()).await;
    assert_eq!(a.status, 200);
    assert_eq!(
        r.app
            .stats
            .received
            .load(std::sync::atomic::Ordering::Relaxed),
        0,
        "dry run produced an event"
    );

    // The template fails on every event: the review is still allowed, the failure is logged.
    let a = post(
        &r.addr,
        "/k8s",
        &payload("admission-v1-deployment-create.json"),
    )
    .await;
    assert_eq!(a.status, 200);
    assert!(a.text().contains(r#""allowed":true"#));
    // The failure is counted just before it is logged: wait for the record itself.
    let deadline = Instant::now() + Duration::from_secs(10);
    let err = loop {
        let error = r
            .sink
            .lines()
            .into_iter()
            .find(|l| l.contains(r#""level":"error""#));
        match error {
            Some(e) => break e,
            None if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            None => panic!("no error record"),
        }
    };
    assert!(err.contains("invalid value; expected string"), "{err}");
    assert_eq!(
        r.app
            .stats
            .failed
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

#[test]
fn the_binary_serves_and_prints_messages() {
    use std::io::{Read, Write};
    use std::process::Command;

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_event-relay"));
    cmd.args([
        "--http-listen",
        "127.0.0.1:0",
        "--http-alertmanager-url",
        "/alertmanager",
    ])
    .args(["--slack-url", "http://127.0.0.1:9/api?token=t&channels=C"])
    .args(["--slack-message-template", &template("slack.message")])
    .env("EVENTS_STDOUT_FORMAT", "json");
    let mut relay = Proc::spawn(cmd, Capture::Stdout);
    let line = relay.lines.recv().unwrap();
    let first: Json = serde_json::from_str(&line).unwrap();
    let addr = first["listen"].as_str().unwrap().to_string();

    let body = payload("alertmanager-firing-2-alerts.json");
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "POST /alertmanager HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(&body).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.ends_with(r#"{"Message":"OK"}"#), "{reply}");

    let mut msgs = Vec::new();
    while msgs.len() < 2 {
        let Ok(line) = relay.lines.recv() else {
            break;
        };
        let j: Json = serde_json::from_str(&line).unwrap();
        if j.get("output").is_some() {
            msgs.push(j);
        }
    }
    relay.kill();
    assert_eq!(msgs.len(), 2);
    let texts: Vec<&str> = msgs.iter().map(|m| m["msg"].as_str().unwrap()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("p99 latency above 0.5s on 10.0.1.15:8080")),
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .all(|t| t.starts_with("*FIRING*: HighRequestLatency\n*alertmanager*: ")),
        "{texts:?}"
    );
    assert!(
        msgs.iter()
            .all(|m| m["target"] == "http://127.0.0.1:9/api?token=***&channels=C")
    );
}

#[test]
fn the_binary_refuses_bad_settings_with_a_reason() {
    use std::process::Command;
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_event-relay"))
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    let (code, err, _) = run(&[
        "--telegram-url",
        "https://x/bot1/sendMessage",
        "--telegram-message-template",
        "ok {{.a",
    ]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--telegram-message-template: template: telegram-message:1: unclosed action"),
        "{err}"
    );
    let (code, err, _) = run(&[
        "--telegram-url",
        "u",
        "--telegram-message-template",
        "{{nope}}",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains(r#"function "nope" not defined"#), "{err}");
    let (code, err, _) = run(&["--bogus", "1"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("unknown flag --bogus"), "{err}");
    let (code, _, out) = run(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("--http-k8s-url"), "{out}");
    let (code, _, out) = run(&["version"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("event-relay "), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_render_bound_counts_requests_so_a_big_notification_renders_in_full() {
    // docs/event-relay.md: the 256 renders in flight are requests, not events.
    let r = start(&[
        "--http-alertmanager-url",
        "/alertmanager",
        "--collector-address",
        "127.0.0.1:9",
        "--collector-message-template",
        "{{ .data.labels.instance }}",
        "--output-queue-size",
        "2000",
    ])
    .await;
    let mut body: Json =
        serde_json::from_slice(&payload("alertmanager-firing-2-alerts.json")).unwrap();
    let one = body["alerts"][0].clone();
    let alerts = 1_500;
    assert!(alerts > relay_server::MAX_IN_FLIGHT);
    body["alerts"] = Json::Array(vec![one; alerts]);
    let a = post(&r.addr, "/alertmanager", body.to_string().as_bytes()).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let stats = &r.app.stats;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(20);
    while load(&stats.rendered) < alerts as u64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        (
            load(&stats.received),
            load(&stats.rendered),
            load(&stats.dropped)
        ),
        (alerts as u64, alerts as u64, 0)
    );
}
