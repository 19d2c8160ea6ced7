//! Documents juniper refuses: parse errors with their locations, subscriptions, fragment
//! cycles in graphql-js's words, and the inputs that once made juniper panic.

use gql_demo::{Demo, OperationPolicy, Request, Status};
use serde_json::{Value, json};

use super::{message, run, run_with};

#[test]
fn bad_documents_are_rejected_with_locations() {
    let demo = Demo::builtin();
    let syntax = run(&demo, "{ creatures { id ");
    assert_eq!(syntax.status, Status::BadRequest);
    assert!(syntax.json()["errors"][0]["locations"].is_array());
    assert!(syntax.json().get("data").is_none());

    let unknown = run(&demo, "{ creatures { weight { foo } } }");
    assert_eq!(unknown.status, Status::BadRequest);
    assert!(message(&unknown).contains("foo"), "{}", unknown.body);
    assert_eq!(
        unknown.json()["errors"][0]["locations"][0],
        json!({"line": 1, "column": 24})
    );

    let unknown_arg = run(&demo, r#"{ creature(nickname: "x") { id } }"#);
    assert_eq!(unknown_arg.status, Status::BadRequest);
    assert!(
        message(&unknown_arg).contains("nickname"),
        "{}",
        unknown_arg.body
    );

    let no_query = demo.execute(&Request::default(), OperationPolicy::All);
    assert_eq!(no_query.status, Status::BadRequest);
    assert_eq!(message(&no_query), "Must provide query string.");

    let wrong_variable = run_with(
        &demo,
        json!({"query": "query($n: String!) { creature(name: $n) { id } }", "variables": {"n": 5}}),
    );
    assert_eq!(
        wrong_variable.status,
        Status::BadRequest,
        "{}",
        wrong_variable.body
    );

    let two_ops = run(
        &demo,
        "query A { creatures { id } } query B { creatures { name } }",
    );
    assert_eq!(two_ops.status, Status::BadRequest);
    let chosen = run_with(
        &demo,
        json!({"query": "query A { creatures { id } } query B { creatures { name } }", "operationName": "B"}),
    );
    assert!(chosen.json()["data"]["creatures"][0]["name"].is_string());
}

#[test]
fn subscriptions_are_not_supported() {
    let demo = Demo::builtin();
    let document = "subscription Watch { creatures { id } } query Read { creatures { id } }";
    for policy in [OperationPolicy::All, OperationPolicy::QueriesOnly] {
        let request = Request::from_json(
            json!({"query": document, "operationName": "Watch"})
                .to_string()
                .as_bytes(),
        )
        .unwrap();
        let reply = demo.execute(&request, policy);
        assert_eq!(reply.status, Status::BadRequest, "{}", reply.body);
        assert_eq!(
            reply.json(),
            json!({"errors": [{
                "message": "Subscriptions are not supported",
                "extensions": {"code": "SUBSCRIPTIONS_NOT_SUPPORTED"},
            }]})
        );
    }
    let plain = run(&demo, "subscription { creatures { id } }");
    assert_eq!(message(&plain), "Subscriptions are not supported");
    let read = run_with(&demo, json!({"query": document, "operationName": "Read"}));
    assert_eq!(read.status, Status::Ok, "the other operation still runs");
}

/// The locations of a reply's errors as (line, column) pairs.
fn locations(error: &Value) -> Vec<(u64, u64)> {
    error["locations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| (l["line"].as_u64().unwrap(), l["column"].as_u64().unwrap()))
        .collect()
}

#[test]
fn fragment_cycles_name_the_whole_cycle() {
    let demo = Demo::builtin();
    let itself = run(
        &demo,
        "fragment A on Creature { ...A } { creatures { ...A } }",
    );
    assert_eq!(itself.status, Status::BadRequest);
    assert_eq!(
        message(&itself),
        r#"Cannot spread fragment "A" within itself."#
    );
    assert_eq!(locations(&itself.json()["errors"][0]), [(1, 26)]);

    let via_one = run(
        &demo,
        "fragment A on Creature { ...B } fragment B on Creature { ...A } { creatures { ...A } }",
    );
    assert_eq!(
        message(&via_one),
        r#"Cannot spread fragment "A" within itself via "B"."#
    );
    assert_eq!(
        locations(&via_one.json()["errors"][0]),
        [(1, 26), (1, 58)],
        "every spread on the cycle"
    );

    // Spreads nested in fields and inline fragments are on the cycle too.
    let nested = run(
        &demo,
        "{ creatures { ...A } }
         fragment A on Creature { name evolutions { creature { ...B } } }
         fragment B on Creature { ... on Creature { ...C } }
         fragment C on Creature { id ...A }",
    );
    assert_eq!(
        message(&nested),
        r#"Cannot spread fragment "A" within itself via "B", "C"."#,
        "{}",
        nested.body
    );
    assert_eq!(nested.json()["errors"].as_array().unwrap().len(), 1);
}

/// What graphql-js's `validate` answers for fragments that share a name (checked with the
/// graphql-js of `servers/gql/tests/js`): each definition is walked from its own selections,
/// and a spread enters the last definition.
#[test]
fn fragments_that_share_a_name_have_graphql_js_cycles() {
    let demo = Demo::builtin();
    let messages = |query: &str| -> Vec<String> {
        let reply = run(&demo, query);
        assert_eq!(reply.status, Status::BadRequest, "{}", reply.body);
        reply.json()["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["message"].as_str().unwrap().to_owned())
            .collect()
    };
    // The first `A` spreads itself: a cycle, beside the repeated name.
    let first = messages(
        "{ creatures { ...A } } fragment A on Creature { evolutions { ...A } } \
         fragment A on Creature { id }",
    );
    assert!(
        first.contains(&r#"Cannot spread fragment "A" within itself."#.to_owned()),
        "{first:?}"
    );
    // The first `A` spreads nothing, and the second is not walked again: no cycle, and
    // no juniper wording of one.
    let second = messages(
        "{ creatures { ...A } } fragment A on Creature { id } \
         fragment A on Creature { evolutions { ...A } }",
    );
    assert!(
        second
            .iter()
            .all(|m| !m.starts_with("Cannot spread fragment")),
        "{second:?}"
    );
    assert!(
        second
            .iter()
            .any(|m| m.contains("only be one fragment named")),
        "{second:?}"
    );
}

#[test]
fn fragment_cycles_are_each_reported_beside_other_errors() {
    let demo = Demo::builtin();
    let reply = run(
        &demo,
        "{ creatures { ...A } nope }
         fragment A on Creature { ...B ...C }
         fragment B on Creature { ...A }
         fragment C on Creature { ...A }",
    );
    assert_eq!(reply.status, Status::BadRequest);
    let body = reply.json();
    let messages: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages,
        [
            r#"Unknown field "nope" on type "Query""#,
            r#"Cannot spread fragment "A" within itself via "B"."#,
            r#"Cannot spread fragment "A" within itself via "C"."#,
        ]
    );
    // Spreads of an unknown fragment are not cycles; a fragment that spreads one only once
    // is not a cycle either.
    let unknown = run(
        &demo,
        "{ creatures { ...A } } fragment A on Creature { ...Nope ...B ...B } fragment B on Creature { id }",
    );
    assert_eq!(message(&unknown), r#"Unknown fragment: "Nope""#);
    assert_eq!(unknown.json()["errors"].as_array().unwrap().len(), 1);
}

/// juniper's validation panicked ("Type not found in schema") on a variable with a default
/// value whose type the schema lacks (cargo fuzz, gql_query); it is an unknown type, at
/// the type's place, beside the document's other errors.
#[test]
fn a_default_value_for_a_variable_of_an_unknown_type_is_an_error() {
    let demo = Demo::builtin();
    let reply = run(
        &demo,
        "query($id: ID, $name: Nope = \"x\", $n: [Nada!] = [1]) {\n  creature(id: $id, name: $name) { nope }\n}",
    );
    assert_eq!(reply.status, Status::BadRequest, "{}", reply.body);
    let body = reply.json();
    let errors = body["errors"].as_array().unwrap();
    let find = |m: &str| errors.iter().find(|e| e["message"] == m);
    let nope = find(r#"Unknown type "Nope""#).unwrap_or_else(|| panic!("{}", reply.body));
    assert_eq!(locations(nope), [(1, 23)]);
    assert!(find(r#"Unknown type "Nada""#).is_some(), "{}", reply.body);
    assert!(
        find(r#"Unknown field "nope" on type "Creature""#).is_some(),
        "{}",
        reply.body
    );
}
