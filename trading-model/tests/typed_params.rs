//! Writes `src/typed/generated.rs` from the catalogue and fails when the checked-in file
//! differs, so the typed parameters cannot drift from `data/endpoints.json`.
//! `UPDATE_TYPED=1 cargo test -p trading-model --test typed_params` rewrites the file.

use std::fmt::Write as _;

use trading_model::{Catalogue, Kind, Param};

fn struct_name(path: &str) -> String {
    path.split(['/', '-', '_'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn field_name(name: &str) -> String {
    const KEYWORDS: [&str; 8] = ["type", "ref", "match", "move", "fn", "impl", "mod", "use"];
    if KEYWORDS.contains(&name) {
        format!("r#{name}")
    } else {
        name.to_owned()
    }
}

fn rust_type(p: &Param) -> String {
    let base = match p.kind {
        Kind::String | Kind::Date | Kind::Enum | Kind::Decimal => "String",
        Kind::Integer => "i64",
        Kind::Boolean => "bool",
        Kind::Csv | Kind::Array => "Vec<String>",
    };
    if p.required || p.default.is_some() {
        base.to_owned()
    } else {
        format!("Option<{base}>")
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn generate(cat: &Catalogue) -> String {
    let mut out = String::from(
        "// @generated from data/endpoints.json by tests/typed_params.rs; do not edit.\n\
         // Regenerate: UPDATE_TYPED=1 cargo test -p trading-model --test typed_params\n\n\
         endpoint_params! {\n",
    );
    // Endpoints whose parameter list (names and types) equals an earlier one's share its
    // struct through an alias, so one handler can serve both.
    let mut seen: Vec<(Vec<(String, String)>, String)> = Vec::new();
    let mut aliases = String::new();
    for ep in cat.endpoints().iter().filter(|e| !e.parameters.is_empty()) {
        let name = struct_name(&ep.path);
        let shape: Vec<(String, String)> = ep
            .parameters
            .iter()
            .map(|p| (p.name.clone(), rust_type(p)))
            .collect();
        if let Some((_, first)) = seen.iter().find(|(s, _)| *s == shape) {
            let _ = writeln!(aliases, "    /// `{}`: {}", ep.path, one_line(&ep.name));
            let _ = writeln!(aliases, "    {name} = {first};");
            continue;
        }
        seen.push((shape, name.clone()));
        let _ = writeln!(out, "    /// `{}`: {}", ep.path, one_line(&ep.name));
        let _ = writeln!(out, "    {name} {{");
        for p in &ep.parameters {
            if let Some(d) = &p.default {
                let _ = writeln!(
                    out,
                    "        /// {} (default `{}`)",
                    one_line(&p.description),
                    d
                );
            } else {
                let _ = writeln!(out, "        /// {}", one_line(&p.description));
            }
            let _ = writeln!(
                out,
                "        {}: {} = {:?},",
                field_name(&p.name),
                rust_type(p),
                p.name
            );
        }
        out.push_str("    }\n");
    }
    out.push_str("}\n\nendpoint_aliases! {\n");
    out.push_str(&aliases);
    out.push_str("}\n");
    out
}

#[test]
fn generated_file_matches_the_catalogue() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/typed/generated.rs");
    let want = generate(Catalogue::builtin());
    if std::env::var_os("UPDATE_TYPED").is_some() {
        std::fs::write(path, &want).expect("write generated.rs");
        return;
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == want,
        "src/typed/generated.rs differs from data/endpoints.json; run \
         UPDATE_TYPED=1 cargo test -p trading-model --test typed_params"
    );
}

#[test]
fn names_are_unique() {
    let cat = Catalogue::builtin();
    let mut names: Vec<String> = cat
        .endpoints()
        .iter()
        .map(|e| struct_name(&e.path))
        .collect();
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n);
}
