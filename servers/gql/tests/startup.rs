//! The binary's start: bad settings refused with the reason, a data path that is no
//! regular file refused instead of read, the schema printed.

mod common;

use std::time::Duration;

use common::BIN;

#[tokio::test]
async fn a_data_path_that_is_no_regular_file_is_refused_instead_of_read() {
    let dir = test_support::net::temp_dir("gql", "fifo");
    let fifo = test_support::net::fifo(&dir, "data.json");
    for data in [fifo.to_str().unwrap(), "/dev/zero"] {
        let run = tokio::process::Command::new(BIN)
            .env("GQL_DATA", data)
            .env("PORT", "0")
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(20), run)
            .await
            .unwrap_or_else(|_| panic!("GQL_DATA={data}: the server should have exited"))
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{data}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("not a regular file"), "{data}: {err}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn the_binary_reports_bad_settings_and_prints_the_schema() {
    let out = tokio::process::Command::new(BIN)
        .arg("--port")
        .arg("nope")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--port must be a whole number"));

    let out = tokio::process::Command::new(BIN)
        .env("GQL_DATA", "/nonexistent/x.json")
        .env("PORT", "0")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/x.json"));
    assert!(out.stdout.is_empty(), "no address announced");

    let out = tokio::process::Command::new(BIN)
        .arg("--print-schema")
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let sdl = String::from_utf8_lossy(&out.stdout);
    assert!(
        sdl.contains("creature(id: ID, name: String): Creature"),
        "{sdl}"
    );

    let out = tokio::process::Command::new(BIN)
        .arg("--help")
        .output()
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("GQL_ASSETS_DIR"));
}
