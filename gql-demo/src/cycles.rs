//! Fragment cycles reported as graphql-js words them.
//!
//! juniper finds cycles but names only the fragment ("Cannot spread fragment \"A\""); graphql-js
//! names the whole cycle ("Cannot spread fragment \"A\" within itself via \"B\", \"C\".") with
//! the location of every spread on it, and clients and tutorials quote that wording. So when
//! juniper's validation fails with a cycle, the document is parsed again (a rejected request
//! only; valid requests never come here) and the cycles are found and worded here, in the
//! order and form of graphql-js's `NoFragmentCyclesRule`.

use std::collections::{HashMap, HashSet};

use juniper::{
    DefaultScalarValue, Definition, RuleError, Selection, parser::SourcePosition,
    parser::parse_document_source,
};

use crate::Schema;

/// Most cycle errors one reply carries (graphql-js stops validation at 100 errors too): a
/// document of many fragments that all spread one another has a number of cycles, and names
/// on each, that grows with the square of its size.
const MAX_CYCLE_ERRORS: usize = 100;

/// Replaces juniper's fragment cycle errors in `errors` with graphql-js's wording, keeping
/// every other error. Returns `errors` unchanged when none is about a cycle.
pub(crate) fn reword(errors: Vec<RuleError>, query: &str, schema: &Schema) -> Vec<RuleError> {
    let (juniper_cycles, mut kept): (Vec<_>, Vec<_>) = errors
        .into_iter()
        .partition(|e| is_juniper_cycle_message(e.message()));
    if juniper_cycles.is_empty() {
        return kept;
    }
    match parse_document_source::<DefaultScalarValue>(query, &schema.schema) {
        // graphql-js may see no cycle where juniper does: juniper merges the spreads of
        // fragments that share a name (an error of its own), graphql-js walks each
        // definition's own.
        Ok(document) => kept.extend(fragment_cycles(&document)),
        // The document parsed a moment ago with the same limits; should it not, juniper's own
        // wording is still better than none.
        Err(_) => kept.extend(juniper_cycles.iter().cloned()),
    }
    // Whatever the wording, a document juniper refused stays refused.
    if kept.is_empty() {
        kept = juniper_cycles;
    }
    // juniper orders validation errors by location; the merged list keeps that order.
    kept.sort();
    kept
}

/// juniper's message is exactly `Cannot spread fragment "NAME"`.
pub(crate) fn is_juniper_cycle_message(message: &str) -> bool {
    message
        .strip_prefix("Cannot spread fragment \"")
        .and_then(|rest| rest.strip_suffix('"'))
        .is_some_and(|name| !name.contains('"'))
}

/// A fragment spread: the name it spreads and where its `...` starts.
#[derive(Clone, Copy)]
struct Spread<'a> {
    name: &'a str,
    at: SourcePosition,
}

/// One fragment being explored: its spreads and the next one to follow.
struct Frame<'a> {
    name: &'a str,
    spreads: Vec<Spread<'a>>,
    next: usize,
}

