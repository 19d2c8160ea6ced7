//! Schema-level tests: every request goes through `Demo::execute`, as the server's do.

use std::fs;

use gql_demo::{
    Dataset, Demo, Limits, OperationPolicy, Reply, Request, Settings, Status, StoreLimits,
};
use serde_json::{Value, json};

#[path = "integration/validation.rs"]
mod validation;

fn run(demo: &Demo, query: &str) -> Reply {
    demo.execute(&Request::from_query(query), OperationPolicy::All)
}

fn run_with(demo: &Demo, body: Value) -> Reply {
    let request = Request::from_json(body.to_string().as_bytes()).expect("valid request");
    demo.execute(&request, OperationPolicy::All)
}

fn message(reply: &Reply) -> String {
    reply.json()["errors"][0]["message"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn lists_every_creature_with_selected_fields_only() {
    let demo = Demo::builtin();
    let reply = run(&demo, "{ creatures { id name } }");
    assert_eq!(reply.status, Status::Ok);
    let body = reply.json();
    let list = body["data"]["creatures"].as_array().unwrap();
    assert!(list.len() >= 50, "{}", list.len());
    assert_eq!(list[0], json!({"id": "001", "name": "Cindle"}));
    assert!(reply.json().get("errors").is_none());
    // Fields come back in the order the query names them.
    let reversed = run(&demo, "{ creatures { name id } }");
    assert!(
        reversed
            .body
            .starts_with(r#"{"data":{"creatures":[{"name":"Cindle","id":"001"},"#),
        "{}",
        &reversed.body[..80]
    );
}

#[test]
fn finds_by_name_and_id_and_answers_null_for_unknown() {
    let demo = Demo::builtin();
    let reply = run(
        &demo,
        r#"{ a: creature(name: "Emberhound") { id name weight { minimum maximum }
              attacks { fast { name type damage } special { name } } evolutions { id name } }
             b: creature(name: "emberhound") { id }
             c: creatureById(id: "3") { name }
             d: creatureById(id: "003") { name }
             e: creatureById(id: "999") { name } }"#,
    );
    assert_eq!(reply.status, Status::Ok, "{}", reply.body);
    let data = &reply.json()["data"];
    assert_eq!(data["a"]["id"], "002");
    assert_eq!(
        data["a"]["weight"],
        json!({"minimum": "21kg", "maximum": "27kg"})
    );
    assert_eq!(
        data["a"]["attacks"]["fast"][0],
        json!({"name": "Cinder Flick", "type": "Ember", "damage": 6})
    );
    assert_eq!(
        data["a"]["evolutions"],
        json!([{"id": "003", "name": "Pyrewolf"}])
    );
    assert_eq!(data["b"], Value::Null, "names match exactly");
    assert_eq!(data["c"]["name"], "Pyrewolf");
    assert_eq!(data["d"]["name"], "Pyrewolf");
    assert_eq!(data["e"], Value::Null);
}

#[test]
fn creature_looks_up_by_id_or_by_name() {
    let demo = Demo::builtin();
    let reply = run(
        &demo,
        r#"{ a: creature(id: "001") { id name }
             b: creature(id: "7") { name }
             c: creature(id: "999") { name }
             d: creature(name: "Cindle") { id }
             e: creature(id: null, name: "Pebbit") { id } }"#,
    );
    assert_eq!(reply.status, Status::Ok, "{}", reply.body);
    assert_eq!(
        reply.json()["data"],
        json!({
            "a": {"id": "001", "name": "Cindle"},
            "b": {"name": "Pebbit"},
            "c": null,
            "d": {"id": "001"},
            "e": {"id": "007"},
        })
    );
    // One query serves both lookups: the unset variable counts as not given.
    let query = "query($id: ID, $name: String) { creature(id: $id, name: $name) { name } }";
    let by_id = run_with(&demo, json!({"query": query, "variables": {"id": "2"}}));
    assert_eq!(by_id.json()["data"]["creature"]["name"], "Emberhound");
    let by_name = run_with(
        &demo,
        json!({"query": query, "variables": {"name": "Pyrewolf"}}),
    );
    assert_eq!(by_name.json()["data"]["creature"]["name"], "Pyrewolf");
}

