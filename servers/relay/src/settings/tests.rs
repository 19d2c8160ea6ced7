use super::*;

fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<Settings, SettingsError> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Settings::parse(&args, &move |k| env.get(k).cloned())
}

#[test]
fn flags_override_environment() {
    let s = parse(
        &["--http-listen", ":8081", "--http-k8s-url=/k8s,/kube"],
        &[
            ("EVENTS_HTTP_LISTEN", ":9"),
            ("EVENTS_HTTP_ALERTMANAGER_URL", "/alertmanager"),
        ],
    )
    .unwrap();
    assert_eq!(s.listen_addr(), "0.0.0.0:8081");
    assert_eq!(s.k8s_paths, ["k8s", "kube"]);
    assert_eq!(s.alertmanager_paths, ["alertmanager"]);
    assert!(s.channels.is_empty());
}

#[test]
fn both_telegram_spellings() {
    let a = parse(
        &[
            "--telegram-out-id-token",
            "1:x",
            "--telegram-out-chat-id",
            "-5",
            "--telegram-out-message",
            "m",
        ],
        &[],
    )
    .unwrap();
    let b = parse(
        &[],
        &[
            (
                "EVENTS_TELEGRAM_URL",
                "https://api.telegram.org/bot1:x/sendMessage?chat_id=-5",
            ),
            ("EVENTS_TELEGRAM_MESSAGE_TEMPLATE", "m"),
        ],
    )
    .unwrap();
    assert_eq!(a.channels, b.channels);
    assert_eq!(
        a.channels[0].vars["URL"],
        "https://api.telegram.org/bot1:x/sendMessage?chat_id=-5"
    );
}

#[test]
fn queue_nats_collector_and_grafana_settings() {
    let s = parse(
        &[
            "--nats-url",
            "nats://127.0.0.1:4222",
            "--nats-message-template",
            "{{ toJSON . }}",
            "--output-queue-size",
            "5",
        ],
        &[
            ("EVENTS_COLLECTOR_ADDRESS", "127.0.0.1:8094"),
            ("EVENTS_COLLECTOR_MESSAGE_TEMPLATE", "m"),
            ("EVENTS_GRAFANA_URL", "http://grafana:3000"),
            ("EVENTS_GRAFANA_PERIOD", "15"),
        ],
    )
    .unwrap();
    let kinds: Vec<ChannelKind> = s.channels.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [ChannelKind::Nats, ChannelKind::Collector]);
    assert_eq!(s.channels[0].url, "events");
    assert_eq!(s.channels[0].server, "nats://127.0.0.1:4222");
    assert_eq!(s.channels[1].url, "127.0.0.1:8094");
    assert_eq!(s.delivery.queue_size, 5);
    assert_eq!(s.delivery.retries, 3);
    let g = s.grafana.unwrap();
    assert_eq!(
        (g.api_key.as_str(), g.period_minutes, g.width),
        ("admin:admin", 15, 1280)
    );
    assert_eq!(s.metrics_path, "/metrics");
    assert!(s.traces.is_none());
    assert_eq!(
        (s.first_byte_timeout.as_secs(), s.read_timeout.as_secs()),
        (10, 30)
    );
}

#[test]
fn bad_settings_are_explained() {
    assert_eq!(
        parse(&["--output-retries", "many"], &[])
            .unwrap_err()
            .to_string(),
        "--output-retries \"many\": expected a whole number"
    );
    assert!(parse(&["--output-queue-size", "0"], &[]).is_err());
    assert!(
        parse(&[], &[("EVENTS_COLLECTOR_ADDRESS", "h:1")])
            .unwrap_err()
            .to_string()
            .contains("--collector-address is set but --collector-message-template is empty")
    );
    assert_eq!(
        parse(&["--nope", "1"], &[]).unwrap_err(),
        SettingsError::UnknownFlag("nope".into())
    );
    assert_eq!(
        parse(&["--http-listen"], &[]).unwrap_err(),
        SettingsError::MissingValue("http-listen".into())
    );
    assert!(
        parse(&["--slack-url", "u"], &[])
            .unwrap_err()
            .to_string()
            .contains("--slack-message-template is empty")
    );
    assert!(parse(&[], &[("EVENTS_STDOUT_FORMAT", "xml")]).is_err());
    assert_eq!(
        parse(&[], &[("EVENTS_HTTP_READ_TIMEOUT", "0")])
            .unwrap_err()
            .to_string(),
        "--http-read-timeout must be at least 1 (seconds)"
    );
}
