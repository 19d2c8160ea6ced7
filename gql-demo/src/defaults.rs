//! A guard for a panic in juniper's validation.
//!
//! juniper's `DefaultValuesOfCorrectType` rule looks up the type of every variable that has
//! a default value and panics ("Type not found in schema") when the schema has no such
//! type, as in `query($n: Nope = 1) { ... }`. Such a document is invalid anyway
//! (`KnownTypeNames` refuses the type). So before juniper validates, the `= default` of
//! each such variable is blanked out with spaces, which keeps every line and column, and
//! juniper reports the unknown type and every other error of the document, without the
//! panic. The blanked text is only ever validated, never executed: the unknown type alone
//! makes juniper refuse it.

use juniper::{DefaultScalarValue, Definition, parser::parse_document_source};

use crate::Schema;

/// `query` with the default values of variables of unknown types blanked out, or `None`
/// when it has none (or does not parse: juniper then reports that itself).
pub(crate) fn blank_unknown_defaults(query: &str, schema: &Schema) -> Option<String> {
    // Only a variable's default value brings a `=` outside strings: most documents have
    // none and are not parsed twice.
    if !query.contains('=') {
        return None;
    }
    let document = parse_document_source::<DefaultScalarValue>(query, &schema.schema).ok()?;
    // Character ranges (juniper counts positions in characters) from the end of the type
    // to the end of the default value: ` = value`.
    let mut blank = Vec::new();
    for definition in &document {
        let Definition::Operation(operation) = definition else {
            continue;
        };
        let Some(variables) = &operation.item.variables_definition else {
            continue;
        };
        for (_, variable) in &variables.item.items {
            let Some(default) = &variable.default_value else {
                continue;
            };
            let name = variable.var_type.item.innermost_name();
            if schema.schema.type_by_name(name).is_none() {
                blank.push(variable.var_type.span.end.index()..default.span.end.index());
            }
        }
    }
    if blank.is_empty() {
        return None;
    }
    Some(
        query
            .chars()
            .enumerate()
            .map(|(i, c)| {
                let line_break = c == '\n' || c == '\r';
                if !line_break && blank.iter().any(|r| r.contains(&i)) {
                    ' '
                } else {
                    c
                }
            })
            .collect(),
    )
}
