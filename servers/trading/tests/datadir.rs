//! A data directory written by an earlier version still loads: keys authenticate with
//! their old secrets, their last nonce is still refused, and stored account data reads
//! back as that version answered it.
//!
//! The fixture `tests/data/datadir-v1/` was written by the server of commit 7bc9492 (before
//! issue #29) with `tests/data/make_datadir_v1.py`; `expect.json` holds the keys and what
//! that version answered to read-only calls.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;
use trading_server::{Settings, system_clock};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/datadir-v1")
}

/// A private copy: the server writes to its directory, the fixture must stay as committed.
fn copy_of_fixture(tag: &str) -> PathBuf {
    let dir = temp_dir(tag);
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["trading.sqlite", "master.key"] {
        std::fs::copy(fixture().join(name), dir.join(name)).unwrap();
    }
    dir
}

/// The current time as an SDK nonce (100 ns units), plus `step` so each call differs.
fn wall_nonce(step: u64) -> u128 {
    let ms = system_clock()();
    u128::from(ms) * 10_000 + u128::from(step)
}

async fn signed(addr: std::net::SocketAddr, key: &Value, path: &str, nonce: u128) -> (u16, Value) {
    let ep = trading_model::Catalogue::builtin().get(path).unwrap();
    let method = ep.methods[0].as_str();
    let token = legacy_token(key["secret"].as_str().unwrap(), nonce);
    let r = call(
        addr,
        method,
        &format!("/api/v2/{path}"),
        &[
            FORM,
            ("Key", key["key"].as_str().unwrap()),
            ("Authorization", &token),
        ],
        b"",
    )
    .await;
    let v = envelope(&r, path);
    (r.status, v)
}

/// The parts of an answer that depend on stored data only, not on the clock.
fn stable(path: &str, data: &Value) -> Value {
    match path {
        // Prices, "in how long" and the order of coming reminders move with the clock;
        // ids and texts do not.
        "marketplace/signals-position" | "calendar/list-schedule" => {
            let mut rows: Vec<Value> = data
                .as_array()
                .unwrap()
                .iter()
                .map(|r| serde_json::json!({"id": r["id"], "name": r.get("name"), "text": r.get("text")}))
                .collect();
            rows.sort_by_key(|r| r["id"].as_i64());
            Value::Array(rows)
        }
        _ => data.clone(),
    }
}

#[tokio::test]
async fn a_data_directory_of_the_previous_version_loads() {
    let expect: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("expect.json")).unwrap())
            .unwrap();
    let dir = copy_of_fixture("datadir-v1");
    let s = start(Settings {
        data_dir: Some(dir.clone()),
        clock: system_clock(),
        ip_per_minute: 0,
        ..Settings::default()
    })
    .await;
    let mut step = 0;
    for (name, reads) in expect["reads"].as_object().unwrap() {
        let key = &expect["keys"][name];
        // The newest token the key signed before the upgrade is still a replay.
        let last = key["last_nonce"].as_u64().unwrap();
        let (status, v) = signed(s.addr, key, "user/account-details", last.into()).await;
        assert_eq!(
            (status, &v["data"]["code"]),
            (401, &Value::from(2011)),
            "{name}: {v}"
        );
        for (path, before) in reads.as_object().unwrap() {
            step += 1;
            let (status, v) = signed(s.addr, key, path, wall_nonce(step)).await;
            assert_eq!(Value::from(status), before["status"], "{name} {path}: {v}");
            assert_eq!(
                stable(path, &v["data"]),
                stable(path, &before["data"]),
                "{name} {path}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
