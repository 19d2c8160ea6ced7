//! A client that stalls cannot hold a connection open: silence, half a request's headers
//! and half its body are each cut off after their timeout (shortened here to one and two
//! seconds via the environment), while a normal request goes through at the same time.

use super::*;

/// Connects, writes `sent`, and waits up to `patience` for the relay to close the
/// connection: what it answered, and after how long it closed (`None`: still open).
async fn held(addr: &str, sent: &[u8], patience: Duration) -> (String, Option<Duration>) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(sent).await.unwrap();
    let t = Instant::now();
    let mut answer = Vec::new();
    let closed = tokio::time::timeout(patience, s.read_to_end(&mut answer))
        .await
        .is_ok();
    let answer = String::from_utf8_lossy(&answer).to_string();
    (answer, closed.then(|| t.elapsed()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_requests_are_cut_off_while_a_normal_one_goes_through() {
    let args: Vec<String> = vec!["--http-alertmanager-url".into(), "/alertmanager".into()];
    let env = [
        ("EVENTS_HTTP_FIRST_BYTE_TIMEOUT", "1".to_string()),
        ("EVENTS_HTTP_READ_TIMEOUT", "2".to_string()),
    ];
    let relay = Relay::start(&args, &env);
    let body = payload("alertmanager-firing-2-alerts.json");
    let head = format!(
        "POST /alertmanager HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let half_head = &head.as_bytes()[..head.len() / 2];
    let half_upload = [head.as_bytes(), &body[..body.len() / 2]].concat();

    let patience = Duration::from_secs(5);
    let (silent, headers, upload, normal) = tokio::join!(
        held(&relay.addr, b"", patience),
        held(&relay.addr, half_head, patience),
        held(&relay.addr, &half_upload, patience),
        async {
            // While the three are held.
            tokio::time::sleep(Duration::from_millis(300)).await;
            relay.post("/alertmanager", &body).await
        },
    );

    let (status, answer, _) = normal;
    assert_eq!((status, answer.as_str()), (200, r#"{"Message":"OK"}"#));
    // Silence is cut by the first-byte timeout (before the read timeout could), the rest by
    // the read timeout; the upper bounds leave room for a busy machine.
    for (what, (answer, closed), from_ms, before_ms) in [
        ("silent", &silent, 900, 1900),
        ("half headers", &headers, 1900, 4000),
        ("half body", &upload, 1900, 4000),
    ] {
        let closed = closed.unwrap_or_else(|| panic!("{what}: still open after {patience:?}"));
        assert!(
            closed >= Duration::from_millis(from_ms) && closed < Duration::from_millis(before_ms),
            "{what}: closed after {closed:?}"
        );
        if what == "half body" {
            assert!(answer.starts_with("HTTP/1.1 408 "), "{what}: {answer:?}");
            assert!(answer.contains("body not received within 2s"), "{answer:?}");
        } else {
            assert_eq!(answer, "", "{what}");
        }
    }
}
