//! Default-style relay templates rendered over every sample payload, exact output checked.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use relay_templates::event::{Arrival, Event, parse_admission, parse_alertmanager};
use relay_templates::relay::{RelayContext, relay_funcs};
use relay_templates::{Renderer, TemplateSet};

use super::manifest;

fn payload(name: &str) -> Vec<u8> {
    let path = manifest().join("tests/payloads").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2024-03-18T10:04:05.123456789Z")
        .unwrap()
        .to_utc()
}

fn events(name: &str) -> Vec<Event> {
    if name.starts_with("admission") {
        let a = parse_admission(&payload(name), &Arrival::new("/k8s", now())).unwrap();
        a.event.into_iter().collect()
    } else {
        parse_alertmanager(&payload(name), &Arrival::new("/alertmanager", now())).unwrap()
    }
}

fn set(file: &str) -> TemplateSet {
    let env = HashMap::from([
        (
            "EVENTS_TELEGRAM_BOT_DEVOPS".to_string(),
            "111:dev=-1001".to_string(),
        ),
        (
            "EVENTS_TELEGRAM_BOT_PLATFORM".to_string(),
            "123:abc=-100200".to_string(),
        ),
    ]);
    let vars = HashMap::from([(
        "URL".to_string(),
        "https://api.telegram.org/bot%s/sendMessage?chat_id=%s".to_string(),
    )]);
    let mut set = TemplateSet::new(relay_funcs(RelayContext::from_maps(env, vars)));
    let text = std::fs::read_to_string(manifest().join("tests/templates").join(file)).unwrap();
    // The relay parses a message option under the output's template name, like the original.
    set.parse(&file.replace('.', "-"), &text).unwrap();
    set
}

const DEPLOYMENT_TG: &str = "<b>CREATE</b>: Deployment / shop.web\n<b>k8s</b>: 18.03.24 10:04:05\nby <i>alice@example.com</i>\n<b>Replicas</b> => 3\n<b>Selector</b> => map[matchLabels:map[app:web]]\n<b>nginx</b> => nginx:1.25.3 [TCP: 80]\n<b>metrics</b> => nginx/nginx-prometheus-exporter:1.1.0 [TCP: 9113]";
const POD_DELETE_TG: &str = "<b>DELETE</b>: Pod / shop.web-7d9c8b6f5d-x2l4q\n<b>k8s</b>: 18.03.24 10:04:05\nby <i>bob@example.com</i>";

fn alert_tg(status: &str, name: &str, line: &str) -> String {
    format!(
        "\n    <b>{}</b>: {name}\n<b>alertmanager</b>: 18.03.24 10:04:05\n{line}",
        status.to_uppercase()
    )
}

#[test]
fn telegram_message_over_every_payload() {
    let set = set("telegram.message");
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "admission-v1-deployment-create.json",
            vec![DEPLOYMENT_TG.to_string()],
        ),
        (
            "admission-v1-pod-delete.json",
            vec![POD_DELETE_TG.to_string()],
        ),
        // A service-account user: the template prints nothing, so nothing is sent.
        (
            "admission-v1beta1-pod-create-serviceaccount.json",
            vec![String::new()],
        ),
        (
            "alertmanager-firing-2-alerts.json",
            vec![
                alert_tg(
                    "firing",
                    "HighRequestLatency",
                    "<b>StartsAt</b>: 18.03.24 10:04:05",
                ),
                alert_tg(
                    "firing",
                    "HighRequestLatency",
                    "<b>StartsAt</b>: 18.03.24 10:04:35",
                ),
            ],
        ),
        (
            "alertmanager-resolved-2-alerts.json",
            vec![
                alert_tg(
                    "resolved",
                    "HighRequestLatency",
                    "<b>endsAt</b>: 18.03.24 10:31:05",
                ),
                alert_tg(
                    "resolved",
                    "HighRequestLatency",
                    "<b>endsAt</b>: 18.03.24 10:29:35",
                ),
            ],
        ),
        (
            "alertmanager-mixed-firing-resolved.json",
            vec![
                alert_tg(
                    "firing",
                    "KubePodCrashLooping",
                    "<b>StartsAt</b>: 18.03.24 11:00:00",
                ),
                alert_tg(
                    "resolved",
                    "KubePodCrashLooping",
                    "<b>endsAt</b>: 18.03.24 11:02:00",
                ),
            ],
        ),
    ];
    for (file, want) in cases {
        let got: Vec<String> = events(file)
            .iter()
            .map(|e| set.render("telegram-message", &e.to_value()).unwrap())
            .collect();
        assert_eq!(got, want, "{file}");
    }
}

