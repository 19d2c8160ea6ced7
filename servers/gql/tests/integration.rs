//! The server over real sockets on 127.0.0.1: `serve` in-process, and the real binary.

mod common;

use std::{net::SocketAddr, time::Duration};

use common::{Binary, LIMIT, Reply, exchange, fake_assets, get_query, post_json, request};
use gql_server::{Assets, Settings, serve};
use serde_json::{Value, json};
use test_support::http::parse;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::oneshot,
    task::JoinHandle,
    time::timeout,
};

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), gql_server::ServerError>>,
}

impl Server {
    async fn start(settings: Settings) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, settings, async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            stop: Some(stop),
            task,
        }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        timeout(LIMIT, self.task)
            .await
            .expect("server stops in time")
            .unwrap()
            .unwrap();
    }
}

#[tokio::test]
async fn post_json_runs_queries_with_fields_in_query_order() {
    let server = Server::start(Settings::default()).await;
    let reply = post_json(
        server.addr,
        json!({"query": r#"{ creature(name: "Pebbit") { name id weight { maximum minimum } } }"#}),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(
        reply.text(),
        r#"{"data":{"creature":{"name":"Pebbit","id":"007","weight":{"maximum":"11.025kg","minimum":"8.575kg"}}}}"#
    );
    let all = post_json(server.addr, json!({"query": "{ creatures { id } }"})).await;
    assert!(all.json()["data"]["creatures"].as_array().unwrap().len() >= 50);
    let unknown = post_json(
        server.addr,
        json!({"query": r#"{ creature(name: "Nobody") { id } }"#}),
    )
    .await;
    assert_eq!(unknown.json(), json!({"data": {"creature": null}}));
    server.stop().await;
}

#[tokio::test]
async fn get_runs_queries_but_refuses_mutations() {
    let server = Server::start(Settings::default()).await;
    let reply = get_query(server.addr, r#"{ creatureById(id: "12") { name } }"#).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["data"]["creatureById"]["name"], "Tempestral");

    let mutation = get_query(
        server.addr,
        r#"mutation { createMessage(input: {content: "via GET"}) { id } }"#,
    )
    .await;
    assert_eq!(mutation.status, 405);
    assert_eq!(mutation.header("allow"), Some("POST"));
    assert_eq!(
        mutation.json()["errors"][0]["message"],
        "Can only perform a mutation operation from a POST request."
    );
    let after = get_query(server.addr, r#"{ getMessage(id: "1") { id } }"#).await;
    assert_eq!(
        after.json()["data"]["getMessage"],
        Value::Null,
        "nothing stored"
    );

    let vars = request(
        server.addr,
        "GET",
        "/graphql?query=query(%24n%3AString!)%7Bcreature(name%3A%24n)%7Bid%7D%7D&variables=%7B%22n%22%3A%22Cindle%22%7D",
        &[],
        b"",
    )
    .await;
    assert_eq!(
        vars.json()["data"]["creature"]["id"],
        "001",
        "{}",
        vars.text()
    );
    server.stop().await;
}

#[tokio::test]
async fn mutations_create_update_and_unknown_ids_error() {
    let server = Server::start(Settings::default()).await;
    let created = post_json(
        server.addr,
        json!({
            "query": "mutation($input: MessageInput) { createMessage(input: $input) { id content author } }",
            "variables": {"input": {"content": "first", "author": "kim"}},
        }),
    )
    .await;
    assert_eq!(created.status, 200, "{}", created.text());
    let id = created.json()["data"]["createMessage"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let updated = post_json(
        server.addr,
        json!({"query": format!(r#"mutation {{ updateMessage(id: "{id}", input: {{content: "second", author: "kim"}}) {{ content }} }}"#)}),
    )
    .await;
    assert_eq!(updated.json()["data"]["updateMessage"]["content"], "second");

    let fetched = get_query(
        server.addr,
        &format!(r#"{{ getMessage(id: "{id}") {{ id content author }} }}"#),
    )
    .await;
    assert_eq!(
        fetched.json()["data"]["getMessage"],
        json!({"id": id, "content": "second", "author": "kim"})
    );

    let missing = post_json(
        server.addr,
        json!({"query": r#"mutation { updateMessage(id: "999", input: {content: "x"}) { id } }"#}),
    )
    .await;
    assert_eq!(missing.status, 200);
    let body = missing.json();
    assert_eq!(body["data"]["updateMessage"], Value::Null);
    assert_eq!(body["errors"][0]["message"], "no message with id \"999\"");
    assert_eq!(body["errors"][0]["path"], json!(["updateMessage"]));
    assert_eq!(body["errors"][0]["extensions"]["code"], "MESSAGE_NOT_FOUND");
    server.stop().await;
}

#[tokio::test]
async fn concurrent_mutations_get_distinct_ids() {
    let server = Server::start(Settings::default()).await;
    let addr = server.addr;
    let tasks: Vec<_> = (0..24)
        .map(|i| {
            tokio::spawn(async move {
                let reply = post_json(
                    addr,
                    json!({"query": format!(r#"mutation {{ createMessage(input: {{content: "{i}"}}) {{ id }} }}"#)}),
                )
                .await;
                reply.json()["data"]["createMessage"]["id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.unwrap());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 24);
    server.stop().await;
}

#[tokio::test]
async fn other_body_types_are_accepted() {
    let server = Server::start(Settings::default()).await;
    let raw = request(
        server.addr,
        "POST",
        "/graphql",
        &[("Content-Type", "application/graphql")],
        br#"{ creature(name: "Sparkit") { id } }"#,
    )
    .await;
    assert_eq!(
        raw.json()["data"]["creature"]["id"],
        "016",
        "{}",
        raw.text()
    );
    let form = request(
        server.addr,
        "POST",
        "/graphql",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"query=mutation%7BcreateMessage(input%3A%7Bcontent%3A%22f%22%7D)%7Bcontent%7D%7D",
    )
    .await;
    assert_eq!(
        form.json()["data"]["createMessage"]["content"],
        "f",
        "{}",
        form.text()
    );
    let charset = request(
        server.addr,
        "POST",
        "/graphql",
        &[("Content-Type", "application/json; charset=utf-8")],
        br#"{"query": "{ creatures { id } }"}"#,
    )
    .await;
    assert_eq!(charset.status, 200);
    server.stop().await;
}

#[tokio::test]
async fn bad_requests_get_clear_errors_and_statuses() {
    let server = Server::start(Settings::default()).await;
    let addr = server.addr;
    let cases: Vec<(Reply, u16, &str)> = vec![
        (
            post_json(addr, json!({"query": "{ creatures { id "})).await,
            400,
            "Unexpected end of input",
        ),
        (
            post_json(addr, json!({"query": "{ creatures { weight { foo } } }"})).await,
            400,
            "foo",
        ),
        (
            post_json(addr, json!({})).await,
            400,
            "Must provide query string.",
        ),
        (
            request(
                addr,
                "POST",
                "/graphql",
                &[("Content-Type", "application/json")],
                b"{nope",
            )
            .await,
            400,
            "not valid JSON",
        ),
        (
            request(
                addr,
                "POST",
                "/graphql",
                &[("Content-Type", "text/plain")],
                b"{ creatures { id } }",
            )
            .await,
            415,
            "unsupported content type",
        ),
        (
            request(addr, "PUT", "/graphql", &[], b"").await,
            405,
            "use GET, POST",
        ),
        (
            request(addr, "GET", "/elsewhere", &[], b"").await,
            404,
            "the endpoint is /graphql",
        ),
        (
            request(
                addr,
                "GET",
                "/graphql",
                &[("Accept", "application/json")],
                b"",
            )
            .await,
            400,
            "Must provide query string.",
        ),
    ];
    for (reply, status, text) in cases {
        assert_eq!(reply.status, status, "{}", reply.text());
        let message = reply.json()["errors"][0]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains(text), "{message:?} lacks {text:?}");
    }
    let syntax = post_json(addr, json!({"query": "{ creatures { id "})).await;
    assert_eq!(syntax.json()["errors"][0]["locations"][0]["line"], 1);
    let put = request(addr, "PUT", "/graphql", &[], b"").await;
    assert_eq!(put.header("allow"), Some("GET, POST"));
    let root = request(addr, "GET", "/", &[], b"").await;
    assert_eq!(root.status, 302);
    assert_eq!(root.header("location"), Some("/graphql"));
    server.stop().await;
}

#[tokio::test]
async fn depth_and_complexity_limits_answer_400_with_codes() {
    let mut settings = Settings::default();
    settings.demo.limits.max_depth = 5;
    settings.demo.limits.max_complexity = 30;
    let server = Server::start(settings).await;
    let deep = post_json(
        server.addr,
        json!({"query": "{ creatures { evolutions { creature { evolutions { creature { name } } } } } }"}),
    )
    .await;
    assert_eq!(deep.status, 400);
    let error = &deep.json()["errors"][0];
    assert_eq!(
        error["message"],
        "Query is too deep: it nests more than 5 levels"
    );
    assert_eq!(error["extensions"]["code"], "DEPTH_LIMIT_EXCEEDED");

    let wide = post_json(
        server.addr,
        json!({"query": "{ creatures { ...B } } fragment A on Creature { id name } fragment B on Creature { ...A ...A ...A ...A ...A ...A ...A ...A ...A ...A ...A ...A ...A ...A ...A ...A }"}),
    )
    .await;
    assert_eq!(wide.status, 400);
    assert_eq!(
        wide.json()["errors"][0]["extensions"]["code"],
        "COMPLEXITY_LIMIT_EXCEEDED"
    );
    let fine = post_json(server.addr, json!({"query": "{ creatures { id name } }"})).await;
    assert_eq!(fine.status, 200);
    server.stop().await;
}

#[tokio::test]
async fn request_size_limits() {
    let mut settings = Settings::default();
    settings.max_body_bytes = 1024;
    let server = Server::start(settings).await;
    let big = format!(
        r#"{{"query": "{{ creatures {{ id }} }}", "pad": "{}"}}"#,
        "x".repeat(2000)
    );
    let declared = request(
        server.addr,
        "POST",
        "/graphql",
        &[("Content-Type", "application/json")],
        big.as_bytes(),
    )
    .await;
    assert_eq!(declared.status, 413);
    assert!(declared.text().contains("larger than 1024 bytes"));

    // Chunked, so the size is only known while reading.
    let mut raw = format!(
        "POST /graphql HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        server.addr
    )
    .into_bytes();
    for _ in 0..4 {
        raw.extend_from_slice(format!("{:x}\r\n{}\r\n", 500, "y".repeat(500)).as_bytes());
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let chunked = exchange(server.addr, &raw).await;
    assert_eq!(chunked.status, 413, "{}", chunked.text());

    let long = get_query(
        server.addr,
        &format!("{{ creatures {{ {} }} }}", "id ".repeat(600)),
    )
    .await;
    assert_eq!(long.status, 414);
    server.stop().await;
}

#[tokio::test]
async fn slow_body_times_out() {
    let mut settings = Settings::default();
    settings.request_timeout = Duration::from_millis(300);
    let server = Server::start(settings).await;
    let reply = timeout(LIMIT, async {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        let head = format!(
            "POST /graphql HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{{\"query\"",
            server.addr
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).await.unwrap();
        parse(&bytes)
    })
    .await
    .unwrap();
    assert_eq!(reply.status, 408);
    server.stop().await;
}

#[tokio::test]
async fn explorer_page_uses_cdn_by_default() {
    let server = Server::start(Settings::default()).await;
    let page = request(
        server.addr,
        "GET",
        "/graphql",
        &[("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")],
        b"",
    )
    .await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(
        page.text()
            .contains("https://cdn.jsdelivr.net/npm/graphiql@3.9.0/graphiql.min.js")
    );
    let asset = request(
        server.addr,
        "GET",
        "/graphql/assets/graphiql/graphiql.min.js",
        &[],
        b"",
    )
    .await;
    assert_eq!(asset.status, 404, "no local assets without a directory");
    server.stop().await;
}

#[tokio::test]
async fn explorer_serves_local_assets_and_nothing_else() {
    let dir = fake_assets();
    let mut settings = Settings::default();
    settings.assets = Assets::Dir(dir.clone());
    let server = Server::start(settings).await;
    let page = request(
        server.addr,
        "GET",
        "/graphql",
        &[("Accept", "text/html")],
        b"",
    )
    .await;
    assert!(
        page.text()
            .contains(r#"<script src="/graphql/assets/graphiql/graphiql.min.js">"#)
    );
    assert!(
        !page.text().contains("https://"),
        "offline page loads nothing remote"
    );
    let js = request(
        server.addr,
        "GET",
        "/graphql/assets/graphiql/graphiql.min.js",
        &[],
        b"",
    )
    .await;
    assert_eq!(js.status, 200);
    assert_eq!(js.text(), "/* graphiql */");
    assert_eq!(
        js.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    let css = request(
        server.addr,
        "GET",
        "/graphql/assets/graphiql/graphiql.min.css",
        &[],
        b"",
    )
    .await;
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    for path in [
        "/graphql/assets/graphiql/package.json",
        "/graphql/assets/../../etc/passwd",
        "/graphql/assets/graphiql/../react/umd/react.production.min.js",
    ] {
        let reply = request(server.addr, "GET", path, &[], b"").await;
        assert_eq!(reply.status, 404, "{path}");
    }
    // express-graphql's `raw` runs the URL's query even for a browser.
    let run = request(
        server.addr,
        "GET",
        "/graphql?query=%7Bcreatures%7Bid%7D%7D&raw",
        &[("Accept", "text/html")],
        b"",
    )
    .await;
    assert_eq!(run.header("content-type"), Some("application/json"));
    assert_eq!(run.json()["data"]["creatures"][0]["id"], "001");
    server.stop().await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn bad_settings_fail_at_start() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut settings = Settings::default();
    settings.assets = Assets::Dir("/nonexistent/node_modules".into());
    let err = serve(listener, settings, std::future::pending())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("npm install"), "{err}");

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut settings = Settings::default();
    settings.data = Some("/nonexistent/creatures.json".into());
    let err = serve(listener, settings, std::future::pending())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/creatures.json"),
        "{err}"
    );
}

#[tokio::test]
async fn shutdown_stops_accepting() {
    let server = Server::start(Settings::default()).await;
    let addr = server.addr;
    server.stop().await;
    assert!(TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn the_binary_serves_on_port_from_env_and_stops_on_sigterm() {
    let dir = fake_assets();
    let data = dir.join("creatures.json");
    std::fs::write(
        &data,
        r#"[{"id": "1", "name": "Testling", "weight": {"minimum": "1kg", "maximum": "2kg"}}]"#,
    )
    .unwrap();
    let binary = Binary::start(
        &[
            ("GQL_ASSETS_DIR", dir.to_str().unwrap()),
            ("GQL_DATA", data.to_str().unwrap()),
        ],
        &["--max-depth=4"],
    )
    .await;
    let addr = binary.addr;
    let reply = post_json(addr, json!({"query": "{ creatures { name } }"})).await;
    assert_eq!(
        reply.text(),
        r#"{"data":{"creatures":[{"name":"Testling"}]}}"#
    );
    let deep = post_json(
        addr,
        json!({"query": "{ creatures { evolutions { creature { evolutions { name } } } } }"}),
    )
    .await;
    assert_eq!(deep.status, 400, "--max-depth=4 applies");
    let page = request(addr, "GET", "/graphql", &[("Accept", "text/html")], b"").await;
    assert!(
        page.text()
            .contains("/graphql/assets/react/umd/react.production.min.js")
    );
    binary.stop().await;
    std::fs::remove_dir_all(dir).unwrap();
}