#[test]
fn creature_needs_exactly_one_of_id_and_name() {
    let demo = Demo::builtin();
    for (query, expected) in [
        (
            r#"{ creature(id: "001", name: "Cindle") { id } }"#,
            r#"creature takes exactly one of "id" and "name"; both were given"#,
        ),
        (
            "{ creature { id } }",
            r#"creature takes exactly one of "id" and "name"; neither was given"#,
        ),
        (
            "{ creature(id: null, name: null) { id } }",
            r#"creature takes exactly one of "id" and "name"; neither was given"#,
        ),
    ] {
        let reply = run(&demo, query);
        // A field error, as for any resolver: the document is valid GraphQL.
        assert_eq!(reply.status, Status::Ok, "{}", reply.body);
        let body = reply.json();
        assert_eq!(body["data"], json!({"creature": null}), "{query}");
        let error = &body["errors"][0];
        assert_eq!(error["message"], expected, "{query}");
        assert_eq!(error["extensions"]["code"], "INVALID_ARGUMENTS");
        assert_eq!(error["path"], json!(["creature"]));
        assert_eq!(error["locations"][0], json!({"line": 1, "column": 3}));
    }
}

#[test]
fn evolution_links_resolve_to_full_records() {
    let demo = Demo::builtin();
    let reply = run(
        &demo,
        r#"{ creature(name: "Cindle") { evolutions { name creature { id evolutions { name } } } } }"#,
    );
    let evolutions = &reply.json()["data"]["creature"]["evolutions"];
    assert_eq!(evolutions[0]["creature"]["id"], "002");
    assert_eq!(
        evolutions[0]["creature"]["evolutions"][0]["name"],
        "Pyrewolf"
    );
    assert_eq!(evolutions[1]["creature"]["evolutions"], json!([]));
}

