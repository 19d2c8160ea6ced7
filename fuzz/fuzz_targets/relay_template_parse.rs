//! Any text: parsing and executing it must return a value, never panic or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use relay_templates::relay::{RelayContext, relay_funcs};
use relay_templates::{Renderer, TemplateSet, Value};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut set = TemplateSet::new(relay_funcs(RelayContext::default()));
    if set.parse("main", &text).is_ok() {
        let dot = Value::map([
            (
                "a",
                Value::list(vec![Value::Float(1.0), Value::Nil, Value::from("x")]),
            ),
            ("s", Value::from("text")),
            ("n", Value::Float(3.0)),
        ]);
        for name in set.names() {
            let _ = set.render(&name, &dot);
        }
    }
});
