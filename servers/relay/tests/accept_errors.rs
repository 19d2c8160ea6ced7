//! Out of file descriptors, the relay waits before it accepts again instead of spinning
//! (and logging) without pause, and serves again once descriptors are free.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_errors_back_off_and_the_relay_recovers() {
    let args: Vec<String> = vec!["--http-alertmanager-url".into(), "/alertmanager".into()];
    let relay = Relay::start_with_file_limit(64, &args, &[]);
    let accept_failures = |relay: &Relay| {
        relay
            .records()
            .iter()
            .filter(|r| {
                r["msg"]
                    .as_str()
                    .is_some_and(|m| m.contains("accept failed"))
            })
            .count()
    };
    // Connections that never speak, more than the relay has descriptors for.
    let mut held = Vec::new();
    for _ in 0..80 {
        held.push(TcpStream::connect(&relay.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let first = accept_failures(&relay);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let in_two_seconds = accept_failures(&relay) - first;
    assert!(
        first > 0,
        "no accept failed: the file limit was not reached"
    );
    // Pauses of 5 ms doubling to 1 s give about 8 in two seconds; without them, thousands.
    assert!(
        in_two_seconds <= 20,
        "{in_two_seconds} failed accepts logged in two seconds"
    );

    drop(held);
    let body = payload("alertmanager-firing-2-alerts.json");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (status, answer, _) = relay.post("/alertmanager", &body).await;
        if status == 200 {
            assert_eq!(answer, r#"{"Message":"OK"}"#);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not served again: {status} {answer}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
