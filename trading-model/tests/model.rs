//! Tests generated from the catalogue: every endpoint, every parameter rule.

use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::json;
use trading_model::{
    ApiError, Catalogue, Checked, Context, Endpoint, Kind, Meta, Params, Request, Validator,
    endpoint_records, failure, openapi, prepare, validate,
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
fn openapi_equals_catalogue_equals_system_endpoints() {
    let catalogue: BTreeSet<String> = cat().endpoints().iter().map(|e| e.path.clone()).collect();
    let doc = openapi(cat(), None);
    let paths = doc["paths"].as_object().unwrap();
    let from_openapi: BTreeSet<String> = paths
        .keys()
        .map(|k| k.strip_prefix("/api/v2/").unwrap().to_owned())
        .collect();
    let records = endpoint_records(cat());
    let from_records: BTreeSet<String> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(catalogue.len(), 180);
    assert_eq!(catalogue, from_openapi);
    assert_eq!(catalogue, from_records);
    let mut operations = 0;
    for ep in cat().endpoints() {
        let item = &paths[&format!("/api/v2/{}", ep.path)];
        let methods: BTreeSet<String> = item.as_object().unwrap().keys().cloned().collect();
        let want: BTreeSet<String> = ep
            .methods
            .iter()
            .map(|m| m.as_str().to_ascii_lowercase())
            .collect();
        assert_eq!(methods, want, "{}", ep.path);
        operations += methods.len();
        let names: BTreeSet<&str> = ep.parameters.iter().map(|p| p.name.as_str()).collect();
        if let Some(get) = item.get("get") {
            let got: BTreeSet<&str> = get["parameters"]
                .as_array()
                .map(|a| a.iter().map(|p| p["name"].as_str().unwrap()).collect())
                .unwrap_or_default();
            assert_eq!(got, names, "{}", ep.path);
        }
        if let Some(post) = item.get("post") {
            let schema = &post["requestBody"]["content"]["application/json"]["schema"];
            let got: BTreeSet<&str> = schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(got, names, "{}", ep.path);
        }
    }
    assert_eq!(operations, 184, "4 endpoints answer both GET and POST");
    // Operation ids must be unique for generated clients.
    let mut ids = BTreeSet::new();
    for item in paths.values() {
        for op in item.as_object().unwrap().values() {
            assert!(ids.insert(op["operationId"].as_str().unwrap().to_owned()));
        }
    }
}

#[test]
fn system_endpoints_records_carry_the_documented_fields() {
    let records = endpoint_records(cat());
    let add = records
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "exchange-api-keys/add")
        .unwrap();
    for k in [
        "path",
        "parent",
        "name",
        "description",
        "auth_required",
        "parameters",
    ] {
        assert!(add.get(k).is_some(), "{k}");
    }
    assert_eq!(add["parent"], "exchange-api-keys");
    assert_eq!(add["parameters"][1]["name"], "label");
    assert_eq!(add["parameters"][1]["min_length"], 2);
    let ep = records
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "system/ep")
        .unwrap();
    assert_eq!(ep["alias_of"], "system/endpoints");
}

#[test]
fn documented_1440_answer_shape() {
    let ep = cat().get("exchange-api-keys/add").unwrap();
    let exchanges = vec!["bitfinex".to_owned(), "binance".to_owned()];
    let c = Context {
        exchanges: Some(&exchanges),
    };
    let err = validate(ep, &Params::from_query("exchange=nowhere&token=abc"), &c).unwrap_err();
    let body = failure(
        &ApiError::validation(err),
        Meta::new(&ep.path, true, 1_592_207_324_028).uid(1),
    );
    assert_eq!(body["data"]["code"], 1440);
    assert_eq!(
        body["data"]["error"],
        "Missing POST parameter(s) required to proceed, review 'missing_parameters' for more information."
    );
    assert_eq!(body["missing_parameters"], json!(["label", "secret"]));
    assert_eq!(
        body["incorrect_value_lengths"],
        json!(["token minimum length 5"])
    );
    assert_eq!(body["missing_information"][0]["parameter"], "exchange");
    assert_eq!(
        body["missing_information"][0]["supported"],
        json!(["bitfinex", "binance"])
    );
    assert_eq!(body["meta"]["status"], 422);
    assert_eq!(body["meta"]["endpoint"], "exchange-api-keys/add");
    // Known exchanges pass, in any case.
    let ok = validate(
        ep,
        &Params::from_query("exchange=Binance&label=ab&token=12345&secret=12345"),
        &c,
    );
    assert!(ok.is_ok());
}

