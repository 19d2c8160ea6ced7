use serde::Deserialize;

use super::{manifest, render};
use relay_templates::Value;

#[derive(Deserialize)]
struct Case {
    name: String,
    template: String,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    want: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[test]
fn go_conformance_table() {
    let text = std::fs::read_to_string(manifest().join("tests/conformance.yaml")).unwrap();
    let cases: Vec<Case> = serde_yaml::from_str(&text).unwrap();
    assert!(cases.len() >= 120, "table has {} cases", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        assert!(
            c.want.is_some() != c.error.is_some(),
            "{}: exactly one of want/error",
            c.name
        );
        let json: serde_json::Value = serde_json::from_str(c.data.as_deref().unwrap_or("{}"))
            .unwrap_or_else(|e| panic!("{}: data: {e}", c.name));
        let got = render("main", &c.template, "main", &Value::from_json(&json));
        match (&got, &c.want, &c.error) {
            (Ok(out), Some(want), _) if out == want => {}
            (Err(e), _, Some(sub)) if e.to_string().contains(sub.as_str()) => {}
            _ => failures.push(format!(
                "{}: template {:?}\n   want {:?} / error containing {:?}\n   got  {:?}",
                c.name, c.template, c.want, c.error, got
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