#[test]
fn messages_create_get_update() {
    let demo = Demo::builtin();
    let created = run_with(
        &demo,
        json!({
            "query": "mutation Make($input: MessageInput) { createMessage(input: $input) { id content author } }",
            "variables": {"input": {"content": "hello", "author": "ada"}},
        }),
    );
    assert_eq!(created.status, Status::Ok, "{}", created.body);
    let id = created.json()["data"]["createMessage"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(created.json()["data"]["createMessage"]["author"], "ada");

    let updated = run_with(
        &demo,
        json!({
            "query": "mutation($id: ID!) { updateMessage(id: $id, input: {content: \"bye\"}) { id content author } }",
            "variables": {"id": id},
        }),
    );
    assert_eq!(
        updated.json()["data"]["updateMessage"],
        json!({"id": id, "content": "bye", "author": null})
    );

    let fetched = run(
        &demo,
        &format!(r#"{{ getMessage(id: "{id}") {{ content }} }}"#),
    );
    assert_eq!(fetched.json()["data"]["getMessage"]["content"], "bye");
}

#[test]
fn unknown_message_is_a_field_error_with_code_and_path() {
    let demo = Demo::builtin();
    for query in [
        r#"{ getMessage(id: "42") { id } }"#,
        r#"mutation { updateMessage(id: "42", input: {content: "x"}) { id } }"#,
    ] {
        let reply = run(&demo, query);
        assert_eq!(
            reply.status,
            Status::Ok,
            "field errors are not request errors"
        );
        let error = &reply.json()["errors"][0];
        assert_eq!(error["message"], "no message with id \"42\"");
        assert_eq!(error["extensions"]["code"], "MESSAGE_NOT_FOUND");
        assert!(error["path"].is_array() && error["locations"].is_array());
        let body = reply.json();
        let data = body["data"].as_object().unwrap();
        assert!(data.values().all(Value::is_null), "{data:?}");
    }
    let reply = run(&demo, "mutation { createMessage { id } }");
    assert_eq!(
        reply.json()["errors"][0]["extensions"]["code"],
        "MISSING_INPUT"
    );
}

#[test]
fn message_store_limits_are_errors() {
    let mut settings = Settings::default();
    settings.store = StoreLimits {
        max_messages: 1,
        max_field_bytes: 8,
    };
    let demo = Demo::new(Dataset::builtin(), settings);
    let long = run(
        &demo,
        r#"mutation { createMessage(input: {content: "far too long"}) { id } }"#,
    );
    assert_eq!(
        long.json()["errors"][0]["extensions"]["code"],
        "MESSAGE_TOO_LONG"
    );
    run(
        &demo,
        r#"mutation { createMessage(input: {content: "ok"}) { id } }"#,
    );
    let full = run(
        &demo,
        r#"mutation { createMessage(input: {content: "no"}) { id } }"#,
    );
    assert_eq!(
        full.json()["errors"][0]["extensions"]["code"],
        "MESSAGE_STORE_FULL"
    );
}

#[test]
fn queries_only_policy_refuses_mutations() {
    let demo = Demo::builtin();
    let request = Request::from_query(r#"mutation { createMessage(input: {}) { id } }"#);
    let reply = demo.execute(&request, OperationPolicy::QueriesOnly);
    assert_eq!(reply.status, Status::MethodNotAllowed);
    assert_eq!(reply.status.http_code(), 405);
    assert_eq!(
        message(&reply),
        "Can only perform a mutation operation from a POST request."
    );
    assert!(demo.context().messages.is_empty(), "nothing was stored");
    let query = demo.execute(
        &Request::from_query("{ creatures { id } }"),
        OperationPolicy::QueriesOnly,
    );
    assert_eq!(query.status, Status::Ok);
}

#[test]
fn request_bodies_are_checked() {
    for (body, expected) in [
        (&b"{"[..], "not valid JSON"),
        (b"[]", "batched"),
        (b"\"x\"", "JSON object"),
        (br#"{"query": 5}"#, "not a GraphQL request"),
        (br#"{"query": ["{a}"]}"#, "not a GraphQL request"),
    ] {
        let err = Request::from_json(body).unwrap_err().to_string();
        assert!(err.contains(expected), "{err}");
    }
    let extra = Request::from_json(br#"{"query": "{a}", "id": "x", "extensions": {}}"#).unwrap();
    assert_eq!(
        extra.query.as_deref(),
        Some("{a}"),
        "unknown keys are ignored"
    );
    let demo = Demo::builtin();
    for variables in [json!([1]), json!("not json"), json!("[1]")] {
        let request = Request::from_json(
            json!({"query": "{ creatures { id } }", "variables": variables})
                .to_string()
                .as_bytes(),
        )
        .unwrap();
        let reply = demo.execute(&request, OperationPolicy::All);
        assert_eq!(reply.status, Status::BadRequest);
        assert!(message(&reply).contains("variables"), "{}", reply.body);
    }
    // Form posts and GET send variables as a JSON string.
    let request = Request::from_params([
        (
            "query".into(),
            "query($n: String!) { creature(name: $n) { id } }".into(),
        ),
        ("variables".into(), r#"{"n": "Pebbit"}"#.into()),
        ("unrelated".into(), "x".into()),
    ]);
    let reply = demo.execute(&request, OperationPolicy::QueriesOnly);
    assert_eq!(reply.json()["data"]["creature"]["id"], "007");
}

fn demo_with(limits: Limits) -> Demo {
    let mut settings = Settings::default();
    settings.limits = limits;
    Demo::new(Dataset::builtin(), settings)
}

#[test]
fn depth_limit_has_a_clear_error() {
    let demo = demo_with(Limits {
        max_depth: 6,
        ..Limits::default()
    });
    let ok = run(
        &demo,
        "{ creatures { evolutions { creature { evolutions { name } } } } }",
    );
    assert_eq!(ok.status, Status::Ok, "{}", ok.body);
    let deep = run(
        &demo,
        "{ creatures { evolutions { creature { evolutions { creature { evolutions { name } } } } } } }",
    );
    assert_eq!(deep.status, Status::BadRequest);
    assert_eq!(
        message(&deep),
        "Query is too deep: it nests more than 6 levels"
    );
    assert_eq!(
        deep.json()["errors"][0]["extensions"],
        json!({"code": "DEPTH_LIMIT_EXCEEDED", "limit": 6})
    );
    assert!(deep.json()["errors"][0]["locations"].is_array());
}

#[test]
fn complexity_limit_counts_fragment_spreads() {
    let demo = demo_with(Limits {
        max_complexity: 40,
        ..Limits::default()
    });
    // 4 fields in the fragment, spread 3 x 3 times: small text, 36 + 4 fields expanded.
    let small = "{ creatures { ...B } } fragment A on Creature { id name weight { minimum } } \
                 fragment B on Creature { ...A ...A }";
    assert_eq!(run(&demo, small).status, Status::Ok);
    let big = "{ creatures { ...C } } fragment A on Creature { id name weight { minimum } } \
               fragment B on Creature { ...A ...A ...A } fragment C on Creature { ...B ...B ...B ...B }";
    let reply = run(&demo, big);
    assert_eq!(reply.status, Status::BadRequest);
    assert!(message(&reply).starts_with("Query is too complex: it selects more than 40 fields"));
    assert_eq!(
        reply.json()["errors"][0]["extensions"]["code"],
        "COMPLEXITY_LIMIT_EXCEEDED"
    );
}

#[test]
fn token_limit_has_a_clear_error() {
    let demo = demo_with(Limits {
        max_tokens: 50,
        ..Limits::default()
    });
    let fields = "id ".repeat(60);
    let reply = run(&demo, &format!("{{ creatures {{ {fields} }} }}"));
    assert_eq!(reply.status, Status::BadRequest);
    assert_eq!(
        message(&reply),
        "Query is too long: it has more than 50 tokens"
    );
}

#[test]
fn default_limits_admit_the_standard_introspection_query() {
    let limits = Limits::default();
    let schema = gql_demo::schema()
        .limit_depth(limits.max_depth)
        .limit_fields(limits.max_complexity)
        .limit_tokens(limits.max_tokens);
    let demo = Demo::builtin();
    let (value, errors) =
        juniper::introspect(&schema, demo.context(), juniper::IntrospectionFormat::All)
            .expect("introspection passes the default limits");
    assert!(errors.is_empty());
    let text = serde_json::to_string(&value).unwrap();
    for name in [
        "Creature",
        "Evolution",
        "MessageInput",
        "Mutation",
        "Attacks",
    ] {
        assert!(text.contains(&format!("\"{name}\"")), "{name}");
    }
}

#[test]
fn sdl_shows_the_documented_schema() {
    let sdl = Demo::builtin().sdl();
    for line in [
        "creatures: [Creature!]!",
        "creature(id: ID, name: String): Creature",
        "creatureById(id: ID!): Creature",
        "getMessage(id: ID!): Message\n",
        "createMessage(input: MessageInput): Message\n",
        "updateMessage(id: ID!, input: MessageInput): Message\n",
        "input MessageInput",
        "type: String!",
    ] {
        assert!(sdl.contains(line), "missing {line:?} in\n{sdl}");
    }
}

#[test]
fn concurrent_requests_share_one_store() {
    let demo = std::sync::Arc::new(Demo::builtin());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let demo = std::sync::Arc::clone(&demo);
            std::thread::spawn(move || {
                for i in 0..50 {
                    let reply = run(
                        &demo,
                        &format!(r#"mutation {{ createMessage(input: {{content: "{t}/{i}"}}) {{ id }} }}"#),
                    );
                    assert_eq!(reply.status, Status::Ok);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(demo.context().messages.len(), 200);
}

/// Replays the committed fuzz corpus through the fuzz target's own code path.
#[test]
fn fuzz_corpus_replays_without_panics() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/gql_query");
    let mut count = 0;
    for entry in fs::read_dir(dir).expect("corpus directory exists") {
        let path = entry.unwrap().path();
        let data = fs::read(&path).unwrap();
        if let Some(reply) = gql_demo::fuzz::query(&data) {
            assert!(
                reply.json().get("data").is_some() || reply.json().get("errors").is_some(),
                "{}: {}",
                path.display(),
                reply.body
            );
        }
        count += 1;
    }
    assert!(count >= 10, "corpus has {count} files");
}