#[test]
fn value_rules_from_the_spec() {
    let check =
        |path: &str, q: &str| validate(cat().get(path).unwrap(), &Params::from_query(q), &ctx());
    let info = |path: &str, q: &str| check(path, q).unwrap_err().missing_information;
    // At most ten codes, terms, pairs.
    let eleven: Vec<String> = (0..11).map(|i| format!("binance-c{i}")).collect();
    assert_eq!(
        info(
            "public/fetch-symbol-price",
            &format!("code={}", eleven.join(","))
        )[0]["parameter"],
        "code"
    );
    assert!(
        check(
            "public/fetch-symbol-price",
            &format!("code={}", eleven[..10].join(","))
        )
        .is_ok()
    );
    assert!(
        check(
            "public/match-pair",
            &format!("code={}", ["btcusdt"; 11].join(","))
        )
        .is_err()
    );
    assert!(
        check(
            "public/trending-news-data",
            &format!("date=2020-07-07&title_contains={}", ["a"; 11].join(","))
        )
        .is_err()
    );
    assert!(
        check(
            "public/trending-news-data",
            &format!("date=2020-07-07&title_contains={}", ["a"; 10].join(","))
        )
        .is_ok()
    );
    // Symbol format inside lists names the bad items.
    let rec = &info("public/fetch-symbol-price", "code=binance-btcusdt,btcusdt")[0];
    assert_eq!(rec["items"], json!(["btcusdt"]));
    // Numeric bounds and enumerations.
    assert!(check("subscriptions/server-types", "type=private&duration=7199").is_err());
    assert!(check("subscriptions/server-types", "type=Shared&duration=7200").is_ok());
    assert!(check("public/bitcoin-price-tracker", "interval=300").is_err());
    assert_eq!(
        check("public/bitcoin-price-tracker", "interval=25")
            .unwrap()
            .text("interval"),
        Some("25")
    );
    let order = "apikey=12&ordertype=limit&code=binance-btcusdt&side=sell&quantity=0.5&price=1.25";
    assert!(
        check(
            "exchange-query/order-create",
            &format!("{order}&repeat_times=10")
        )
        .is_ok()
    );
    assert!(
        check(
            "exchange-query/order-create",
            &format!("{order}&repeat_times=11")
        )
        .is_err()
    );
    assert!(
        check(
            "exchange-query/order-create",
            &order.replace("sell", "hold")
        )
        .is_err()
    );
    assert!(check("exchange-query/order-create", &order.replace("0.5", "-1")).is_err());
    assert!(check("public/fetch-symbol-trades", "side=up").is_err());
    assert!(
        check(
            "backtesting/technical-indicators",
            "exchange=b&symbol=BTC/USDT&interval=1h&timefrom=1&timeto=2"
        )
        .is_ok()
    );
    assert!(
        check(
            "backtesting/technical-indicators",
            "exchange=b&symbol=BTCUSDT&interval=1h&timefrom=1&timeto=2"
        )
        .is_err()
    );
    assert!(
        check(
            "strategy/edit-profile",
            "id=1&algorithm_id=2&name=n&slice_delay=1&executable_priceoffsettype=ob6"
        )
        .is_err()
    );
    let arrays = check(
        "strategy/edit-profile",
        "id=1&algorithm_id=2&name=n&slice_delay=1&executable_codes[0]=a&executable_codes[1]=b",
    )
    .unwrap();
    assert_eq!(arrays.list("executable_codes").unwrap(), ["a", "b"]);
    assert!(
        check(
            "user/create-support-ticket",
            "name=12345&email=nobody&subject=12345&message=12345678901234567890"
        )
        .is_err()
    );
    assert!(check("system/ping", "milliseconds=abc").is_err());
    assert_eq!(
        check("system/ping", "").unwrap().integer("milliseconds"),
        Some(0)
    );
    assert!(check("public/fetch-spread-data", "combination=binance-btcusdt").is_err());
    assert!(check("system/list-announcements", "limit=0").is_err());
    assert!(check("system/list-announcements", "limit=1001").is_err());
    assert_eq!(
        check("strategy/stop", "id=3&force=YES")
            .unwrap()
            .boolean("force"),
        Some(true)
    );
    // Every problem of one value is reported: too short and badly formed at once.
    let e = check("public/trending-news-data", "date=2020").unwrap_err();
    assert_eq!(e.incorrect_value_lengths, ["date minimum length 9"]);
    assert_eq!(e.missing_information.len(), 1);
}

