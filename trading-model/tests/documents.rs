//! Tests generated from the catalogue: the documents derived from it (OpenAPI, the
//! `system/endpoints` records, the 1440 answer), the value rules of the spec, requests
//! that match no endpoint, and the fuzz corpora. Parameter validation is in `model.rs`.

use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::json;
use trading_model::{
    ApiError, Catalogue, Context, Meta, Params, Request, endpoint_records, failure, openapi,
    prepare, validate,
};

fn cat() -> &'static Catalogue {
    Catalogue::builtin()
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
    let check = |path: &str, q: &str| {
        validate(
            cat().get(path).unwrap(),
            &Params::from_query(q),
            &Context::default(),
        )
    };
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
    let e = prepare(cat(), &req("GET", "nope", None, b""), &Context::default()).unwrap_err();
    assert_eq!((e.code.code(), e.status), (2500, 404));
    // Documented as POST; the SDKs send GET when they have no input, and that is served.
    assert!(
        prepare(
            cat(),
            &req("GET", "system/ping", None, b""),
            &Context::default()
        )
        .is_ok()
    );
    let e = prepare(
        cat(),
        &req("DELETE", "system/ping", None, b""),
        &Context::default(),
    )
    .unwrap_err();
    assert_eq!((e.code.code(), e.status), (2500, 405));
    assert!(e.message.contains("GET or POST"), "{}", e.message);
    let e = prepare(
        cat(),
        &req("POST", "system/ping", Some("application/json"), b"{oops"),
        &Context::default(),
    )
    .unwrap_err();
    assert_eq!((e.code.code(), e.status), (2300, 400));
    let e = prepare(
        cat(),
        &req("POST", "system/ping", Some("text/html"), b"<p>"),
        &Context::default(),
    )
    .unwrap_err();
    assert_eq!((e.code.code(), e.status), (2300, 415));
    assert!(
        prepare(
            cat(),
            &req("POST", "system/ping", Some("text/html"), b""),
            &Context::default()
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
        match validate(ep, &params, &Context::default()) {
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