#[test]
fn slack_message_over_every_payload() {
    let set = set("slack.message");
    let deployment = "*CREATE*: Deployment / shop.web\n*k8s*: 18.03.24 10:04:05\nby _alice@example.com_\n*Replicas* => 3\n*Selector* => map[matchLabels:map[app:web]]\n*nginx* => nginx:1.25.3 [TCP: 80]\n*metrics* => nginx/nginx-prometheus-exporter:1.1.0 [TCP: 9113]";
    let delete =
        "*DELETE*: Pod / shop.web-7d9c8b6f5d-x2l4q\n*k8s*: 18.03.24 10:04:05\nby _bob@example.com_";
    let alert = |status: &str, name: &str, line: &str, summary: &str| {
        format!(
            "*{}*: {name}\n*alertmanager*: 18.03.24 10:04:05\n{line}\n_{summary}_",
            status.to_uppercase()
        )
    };
    let p15 = "p99 latency above 0.5s on 10.0.1.15:8080";
    let p16 = "p99 latency above 0.5s on 10.0.1.16:8080";
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "admission-v1-deployment-create.json",
            vec![deployment.to_string()],
        ),
        ("admission-v1-pod-delete.json", vec![delete.to_string()]),
        (
            "admission-v1beta1-pod-create-serviceaccount.json",
            vec![String::new()],
        ),
        (
            "alertmanager-firing-2-alerts.json",
            vec![
                alert(
                    "firing",
                    "HighRequestLatency",
                    "*StartsAt*: 18.03.24 10:04:05",
                    p15,
                ),
                alert(
                    "firing",
                    "HighRequestLatency",
                    "*StartsAt*: 18.03.24 10:04:35",
                    p16,
                ),
            ],
        ),
        (
            "alertmanager-resolved-2-alerts.json",
            vec![
                alert(
                    "resolved",
                    "HighRequestLatency",
                    "*endsAt*: 18.03.24 10:31:05",
                    p15,
                ),
                alert(
                    "resolved",
                    "HighRequestLatency",
                    "*endsAt*: 18.03.24 10:29:35",
                    p16,
                ),
            ],
        ),
        (
            "alertmanager-mixed-firing-resolved.json",
            vec![
                alert(
                    "firing",
                    "KubePodCrashLooping",
                    "*StartsAt*: 18.03.24 11:00:00",
                    "Pod shop/web-7d9c8b6f5d-x2l4q (nginx) is in waiting state (reason: \"CrashLoopBackOff\").",
                ),
                alert(
                    "resolved",
                    "KubePodCrashLooping",
                    "*endsAt*: 18.03.24 11:02:00",
                    "Pod shop/web-7d9c8b6f5d-q9z8k (nginx) is in waiting state (reason: \"CrashLoopBackOff\").",
                ),
            ],
        ),
    ];
    for (file, want) in cases {
        let got: Vec<String> = events(file)
            .iter()
            .map(|e| set.render("slack-message", &e.to_value()).unwrap())
            .collect();
        assert_eq!(got, want, "{file}");
    }
}

#[test]
fn telegram_selector_over_every_payload() {
    let set = set("telegram.selector");
    let devops = "\n      https://api.telegram.org/bot111:dev/sendMessage?chat_id=-1001\n";
    let platform = "https://api.telegram.org/bot123:abc/sendMessage?chat_id=-100200\n";
    for (file, want) in [
        ("admission-v1-deployment-create.json", devops),
        ("admission-v1-pod-delete.json", devops),
        ("admission-v1beta1-pod-create-serviceaccount.json", devops),
        ("alertmanager-firing-2-alerts.json", platform),
        ("alertmanager-resolved-2-alerts.json", platform),
        ("alertmanager-mixed-firing-resolved.json", platform),
    ] {
        for e in events(file) {
            assert_eq!(
                set.render("telegram-selector", &e.to_value()).unwrap(),
                want,
                "{file}"
            );
        }
    }
}

#[test]
fn event_data_layout_matches_the_original() {
    let ev = events("admission-v1-deployment-create.json").remove(0);
    let j = &ev.json;
    assert_eq!(j["type"], "K8sEvent");
    assert_eq!(j["channel"], "k8s");
    assert_eq!(j["time"], "2024-03-18T10:04:05.123Z");
    assert_eq!(j["timeNano"], 1710756245123456789i64);
    assert_eq!(j["data"]["kind"], "Deployment");
    assert_eq!(j["data"]["location"], "shop.web");
    assert_eq!(j["data"]["operation"], "Create");
    assert_eq!(
        j["data"]["user"],
        serde_json::json!({"id": "4d2b7c5e-1f0e-4a63-9a55-2b0b7f3f9e10", "name": "alice@example.com"})
    );
    assert_eq!(j["data"]["object"]["spec"]["replicas"], 3);
    // timeNano is a float64 to templates, as in Go.
    let set = {
        let mut s = TemplateSet::new(relay_funcs(RelayContext::default()));
        s.parse(
            "t",
            "{{.timeNano}}|{{.data.object.spec.replicas}}|{{toJSON .data.user}}",
        )
        .unwrap();
        s
    };
    assert_eq!(
        set.render("t", &ev.to_value()).unwrap(),
        r#"1.7107562451234568e+18|3|{"id":"4d2b7c5e-1f0e-4a63-9a55-2b0b7f3f9e10","name":"alice@example.com"}"#
    );

    let del = events("admission-v1-pod-delete.json").remove(0);
    assert!(
        del.json["data"].get("object").is_none(),
        "DELETE carries no object"
    );
    assert_eq!(del.json["data"]["location"], "shop.web-7d9c8b6f5d-x2l4q");

    let old = events("admission-v1beta1-pod-create-serviceaccount.json").remove(0);
    assert_eq!(
        old.json["data"]["location"],
        "batch.report-1571746740-glbhp"
    );

    let alerts = events("alertmanager-resolved-2-alerts.json");
    assert_eq!(alerts.len(), 2);
    let keys: Vec<&String> = alerts[0].json["data"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "annotations",
            "endsAt",
            "fingerprint",
            "generatorURL",
            "labels",
            "startsAt",
            "status"
        ]
    );
    assert_eq!(alerts[1].json["data"]["endsAt"], "2024-03-18T10:29:35Z");
    assert_eq!(
        alerts[0].json["data"]["startsAt"],
        "2024-03-18T10:04:05.123456789Z"
    );
}
