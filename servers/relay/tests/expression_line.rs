//! Without Grafana, every alert message still carries the alert's expression on a line of
//! its own, as the original's did (or "No alert expression" when the alert has none).

use super::*;

/// Two alerts with the latency expression (in `generatorURL`), one with none at all.
fn alerts() -> Vec<u8> {
    let mut body: Json =
        serde_json::from_slice(&payload("alertmanager-firing-2-alerts.json")).unwrap();
    let alerts = body["alerts"].as_array_mut().unwrap();
    let mut bare = alerts[0].clone();
    bare["labels"]["alertname"] = json!("NoExpression");
    bare["generatorURL"] = json!("http://prometheus.example.com:9090/graph?g0.tab=1");
    alerts.push(bare);
    body.to_string().into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_messages_carry_the_expression_line_without_grafana() {
    let tg = Fake::start(telegram_ok()).await;
    let slack_addr = Arc::new(Mutex::new(String::new()));
    let sl = Fake::start(slack(Arc::clone(&slack_addr))).await;
    *slack_addr.lock().unwrap() = sl.url();
    let wc = Fake::start(Arc::new(|_, _| ok_json(json!({"message_id": "m.1"})))).await;
    let template = "{{ .data.status | toUpper }}: {{ .data.labels.alertname }}";
    let args: Vec<String> = vec![
        "--http-alertmanager-url".into(),
        "/alertmanager".into(),
        "--telegram-url".into(),
        format!("{}/bot1:t/sendMessage?chat_id=7", tg.url()),
        "--telegram-message-template".into(),
        template.into(),
        "--slack-url".into(),
        format!("{}/api/files.upload?token=xoxb-1&channels=C1", sl.url()),
        "--slack-message-template".into(),
        template.into(),
        "--workchat-url".into(),
        format!("{}/v9.0/me/messages?access_token=wp-1", wc.url()),
        "--workchat-message-template".into(),
        template.into(),
    ];
    let relay = Relay::start(&args, &[]);
    let (status, body, _) = relay.post("/alertmanager", &alerts()).await;
    assert_eq!((status, body.as_str()), (200, r#"{"Message":"OK"}"#));

    let escaped = EXPR_LATENCY.replace('>', "&gt;");
    let firing = "FIRING: HighRequestLatency";
    let bare = "FIRING: NoExpression\nNo alert expression";

    let tg_texts: Vec<String> = tg
        .wait(3, |_| true)
        .await
        .iter()
        .map(|s| s.field("text"))
        .collect();
    let line = format!("{firing}\n<i>{escaped}</i>");
    assert_eq!(tg_texts, [line.as_str(), &line, bare]);

    let sl_texts: Vec<String> = sl
        .wait(3, |_| true)
        .await
        .iter()
        .map(|s| {
            assert_eq!(s.path(), "/api/chat.postMessage");
            s.json()["text"].as_str().unwrap().to_string()
        })
        .collect();
    let line = format!("{firing}\n_{escaped}_");
    assert_eq!(sl_texts, [line.as_str(), &line, bare]);

    let wc_texts: Vec<String> = wc
        .wait(3, |_| true)
        .await
        .iter()
        .map(|s| {
            serde_json::from_str::<Json>(&s.field("message")).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let line = format!("{firing}\n_{EXPR_LATENCY}_");
    assert_eq!(wc_texts, [line.as_str(), &line, bare]);

    // The logged rendering is the template's output alone.
    assert_eq!(relay.rendered("telegram")[0], firing);
}
