//! Tests generated from the catalogue: every endpoint, every parameter rule.

use serde_json::json;
use trading_model::{
    Catalogue, Checked, Context, Endpoint, Kind, Params, Request, Validator, prepare, validate,
};

fn cat() -> &'static Catalogue {
    Catalogue::builtin()
}

fn ctx() -> Context<'static> {
    Context::default()
}

/// A value that satisfies every rule of the parameter.
fn sample(p: &trading_model::Param) -> Vec<String> {
    let min_len = p.min_length.unwrap_or(1).max(1);
    let text = |base: &str| {
        let mut s = base.to_owned();
        while s.chars().count() < min_len {
            s.push('x');
        }
        s
    };
    let one = match (p.kind, p.validator) {
        (Kind::Integer, _) => {
            let lo = p.min.unwrap_or(1).max(1);
            let wide = 10i64.pow(min_len as u32 - 1);
            let v = lo.max(wide);
            let v = p.max.map_or(v, |hi| v.min(hi));
            v.to_string()
        }
        (Kind::Decimal, _) => "1.5".into(),
        (Kind::Boolean, _) => "true".into(),
        (Kind::Date, _) => "2020-07-07".into(),
        (Kind::Enum, _) => p.allowed.iter().find(|a| !a.is_empty()).unwrap().clone(),
        (_, Some(Validator::IsEmail)) => "someone@example.com".into(),
        (_, Some(Validator::IsValidSymbol)) => "binance-btcusdt".into(),
        (_, Some(Validator::IsValidSide)) => "buy".into(),
        (_, Some(Validator::IsValidPair)) => "btcusdt".into(),
        (_, Some(Validator::IsValidCombination)) => "binance-btcusdt+bitfinex-btcusd".into(),
        (_, Some(Validator::IsBaseQuote)) => "BTC/USDT".into(),
        (_, Some(Validator::IsHttpUrl)) => "https://example.com/a.png".into(),
        (_, Some(Validator::JsMillisecondUpdate)) => "1592207324028".into(),
        _ => text("v"),
    };
    if p.kind == Kind::Array {
        vec![one.clone(), one]
    } else {
        vec![one]
    }
}

fn full_params(ep: &Endpoint) -> Params {
    let mut params = Params::new();
    for p in &ep.parameters {
        for v in sample(p) {
            params.push(&p.name, v);
        }
    }
    params
}

fn query_string(params: &Params) -> String {
    let mut ser = form_urlencoded::Serializer::new(String::new());
    for name in params.names() {
        for v in params.all(name) {
            ser.append_pair(name, v);
        }
    }
    ser.finish()
}

#[test]
fn every_endpoint_accepts_a_complete_sample() {
    for ep in cat().endpoints() {
        let v = validate(ep, &full_params(ep), &ctx());
        assert!(v.is_ok(), "{}: {:?}", ep.path, v.err());
    }
}