/// Every fragment cycle of `document`, as graphql-js reports them: fragment definitions are
/// explored in document order, depth first, each name at most once, and a spread back onto
/// the current path is a cycle named after the fragment it re-enters, "via" the others on
/// the path.
fn fragment_cycles(document: &[Definition<'_, DefaultScalarValue>]) -> Vec<RuleError> {
    let mut walk = Walk::default();
    let mut definitions = Vec::new();
    for definition in document {
        if let Definition::Fragment(fragment) = definition {
            let name = fragment.item.name.item;
            let selection_set = &fragment.item.selection_set[..];
            // Like graphql-js, a spread of a repeated name (itself an error) enters the last
            // definition, but each definition's walk starts from its own selections.
            walk.fragments.insert(name, selection_set);
            definitions.push((name, selection_set));
        }
    }
    for (name, selection_set) in definitions {
        walk.explore(name, selection_set);
    }
    walk.errors
}

/// The state of the depth-first walk. It keeps its own stack instead of recursing, so that a
/// long chain of fragments cannot overflow the thread's stack whatever the token limit.
#[derive(Default)]
struct Walk<'a, 'd> {
    fragments: HashMap<&'a str, &'d [Selection<'a, DefaultScalarValue>]>,
    visited: HashSet<&'a str>,
    /// The spreads from the walk's start to the fragment being explored.
    path: Vec<Spread<'a>>,
    /// For each fragment on the path, the length `path` had when it was entered.
    on_path: HashMap<&'a str, usize>,
    errors: Vec<RuleError>,
}

impl<'a, 'd> Walk<'a, 'd> {
    fn explore(&mut self, start: &'a str, selection_set: &'d [Selection<'a, DefaultScalarValue>]) {
        let mut stack: Vec<Frame<'a>> = self.enter_set(start, selection_set).into_iter().collect();
        while let Some(frame) = stack.last_mut() {
            let Some(&spread) = frame.spreads.get(frame.next) else {
                self.on_path.remove(frame.name);
                stack.pop();
                // The spread that led into the finished fragment leaves the path with it.
                if !stack.is_empty() {
                    self.path.pop();
                }
                continue;
            };
            frame.next += 1;
            self.path.push(spread);
            if let Some(&entered_at) = self.on_path.get(spread.name) {
                if self.errors.len() < MAX_CYCLE_ERRORS {
                    self.errors.push(cycle_error(&self.path[entered_at..]));
                }
                self.path.pop();
            } else if let Some(next) = self.enter(spread.name) {
                stack.push(next);
            } else {
                self.path.pop();
            }
        }
    }

    /// Starts exploring the fragment `name`; `None` when there is nothing to explore: it was
    /// explored before, spreads nothing, or does not exist (KnownFragmentNames' error).
    fn enter(&mut self, name: &'a str) -> Option<Frame<'a>> {
        let selection_set = *self.fragments.get(name)?;
        self.enter_set(name, selection_set)
    }

    /// Starts exploring the fragment `name` whose selections are `selection_set`.
    fn enter_set(
        &mut self,
        name: &'a str,
        selection_set: &'d [Selection<'a, DefaultScalarValue>],
    ) -> Option<Frame<'a>> {
        if !self.visited.insert(name) {
            return None;
        }
        let spreads = spreads_of(selection_set);
        if spreads.is_empty() {
            return None;
        }
        self.on_path.insert(name, self.path.len());
        Some(Frame {
            name,
            spreads,
            next: 0,
        })
    }
}

/// `cycle` holds the spreads from inside the re-entered fragment up to the one back into it:
/// graphql-js names that fragment, lists the ones the other spreads enter after "via", and
/// locates every spread.
fn cycle_error(cycle: &[Spread<'_>]) -> RuleError {
    let (last, via) = cycle.split_last().expect("a cycle has at least one spread");
    let mut message = format!("Cannot spread fragment \"{}\" within itself", last.name);
    if !via.is_empty() {
        let names: Vec<String> = via.iter().map(|s| format!("\"{}\"", s.name)).collect();
        message.push_str(" via ");
        message.push_str(&names.join(", "));
    }
    message.push('.');
    let locations: Vec<SourcePosition> = cycle.iter().map(|s| s.at).collect();
    RuleError::new(&message, &locations)
}

/// The fragment spreads of a selection set, nested ones included, in the order graphql-js
/// lists them (its `getFragmentSpreads`): the spreads of a set first, then those of nested
/// sets, taking the last pending set first.
fn spreads_of<'a>(selection_set: &[Selection<'a, DefaultScalarValue>]) -> Vec<Spread<'a>> {
    let mut spreads = Vec::new();
    let mut pending = vec![selection_set];
    while let Some(set) = pending.pop() {
        for selection in set {
            match selection {
                Selection::FragmentSpread(spread) => spreads.push(Spread {
                    name: spread.item.name.item,
                    at: spread.span.start,
                }),
                Selection::Field(field) => {
                    if let Some(nested) = &field.item.selection_set {
                        pending.push(nested);
                    }
                }
                Selection::InlineFragment(inline) => pending.push(&inline.item.selection_set),
            }
        }
    }
    spreads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cycles(document: &str) -> Vec<String> {
        let schema = crate::schema();
        let parsed = parse_document_source::<DefaultScalarValue>(document, &schema.schema)
            .expect("test documents parse");
        fragment_cycles(&parsed)
            .iter()
            .map(|e| e.message().to_owned())
            .collect()
    }

    #[test]
    fn recognises_only_juniper_cycle_messages() {
        assert!(is_juniper_cycle_message(r#"Cannot spread fragment "A""#));
        assert!(!is_juniper_cycle_message(
            r#"Cannot spread fragment "A" within itself."#
        ));
        assert!(!is_juniper_cycle_message(r#"Unknown fragment: "A""#));
    }

    #[test]
    fn a_fragment_explored_once_is_not_reported_again() {
        // B's cycle through C is found from A's walk; starting again at B or C finds nothing
        // new, as in graphql-js.
        assert_eq!(
            cycles(
                "fragment A on Creature { ...B } fragment B on Creature { ...C } \
                 fragment C on Creature { ...B }"
            ),
            [r#"Cannot spread fragment "B" within itself via "C"."#]
        );
        assert!(
            cycles("fragment A on Creature { ...B ...B } fragment B on Creature { id }").is_empty()
        );
    }

    #[test]
    fn a_repeated_name_is_walked_from_its_first_definition() {
        // graphql-js starts from each definition's own selections (the second `A` is
        // skipped as visited), while a spread enters the last `A`: the first `A` spreads
        // itself. juniper reported it; the rewording once lost it (cargo fuzz, gql_query).
        assert_eq!(
            cycles(
                "fragment A on Creature { evolutions { ...A } } \
                 fragment A on Creature { id }"
            ),
            [r#"Cannot spread fragment "A" within itself."#]
        );
    }

    #[test]
    fn reports_at_most_a_hundred_cycles() {
        let spreads = "...A ".repeat(150);
        let found = cycles(&format!("fragment A on Creature {{ {spreads} }}"));
        assert_eq!(found.len(), MAX_CYCLE_ERRORS);
    }
}
