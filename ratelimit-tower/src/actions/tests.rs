use super::*;
use crate::matcher::ValueMatch;
use http::{HeaderMap, HeaderName, Method, Uri};

fn descriptors(
    d: &Descriptors,
    headers: &[(&str, &str)],
    client: Option<&str>,
) -> Vec<Vec<(String, String)>> {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.append(HeaderName::try_from(*k).unwrap(), v.parse().unwrap());
    }
    let uri: Uri = "/v1/items?page=2".parse().unwrap();
    let ext = http::Extensions::new();
    let info = RequestInfo {
        method: &Method::GET,
        uri: &uri,
        headers: &h,
        extensions: &ext,
        client: client.map(|c| c.parse().unwrap()),
    };
    // A request buffer left over from a larger request: nothing of it may show.
    let mut out = Request::new(
        "d",
        vec![Descriptor::new([("stale", "1"), ("stale", "2"), ("stale", "3")]); 4],
    );
    let n = d.fill(&info, &mut out);
    assert_eq!(n, out.descriptors.len());
    out.descriptors
        .iter()
        .map(|d| {
            d.entries
                .iter()
                .map(|e| (e.key.clone(), e.value.clone()))
                .collect()
        })
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn builds_one_descriptor_per_list_as_envoy_does() {
    let mut d = Descriptors::default();
    d.push(vec![Action::remote_address()]);
    d.push(vec![
        Action::generic_key("api"),
        Action::header("x-api-key", "api_key"),
    ]);
    d.push(vec![
        Action::method(),
        Action::path(),
        Action::header(":path", "full"),
    ]);
    d.push(vec![Action::header_value_match(
        "premium",
        vec![HeaderMatcher::new("x-plan", ValueMatch::Exact("premium".into())).unwrap()],
    )]);
    d.push(vec![Action::MaskedRemoteAddress {
        v4_prefix_len: 16,
        v6_prefix_len: 64,
    }]);
    let all = descriptors(
        &d,
        &[("x-api-key", "k1"), ("x-plan", "premium")],
        Some("10.1.2.3"),
    );
    assert_eq!(
        all,
        [
            pairs(&[("remote_address", "10.1.2.3")]),
            pairs(&[("generic_key", "api"), ("api_key", "k1")]),
            pairs(&[
                ("method", "GET"),
                ("path", "/v1/items"),
                ("full", "/v1/items?page=2")
            ]),
            pairs(&[("header_match", "premium")]),
            pairs(&[("masked_remote_address", "10.1.0.0/16")]),
        ]
    );
    // No key, no plan, no client: those lists send nothing; the rest still do.
    assert_eq!(
        descriptors(&d, &[], None),
        [pairs(&[
            ("method", "GET"),
            ("path", "/v1/items"),
            ("full", "/v1/items?page=2")
        ])]
    );
}

#[test]
fn skip_if_absent_leaves_out_only_the_entry() {
    let mut d = Descriptors::default();
    d.push(vec![
        Action::generic_key("g"),
        Action::RequestHeader {
            header: HeaderSource::parse("x-user").unwrap(),
            descriptor_key: "user".into(),
            skip_if_absent: true,
        },
    ]);
    assert_eq!(descriptors(&d, &[], None), [pairs(&[("generic_key", "g")])]);
    assert_eq!(
        descriptors(&d, &[("x-user", "u")], None),
        [pairs(&[("generic_key", "g"), ("user", "u")])]
    );
    // expect_match: false sends the entry when the matchers do not all pass.
    let mut inverse = Descriptors::default();
    inverse.push(vec![Action::HeaderValueMatch {
        descriptor_key: "anonymous".into(),
        descriptor_value: "yes".into(),
        expect_match: false,
        headers: vec![HeaderMatcher::new("authorization", ValueMatch::Present(true)).unwrap()],
    }]);
    assert_eq!(
        descriptors(&inverse, &[], None),
        [pairs(&[("anonymous", "yes")])]
    );
    assert!(descriptors(&inverse, &[("authorization", "x")], None).is_empty());
}

#[test]
fn custom_actions_read_anything() {
    let mut d = Descriptors::default();
    d.push(vec![Action::custom(|r| {
        let q = r.uri.query()?;
        Some(Entry::new("query", q))
    })]);
    assert_eq!(descriptors(&d, &[], None), [pairs(&[("query", "page=2")])]);
    assert!(d.needs_client());
}

#[test]
fn writes_addresses_as_display_does() {
    for ip in [
        "0.0.0.0",
        "10.0.0.1",
        "192.168.100.255",
        "1.22.133.9",
        "::1",
        "2001:db8::7",
    ] {
        let mut out = String::from("stale");
        out.clear();
        write_ip(&mut out, ip.parse().unwrap());
        assert_eq!(out, ip);
    }
}
