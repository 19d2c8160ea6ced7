//! Splitting long messages so chat APIs accept every part instead of rejecting the whole
//! (Telegram answers "message is too long" above 4096 characters and peers lose alerts
//! that way). Cuts go at line ends when possible, never inside an HTML tag or entity, and
//! in HTML mode the tags open at a cut are closed at the end of the part and reopened at
//! the start of the next, so every part is valid markup on its own.

/// One piece of the message as the splitter sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok<'a> {
    /// `<b>`, `<a href="...">`: name and whole text.
    Open(String, &'a str),
    /// `</b>`.
    Close(String),
    /// `<br/>`-style or unparsable tags, entities, single characters.
    Atom(&'a str),
}

/// Length as Telegram counts it (UTF-16 code units); raw markup counts too, so the result
/// is on the safe side of the limit.
fn units(s: &str) -> usize {
    s.encode_utf16().count()
}

fn tokens(text: &str, html: bool) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut i = 0;
    let b = text.as_bytes();
    while i < text.len() {
        if html && b[i] == b'<' {
            if let Some(end) = text[i..].find('>') {
                let tag = &text[i..=i + end];
                let inner = &tag[1..tag.len() - 1];
                let name: String = inner
                    .trim_start_matches('/')
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect::<String>()
                    .to_ascii_lowercase();
                let tok = if name.is_empty() || inner.ends_with('/') {
                    Tok::Atom(tag)
                } else if inner.starts_with('/') {
                    Tok::Close(name)
                } else {
                    Tok::Open(name, tag)
                };
                out.push(tok);
                i += end + 1;
                continue;
            }
        }
        if html && b[i] == b'&' {
            if let Some(end) = text[i..].find(';') {
                if end <= 10
                    && text[i + 1..i + end]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '#')
                {
                    out.push(Tok::Atom(&text[i..=i + end]));
                    i += end + 1;
                    continue;
                }
            }
        }
        let ch = text[i..].chars().next().map_or(1, char::len_utf8);
        out.push(Tok::Atom(&text[i..i + ch]));
        i += ch;
    }
    out
}

/// Open tags, outermost first: name and the whole opening tag.
type Stack<'a> = Vec<(String, &'a str)>;

fn closers(stack: &[(String, &str)]) -> String {
    stack.iter().rev().map(|(n, _)| format!("</{n}>")).collect()
}

fn openers(stack: &[(String, &str)]) -> String {
    stack.iter().map(|(_, t)| *t).collect()
}