#[test]
fn unknown_paths_methods_and_bodies() {
    let req = |method, path, ct, body| Request {
        method,
        path,
        query: "",
        content_type: ct,
        body,
    };
    let e = prepare(cat(), &req("GET", "nope", None, b""), &ctx()).unwrap_err();
    assert_eq!((e.code.code(), e.status), (2500, 404));
    // Documented as POST; the SDKs send GET when they have no input, and that is served.
    assert!(prepare(cat(), &req("GET", "system/ping", None, b""), &ctx()).is_ok());
    let e = prepare(cat(), &req("DELETE", "system/ping", None, b""), &ctx()).unwrap_err();
    assert_eq!((e.code.code(), e.status), (2500, 405));
    assert!(e.message.contains("GET or POST"), "{}", e.message);
    let e = prepare(
        cat(),
        &req("POST", "system/ping", Some("application/json"), b"{oops"),
        &ctx(),
    )
    .unwrap_err();
    assert_eq!((e.code.code(), e.status), (2300, 400));
    let e = prepare(
        cat(),
        &req("POST", "system/ping", Some("text/html"), b"<p>"),
        &ctx(),
    )
    .unwrap_err();
    assert_eq!((e.code.code(), e.status), (2300, 415));
    assert!(
        prepare(
            cat(),
            &req("POST", "system/ping", Some("text/html"), b""),
            &ctx()
        )
        .is_ok()
    );
}

#[test]
fn fuzz_corpus_replays() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/trading_params");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        trading_model::fuzz_entry(&data);
        n += 1;
    }
    assert!(n >= 5, "corpus too small: {n}");
}

fn arb_value() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,40}",
        "[0-9-]{0,25}",
        "[a-z0-9,+/-]{0,60}",
        Just(String::new()),
        Just("true".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn validation_never_panics_and_ok_means_required_present(
        idx in 0usize..180,
        known in proptest::collection::vec((0usize..40, proptest::collection::vec(arb_value(), 0..3)), 0..12),
        unknown in proptest::collection::vec(("\\PC{0,10}", arb_value()), 0..4),
    ) {
        let ep = &cat().endpoints()[idx];
        let mut params = Params::new();
        for (i, values) in known {
            if let Some(p) = ep.parameters.get(i % ep.parameters.len().max(1)) {
                for v in values { params.push(&p.name, v); }
            }
        }
        for (k, v) in unknown { params.push(&k, v); }
        match validate(ep, &params, &ctx()) {
            Ok(valid) => {
                for p in ep.parameters.iter().filter(|p| p.required) {
                    prop_assert!(valid.get(&p.name).is_some(), "{} lacks {}", ep.path, p.name);
                }
            }
            Err(f) => prop_assert!(!f.is_empty()),
        }
    }

    #[test]
    fn raw_requests_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        trading_model::fuzz_entry(&data);
    }
}

#[test]
fn docs_list_every_endpoint() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/trading-api.md");
    let doc = std::fs::read_to_string(path).unwrap();
    for ep in cat().endpoints() {
        let row = format!("| `{}`", ep.path);
        assert!(doc.contains(&row), "docs/trading-api.md lacks {}", ep.path);
    }
}

#[test]
fn token_fuzz_corpus_replays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/trading_token");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        trading_model::fuzz_token(&std::fs::read(entry.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 5, "corpus too small: {n}");
}

proptest! {
    #[test]
    fn token_checks_never_panic(s in "[A-Za-z0-9_=.-]{0,200}", raw in proptest::collection::vec(any::<u8>(), 0..200)) {
        trading_model::fuzz_token(s.as_bytes());
        trading_model::fuzz_token(&raw);
    }
}

proptest! {
    /// Whatever a caller does, a ban only follows a 429 that was ignored, bans never exceed
    /// the cap, and without a reset each ban is at least as long as the one before.
    #[test]
    fn ban_escalation_properties(steps in proptest::collection::vec((any::<bool>(), 0u64..120_000, 1u64..61), 1..80)) {
        use trading_model::limits::{BanPolicy, Offender, Verdict};
        let p = BanPolicy::default();
        let mut o = Offender::default();
        let mut now = 1_000_000u64;
        let mut last_ban = 0u64;
        let mut waiting_until = 0u64;
        for (over, gap, reset) in steps {
            now += gap;
            if let Some(Verdict::Banned { secs }) = p.banned(&o, now) {
                prop_assert!(secs * 1000 >= o.banned_until_ms - now);
                continue;
            }
            let bans_before = o.bans;
            match p.judge(&mut o, over, reset, now) {
                Verdict::Allow => prop_assert!(!over),
                Verdict::Wait { retry_after_secs } => {
                    prop_assert!(over);
                    prop_assert_eq!(retry_after_secs, reset);
                    waiting_until = now + reset * 1000;
                }
                Verdict::Banned { secs } => {
                    prop_assert!(over && now < waiting_until, "ban without an ignored 429");
                    prop_assert!(secs <= p.max_ban_secs);
                    if bans_before > 0 && o.bans == bans_before + 1 {
                        prop_assert!(secs >= last_ban.min(p.max_ban_secs));
                    }
                    last_ban = secs;
                    waiting_until = 0;
                }
            }
        }
    }
}