#[test]
fn each_missing_required_parameter_is_named_alone() {
    let mut checked = 0;
    for ep in cat().endpoints() {
        for p in ep
            .parameters
            .iter()
            .filter(|p| p.required && p.default.is_none())
        {
            for blank in [None, Some(""), Some("   ")] {
                let mut params = full_params(ep);
                match blank {
                    None => params.remove(&p.name),
                    Some(b) => params.set(&p.name, b),
                }
                let err = validate(ep, &params, &ctx()).unwrap_err();
                assert_eq!(
                    err.missing_parameters,
                    std::slice::from_ref(&p.name),
                    "{} {}",
                    ep.path,
                    p.name
                );
                assert!(err.incorrect_value_lengths.is_empty(), "{}", ep.path);
                assert!(err.missing_information.is_empty(), "{}", ep.path);
            }
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} required parameters");
}

#[test]
fn all_missing_parameters_are_reported_together() {
    for ep in cat().endpoints() {
        let want: Vec<String> = ep
            .parameters
            .iter()
            .filter(|p| p.required && p.default.is_none())
            .map(|p| p.name.clone())
            .collect();
        match validate(ep, &Params::new(), &ctx()) {
            Ok(_) => assert!(want.is_empty(), "{}", ep.path),
            Err(e) => assert_eq!(e.missing_parameters, want, "{}", ep.path),
        }
    }
}

#[test]
fn each_minimum_length_violation_gives_the_documented_record() {
    let mut checked = 0;
    for ep in cat().endpoints() {
        for p in &ep.parameters {
            let Some(min) = p.min_length else { continue };
            let mut params = full_params(ep);
            if min == 1 {
                // One character is the least any visible value has; blank means absent.
                params.set(&p.name, "");
                let r = validate(ep, &params, &ctx());
                if p.default.is_none() {
                    assert_eq!(
                        r.unwrap_err().missing_parameters,
                        std::slice::from_ref(&p.name)
                    );
                } else {
                    assert!(r.is_ok());
                }
            } else {
                params.set(&p.name, "7".repeat(min - 1));
                let err = validate(ep, &params, &ctx()).unwrap_err();
                assert_eq!(
                    err.incorrect_value_lengths,
                    [format!("{} minimum length {}", p.name, min)],
                    "{}",
                    ep.path
                );
                assert!(err.missing_parameters.is_empty());
                // Exactly at the minimum, length is no longer a complaint.
                params.set(&p.name, "7".repeat(min));
                if let Err(e) = validate(ep, &params, &ctx()) {
                    assert!(
                        e.incorrect_value_lengths.is_empty(),
                        "{} {}",
                        ep.path,
                        p.name
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 60, "only {checked} length rules");
}

#[test]
fn defaults_apply_when_absent() {
    let mut checked = 0;
    for ep in cat().endpoints() {
        for p in ep.parameters.iter() {
            let Some(d) = &p.default else { continue };
            let mut params = full_params(ep);
            params.remove(&p.name);
            let v = validate(ep, &params, &ctx()).unwrap();
            let want = match p.kind {
                Kind::Integer => Checked::Integer(d.parse().unwrap()),
                _ => Checked::Text(d.clone()),
            };
            assert_eq!(v.get(&p.name), Some(&want), "{} {}", ep.path, p.name);
            checked += 1;
        }
    }
    assert!(checked >= 50, "only {checked} defaults");
    // The two list endpoints with a larger page.
    for (path, limit) in [
        ("public/spreads-list", 100),
        ("marketplace/signals-feed", 100),
        ("articles/list", 10),
    ] {
        let v = validate(cat().get(path).unwrap(), &Params::new(), &ctx()).unwrap();
        assert_eq!(v.integer("limit"), Some(limit));
        assert_eq!(v.integer("pagenumber"), Some(1));
    }
    let order = validate(
        cat().get("exchange-query/order-create").unwrap(),
        &Params::from_query("apikey=12&ordertype=market&code=binance-btcusdt&side=buy&quantity=1"),
        &ctx(),
    )
    .unwrap();
    assert_eq!(order.integer("repeat_times"), Some(1));
    assert_eq!(order.integer("repeat_interval"), Some(10000));
    assert_eq!(order.integer("expire_after"), Some(0));
}

#[test]
fn query_string_beats_body_for_every_post_endpoint() {
    let mut checked = 0;
    for ep in cat()
        .endpoints()
        .iter()
        .filter(|e| e.documents(trading_model::Method::Post))
    {
        if ep.parameters.is_empty() {
            continue;
        }
        let good = full_params(ep);
        let query = query_string(&good);
        // A body that fails every rule: if any body value won, validation would fail.
        let mut bad = Params::new();
        for p in &ep.parameters {
            bad.set(&p.name, "\u{1}bad value ,,, that is wrong/+");
        }
        let bad_form = query_string(&bad);
        let bad_json = serde_json::to_vec(
            &ep.parameters
                .iter()
                .map(|p| (p.name.clone(), json!([1, {"x": 2}])))
                .collect::<serde_json::Map<_, _>>(),
        )
        .unwrap();
        let alone = validate(ep, &good, &ctx()).unwrap();
        for (ct, body) in [
            ("application/x-www-form-urlencoded", bad_form.as_bytes()),
            ("application/json", bad_json.as_slice()),
        ] {
            let req = Request {
                method: "POST",
                path: &ep.path,
                query: &query,
                content_type: Some(ct),
                body,
            };
            let (_, merged) =
                prepare(cat(), &req, &ctx()).unwrap_or_else(|e| panic!("{}: {e:?}", ep.path));
            assert_eq!(merged, alone, "{}", ep.path);
        }
        // And the other way round: a wrong query value is not rescued by a good body.
        if let Some(p) = ep
            .parameters
            .iter()
            .find(|p| p.required && p.default.is_none())
        {
            let req = Request {
                method: "POST",
                path: &ep.path,
                query: &format!("{}=", p.name),
                content_type: Some("application/x-www-form-urlencoded"),
                body: query.as_bytes(),
            };
            let err = prepare(cat(), &req, &ctx()).unwrap_err();
            assert_eq!(
                err.validation.unwrap().missing_parameters,
                std::slice::from_ref(&p.name)
            );
        }
        checked += 1;
    }
    assert!(checked > 80, "only {checked} POST endpoints");
}

#[test]
fn get_ignores_the_body() {
    let ep = cat().get("public/match-pair").unwrap();
    let req = Request {
        method: "GET",
        path: &ep.path,
        query: "",
        content_type: Some("application/x-www-form-urlencoded"),
        body: b"code=btcusdt",
    };
    let err = prepare(cat(), &req, &ctx()).unwrap_err();
    assert_eq!(err.validation.unwrap().missing_parameters, ["code"]);
    let req = Request {
        query: "code=btcusdt,ethusdt",
        ..req
    };
    let (_, v) = prepare(cat(), &req, &ctx()).unwrap();
    assert_eq!(v.list("code").unwrap(), ["btcusdt", "ethusdt"]);
}

#[test]
fn article_images_must_be_http_urls() {
    let ep = cat().get("articles/create").unwrap();
    let with_image = |url: &str| {
        let mut params = full_params(ep);
        params.set("image1", url);
        validate(ep, &params, &ctx())
    };
    for ok in [
        "https://example.com/a.png",
        "HTTP://EXAMPLE.COM",
        "http://h?x=1#y",
    ] {
        assert!(with_image(ok).is_ok(), "{ok}");
    }
    for bad in [
        "javascript:alert(1)",
        "data:image/png;base64,AAAA",
        "https://",
        "https:///path",
        "https://a b.com/x.png",
        "//example.com/a.png",
        "ftp://example.com/a.png",
    ] {
        let e = with_image(bad).unwrap_err();
        assert_eq!(
            e.missing_information,
            vec![
                json!({"parameter": "image1", "error": "image1 must be an http or https URL such as https://example.com/a.png"})
            ],
            "{bad}"
        );
    }
}