/// Splits `text` into parts of at most `limit` UTF-16 units each (markup included).
/// Nothing is dropped except the newline a part ends at. `html` enables tag balancing.
pub fn split(text: &str, limit: usize, html: bool) -> Vec<String> {
    if units(text) <= limit {
        return vec![text.to_string()];
    }
    let toks = tokens(text, html);
    let mut parts: Vec<String> = Vec::new();
    let mut stack: Stack = Vec::new();
    let mut cur = String::new();
    let mut cur_units = 0usize;
    // Where the current part could end at a line break: byte offset in `cur` (before the
    // newline), the open tags there, and the token index after the newline.
    let mut line_cut: Option<(usize, Stack, usize)> = None;
    // Whether `cur` holds message content (not just reopened tags).
    let mut has_content = false;
    let mut k = 0;
    while k < toks.len() {
        let tok = &toks[k];
        let (text_of, next_stack) = match tok {
            Tok::Open(n, t) => {
                let mut s = stack.clone();
                s.push((n.clone(), *t));
                (t.to_string(), s)
            }
            Tok::Close(n) => {
                let mut s = stack.clone();
                if let Some(pos) = s.iter().rposition(|(m, _)| m == n) {
                    s.remove(pos);
                }
                (format!("</{n}>"), s)
            }
            Tok::Atom(a) => (a.to_string(), stack.clone()),
        };
        let need = cur_units + units(&text_of) + units(&closers(&next_stack));
        if need > limit && has_content {
            let (body, at_stack, resume) = match line_cut.take() {
                Some((at, s, resume)) => (cur[..at].to_string(), s, resume),
                None => (cur.clone(), stack.clone(), k),
            };
            parts.push(format!("{body}{}", closers(&at_stack)));
            stack = at_stack;
            cur = openers(&stack);
            // Reopened tags that do not fit leave no room for content: drop the markup
            // rather than loop forever.
            if units(&cur) + units(&closers(&stack)) >= limit {
                stack.clear();
                cur.clear();
            }
            cur_units = units(&cur);
            has_content = false;
            k = resume;
            continue;
        }
        if need > limit {
            // A single token larger than a whole part (a huge tag): cut it by characters.
            for ch in text_of.chars() {
                if cur_units + ch.len_utf16() > limit && !cur.is_empty() {
                    parts.push(std::mem::take(&mut cur));
                    cur_units = 0;
                }
                cur.push(ch);
                cur_units += ch.len_utf16();
            }
            stack.clear();
            has_content = true;
            line_cut = None;
            k += 1;
            continue;
        }
        if matches!(tok, Tok::Atom("\n")) && has_content {
            line_cut = Some((cur.len(), stack.clone(), k + 1));
        }
        cur.push_str(&text_of);
        cur_units += units(&text_of);
        stack = next_stack;
        has_content = true;
        k += 1;
    }
    if has_content {
        parts.push(format!("{cur}{}", closers(&stack)));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message text with the markup a split inserted removed again.
    fn visible(s: &str) -> String {
        let mut out = String::new();
        let mut in_tag = false;
        for c in s.chars() {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                _ if !in_tag => out.push(c),
                _ => {}
            }
        }
        out
    }

    #[test]
    fn short_text_is_one_part() {
        assert_eq!(split("<b>hi</b>", 4096, true), ["<b>hi</b>"]);
    }

    #[test]
    fn cuts_at_line_ends_and_rebalances_tags() {
        let text = "<b>aaaa\nbbbb\ncccc</b>";
        let parts = split(text, 12, true);
        assert_eq!(parts, ["<b>aaaa</b>", "<b>bbbb</b>", "<b>cccc</b>"]);
        for p in &parts {
            assert!(units(p) <= 12, "{p}");
        }
    }

    #[test]
    fn long_lines_are_cut_between_tokens() {
        let text = format!("x&amp;{}", "y".repeat(20));
        let parts = split(&text, 8, true);
        assert!(parts.iter().all(|p| units(p) <= 8), "{parts:?}");
        assert_eq!(parts[0], "x&amp;yy");
        assert_eq!(parts.concat(), text);
    }

    #[test]
    fn nothing_is_lost() {
        let line = "<i>alert</i> <b>FIRING</b>: p99 &gt; 0.5 ✓ on 10.0.1.15\n";
        let text = line.repeat(200);
        for limit in [64, 100, 4096] {
            let parts = split(&text, limit, true);
            assert!(parts.iter().all(|p| units(p) <= limit));
            let joined: String = parts
                .iter()
                .map(|p| visible(p))
                .collect::<Vec<_>>()
                .join("\n");
            assert_eq!(
                joined.trim_end(),
                visible(&text).trim_end(),
                "limit {limit}"
            );
        }
    }

    #[test]
    fn plain_mode_ignores_markup() {
        let parts = split("<a\n<b", 3, false);
        assert_eq!(parts, ["<a", "<b"]);
    }

    proptest::proptest! {
        #[test]
        fn parts_fit_and_keep_the_text(
            text in "[ab <>/&;#\n\u{e9}\u{1F600}]{0,300}",
            limit in 2usize..80,
            html: bool,
        ) {
            let parts = split(&text, limit, html);
            for p in &parts {
                proptest::prop_assert!(units(p) <= limit, "{:?} over {}", p, limit);
            }
            // Without markup nothing is added, and only newlines at cuts are removed.
            if !html || !text.contains('<') {
                let strip = |s: &str| s.replace('\n', "");
                proptest::prop_assert_eq!(strip(&parts.concat()), strip(&text));
            }
        }
    }

    #[test]
    fn tiny_limits_still_end() {
        let parts = split("<a href=\"https://example.com/very/long\">x</a>", 5, true);
        assert!(parts.iter().all(|p| units(p) <= 5), "{parts:?}");
        assert!(!parts.is_empty());
    }
}
