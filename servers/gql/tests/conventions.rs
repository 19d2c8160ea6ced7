//! The real binary on a free loopback port, for what clients of express-graphql and
//! graphql-js expect: `creature` by id or by name, a browser's `GET /graphql?query=...`
//! opening the explorer with the query filled in, subscriptions refused clearly, fragment
//! cycles named whole.

mod common;

use common::{Binary, Reply, post_json, request};
use serde_json::{Value, json};

/// A GET of `/graphql` with these URL parameters and this Accept header.
async fn get(binary: &Binary, params: &[(&str, &str)], accept: &str) -> Reply {
    let mut target = form_urlencoded::Serializer::new(String::from("/graphql?"));
    for (key, value) in params {
        target.append_pair(key, value);
    }
    let target = target.finish();
    request(binary.addr, "GET", &target, &[("Accept", accept)], b"").await
}

const BROWSER: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

const PREFILL_OPEN: &str = r#"<script id="gql-demo-prefill" type="application/json">"#;

/// The JSON the page hands to GraphiQL, read the way the HTML parser reads it: up to the
/// first `</script>` after the element's start.
fn prefill(page: &str) -> Value {
    let start = page
        .find(PREFILL_OPEN)
        .expect("the page has a prefill element")
        + PREFILL_OPEN.len();
    let end = start + page[start..].find("</script>").expect("the element ends");
    serde_json::from_str(&page[start..end])
        .unwrap_or_else(|e| panic!("prefill is not JSON ({e}): {}", &page[start..end]))
}

fn first_error(reply: &Reply) -> Value {
    reply.json()["errors"][0].clone()
}

#[tokio::test]
async fn creature_is_found_by_id_or_by_name_but_not_both() {
    let binary = Binary::start(&[], &[]).await;
    let by_id = post_json(
        binary.addr,
        json!({"query": r#"{ creature(id: "001") { name } }"#}),
    )
    .await;
    assert_eq!(by_id.text(), r#"{"data":{"creature":{"name":"Cindle"}}}"#);
    let unpadded = get(
        &binary,
        &[("query", r#"{ creature(id: "12") { id name } }"#)],
        "application/json",
    )
    .await;
    assert_eq!(
        unpadded.json()["data"]["creature"],
        json!({"id": "012", "name": "Tempestral"}),
        "{}",
        unpadded.text()
    );
    let by_name = post_json(
        binary.addr,
        json!({"query": "query($n: String) { creature(name: $n) { id } }", "variables": {"n": "Pebbit"}}),
    )
    .await;
    assert_eq!(by_name.json()["data"]["creature"]["id"], "007");

    for (query, given) in [
        (
            r#"{ creature(id: "001", name: "Cindle") { id } }"#,
            "both were given",
        ),
        ("{ creature { id } }", "neither was given"),
    ] {
        let reply = post_json(binary.addr, json!({ "query": query })).await;
        assert_eq!(reply.status, 200, "a field error: {}", reply.text());
        assert_eq!(reply.json()["data"], json!({"creature": null}));
        let error = first_error(&reply);
        assert_eq!(
            error["message"],
            format!(r#"creature takes exactly one of "id" and "name"; {given}"#)
        );
        assert_eq!(error["extensions"]["code"], "INVALID_ARGUMENTS");
    }
    binary.stop().await;
}

#[tokio::test]
async fn a_browser_get_with_a_query_opens_the_explorer_with_it_filled_in() {
    let binary = Binary::start(&[], &[]).await;
    let query = "query Named($id: ID) { creature(id: $id) { name } }";
    let params = [
        ("query", query),
        ("variables", r#"{"id": "3"}"#),
        ("operationName", "Named"),
    ];
    let page = get(&binary, &params, BROWSER).await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("vary"), Some("accept"));
    assert_eq!(
        prefill(&page.text()),
        json!({"query": query, "variables": r#"{"id": "3"}"#, "operationName": "Named"})
    );
    assert!(
        page.text().contains("query: prefill.query"),
        "GraphiQL is given the query"
    );

    // The same URL from a client that asks for JSON runs the query, as before.
    let run = get(&binary, &params, "application/json").await;
    assert_eq!(run.header("content-type"), Some("application/json"));
    assert_eq!(run.header("vary"), Some("accept"));
    assert_eq!(run.text(), r#"{"data":{"creature":{"name":"Pyrewolf"}}}"#);

    // Without a query the page shows its default query.
    let plain = get(&binary, &[], BROWSER).await;
    assert_eq!(prefill(&plain.text()), json!({}));
    binary.stop().await;
}

#[tokio::test]
async fn a_query_in_the_url_cannot_break_out_of_the_page_script() {
    let binary = Binary::start(&[], &[]).await;
    let hostile =
        "{ creatures { id } } # </script><script>alert(1)</script><!-- <SCRIPT> & \u{2028}";
    let variables = r#"{"x": "</script><img src=x onerror=alert(2)>"}"#;
    let page = get(
        &binary,
        &[("query", hostile), ("variables", variables)],
        BROWSER,
    )
    .await;
    let plain = get(&binary, &[], BROWSER).await;
    assert_eq!(page.status, 200);
    // The request adds no element: as many script tags as the page without a query.
    for tag in ["<script", "</script", "<img", "<!--"] {
        assert_eq!(
            page.text().to_ascii_lowercase().matches(tag).count(),
            plain.text().to_ascii_lowercase().matches(tag).count(),
            "{tag} from the URL reached the page:\n{}",
            page.text()
        );
    }
    assert!(!page.text().contains("alert(1)</script>"));
    assert!(
        page.text()
            .contains(r"\u003c/script\u003e\u003cscript\u003ealert(1)")
    );
    // And GraphiQL still gets the query exactly as sent.
    assert_eq!(
        prefill(&page.text()),
        json!({"query": hostile, "variables": variables})
    );
    binary.stop().await;
}

#[tokio::test]
async fn subscriptions_are_refused_by_post_and_get() {
    let binary = Binary::start(&[], &[]).await;
    let query = "subscription { creatures { id } }";
    let expected = json!({"errors": [{
        "message": "Subscriptions are not supported",
        "extensions": {"code": "SUBSCRIPTIONS_NOT_SUPPORTED"},
    }]});
    let posted = post_json(binary.addr, json!({ "query": query })).await;
    assert_eq!(posted.status, 400);
    assert_eq!(posted.json(), expected);
    let got = get(&binary, &[("query", query)], "application/json").await;
    assert_eq!(got.status, 400, "not the 405 of a GET mutation");
    assert_eq!(got.json(), expected);
    binary.stop().await;
}

#[tokio::test]
async fn a_fragment_cycle_is_named_with_its_path() {
    let binary = Binary::start(&[], &[]).await;
    let reply = post_json(
        binary.addr,
        json!({"query": "{ creatures { ...A } }\n\
                         fragment A on Creature { ...B }\n\
                         fragment B on Creature { ...A }"}),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.json()["errors"],
        json!([{
            "message": r#"Cannot spread fragment "A" within itself via "B"."#,
            "locations": [{"line": 2, "column": 26}, {"line": 3, "column": 26}],
        }])
    );
    let itself = post_json(
        binary.addr,
        json!({"query": "{ creatures { ...A } } fragment A on Creature { id ...A }"}),
    )
    .await;
    assert_eq!(
        first_error(&itself)["message"],
        r#"Cannot spread fragment "A" within itself."#
    );
    binary.stop().await;
}
