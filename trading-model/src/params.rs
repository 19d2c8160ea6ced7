//! Raw request parameters: parsing the query string and the body, and merging them.
//!
//! Values stay text here; typing happens in validation against the catalogue.

use std::collections::BTreeMap;

/// Why a request body could not be read as parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// The body claims (or looks like) JSON but does not parse.
    #[error("request body is not valid JSON: {0}")]
    Json(String),
    /// JSON bodies must be one object of parameters.
    #[error("a JSON request body must be an object of parameters")]
    NotAnObject,
    /// A `multipart/form-data` body that does not follow RFC 7578.
    #[error("malformed multipart/form-data body: {0}")]
    Multipart(&'static str),
    /// A content type the API does not read parameters from.
    #[error(
        "unsupported content type {0:?}; send application/x-www-form-urlencoded or application/json"
    )]
    UnsupportedContentType(String),
}

/// Parameters by name. Each name holds one or more values in arrival order: repeated
/// keys, PHP-style `name[]=` / `name[3]=` keys and JSON arrays all become several values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    map: BTreeMap<String, Vec<String>>,
}

/// `name[]` and `name[key]` (PHP's `http_build_query` output) both mean "another value of
/// `name`"; the index itself carries no meaning for this API.
fn base_name(key: &str) -> &str {
    match key.find('[') {
        Some(i) if i > 0 && key.ends_with(']') => &key[..i],
        _ => key,
    }
}

impl Params {
    /// An empty set.
    pub fn new() -> Params {
        Params::default()
    }

    /// Parses a URL query string (without the `?`). Never fails: undecodable bytes become
    /// U+FFFD, which validation then judges like any other text.
    ///
    /// ```
    /// let p = trading_model::Params::from_query("code=binance-btcusdt&x[]=1&x[]=2&e=%20");
    /// assert_eq!(p.last("code"), Some("binance-btcusdt"));
    /// assert_eq!(p.all("x"), ["1", "2"]);
    /// assert_eq!(p.last("e"), Some(" "));
    /// ```
    pub fn from_query(query: &str) -> Params {
        Params::from_form(query.as_bytes())
    }

    /// Parses an `application/x-www-form-urlencoded` body.
    pub fn from_form(body: &[u8]) -> Params {
        let mut p = Params::new();
        for (k, v) in form_urlencoded::parse(body) {
            if k.is_empty() {
                continue;
            }
            p.push(base_name(&k), v.into_owned());
        }
        p
    }

    /// Parses a JSON object body. Strings, numbers and booleans become text; arrays become
    /// several values; `null` counts as absent; nested objects are kept as JSON text so
    /// that validation can refuse them with a message instead of the parser failing.
    ///
    /// ```
    /// let p = trading_model::Params::from_json(br#"{"id": 7, "force": true, "codes": ["a", "b"]}"#).unwrap();
    /// assert_eq!(p.last("id"), Some("7"));
    /// assert_eq!(p.last("force"), Some("true"));
    /// assert_eq!(p.all("codes"), ["a", "b"]);
    /// assert!(trading_model::Params::from_json(b"[1]").is_err());
    /// ```
    pub fn from_json(body: &[u8]) -> Result<Params, BodyError> {
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| BodyError::Json(e.to_string()))?;
        let serde_json::Value::Object(obj) = value else {
            return Err(BodyError::NotAnObject);
        };
        let mut p = Params::new();
        for (k, v) in obj {
            if k.is_empty() {
                continue;
            }
            let name = base_name(&k).to_owned();
            match v {
                serde_json::Value::Array(items) => {
                    for item in items {
                        if let Some(text) = json_text(item) {
                            p.push(&name, text);
                        }
                    }
                }
                other => {
                    if let Some(text) = json_text(other) {
                        p.push(&name, text);
                    }
                }
            }
        }
        Ok(p)
    }

    /// Parses a body according to its `Content-Type`. Without a content type, a body whose
    /// first non-blank byte is `{` is read as JSON and anything else as a form, because
    /// the original SDKs send forms without always labelling them.
    pub fn from_body(content_type: Option<&str>, body: &[u8]) -> Result<Params, BodyError> {
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        let Some(&first) = first else {
            return Ok(Params::new());
        };
        let essence = content_type
            .map(|ct| {
                ct.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        match essence.as_str() {
            "application/json" => Params::from_json(body),
            e if e.ends_with("+json") => Params::from_json(body),
            "application/x-www-form-urlencoded" => Ok(Params::from_form(body)),
            "multipart/form-data" => Params::from_multipart(content_type.unwrap_or(""), body),
            "" | "text/plain" | "application/octet-stream" => {
                if first == b'{' {
                    Params::from_json(body)
                } else {
                    Ok(Params::from_form(body))
                }
            }
            other => Err(BodyError::UnsupportedContentType(other.to_owned())),
        }
    }

    /// Parses a `multipart/form-data` body (RFC 7578); `content_type` is the whole header
    /// value, which carries the boundary. Parts with a `filename` are files, not parameters,
    /// and are skipped.
    ///
    /// ```
    /// let body = b"--XY\r\nContent-Disposition: form-data; name=\"date\"\r\n\r\n2020-07-07\r\n--XY--\r\n";
    /// let p = trading_model::Params::from_multipart("multipart/form-data; boundary=XY", body).unwrap();
    /// assert_eq!(p.last("date"), Some("2020-07-07"));
    /// ```
    pub fn from_multipart(content_type: &str, body: &[u8]) -> Result<Params, BodyError> {
        let boundary = content_type
            .split(';')
            .skip(1)
            .find_map(|part| {
                let (k, v) = part.split_once('=')?;
                k.trim()
                    .eq_ignore_ascii_case("boundary")
                    .then(|| v.trim().trim_matches('"'))
            })
            .filter(|b| !b.is_empty() && b.len() <= 70)
            .ok_or(BodyError::Multipart("the content type names no boundary"))?;
        let first = format!("--{boundary}");
        let next = format!("\r\n--{boundary}");
        let start =
            find(body, first.as_bytes()).ok_or(BodyError::Multipart("no boundary in the body"))?;
        let mut rest = &body[start + first.len()..];
        let mut params = Params::new();
        loop {
            if rest.starts_with(b"--") {
                return Ok(params);
            }
            rest = rest
                .strip_prefix(b"\r\n")
                .ok_or(BodyError::Multipart("a boundary must end its line"))?;
            let end =
                find(rest, next.as_bytes()).ok_or(BodyError::Multipart("a part never ends"))?;
            let part = &rest[..end];
            rest = &rest[end + next.len()..];
            let (head, content) = match part.strip_prefix(b"\r\n") {
                Some(content) => (&b""[..], content),
                None => {
                    let split = find(part, b"\r\n\r\n")
                        .ok_or(BodyError::Multipart("part headers never end"))?;
                    (&part[..split], &part[split + 4..])
                }
            };
            let head = String::from_utf8_lossy(head);
            let disposition = head.split("\r\n").find_map(|line| {
                let (k, v) = line.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-disposition")
                    .then_some(v)
            });
            let Some(disposition) = disposition else {
                return Err(BodyError::Multipart("a part has no Content-Disposition"));
            };
            let mut name = None;
            let mut is_file = false;
            for attr in disposition.split(';').skip(1) {
                let Some((k, v)) = attr.split_once('=') else {
                    continue;
                };
                match k.trim().to_ascii_lowercase().as_str() {
                    "name" => name = Some(v.trim().trim_matches('"').to_owned()),
                    "filename" | "filename*" => is_file = true,
                    _ => {}
                }
            }
            match name {
                Some(n) if !n.is_empty() && !is_file => {
                    params.push(base_name(&n), String::from_utf8_lossy(content).into_owned());
                }
                Some(_) => {}
                None => return Err(BodyError::Multipart("a part has no name")),
            }
        }
    }

    /// Combines query-string and body parameters. A name present in the query string takes
    /// all its values from there; the body's values for that name are dropped entirely.
    ///
    /// ```
    /// use trading_model::Params;
    /// let q = Params::from_query("id=1");
    /// let b = Params::from_form(b"id=2&label=abc");
    /// let m = Params::merge_query_wins(q, b);
    /// assert_eq!(m.last("id"), Some("1"));
    /// assert_eq!(m.last("label"), Some("abc"));
    /// ```
    pub fn merge_query_wins(query: Params, body: Params) -> Params {
        let mut map = body.map;
        for (k, v) in query.map {
            map.insert(k, v);
        }
        Params { map }
    }

    /// Appends a value to `name`.
    pub fn push(&mut self, name: &str, value: impl Into<String>) {
        self.map
            .entry(name.to_owned())
            .or_default()
            .push(value.into());
    }

    /// Replaces every value of `name` with one value.
    pub fn set(&mut self, name: &str, value: impl Into<String>) {
        self.map.insert(name.to_owned(), vec![value.into()]);
    }

    /// Removes `name`.
    pub fn remove(&mut self, name: &str) {
        self.map.remove(name);
    }

    /// All values of `name`, in arrival order (empty when absent).
    pub fn all(&self, name: &str) -> &[String] {
        self.map.get(name).map_or(&[], Vec::as_slice)
    }

    /// The last value of `name`: for repeated single-valued parameters the last one counts,
    /// as in the PHP original.
    pub fn last(&self, name: &str) -> Option<&str> {
        self.all(name).last().map(String::as_str)
    }

    /// Parameter names present.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    /// Number of distinct names.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no parameter is present.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > haystack.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn json_text(v: serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        nested => Some(nested.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn php_array_keys_and_repeats() {
        let p = Params::from_query("a%5B0%5D=x&a%5B1%5D=y&b=1&b=2&[]=z&=q&c[=w");
        assert_eq!(p.all("a"), ["x", "y"]);
        assert_eq!(p.last("b"), Some("2"));
        assert_eq!(p.all("[]"), ["z"]);
        assert_eq!(p.last("c["), Some("w"));
        assert_eq!(p.len(), 4);
    }

    #[test]
    fn plus_and_percent_decoding() {
        let p = Params::from_query("combination=a-b%2Bc-d&t=x+y&bad=%zz%ff");
        assert_eq!(p.last("combination"), Some("a-b+c-d"));
        assert_eq!(p.last("t"), Some("x y"));
        assert_eq!(p.last("bad"), Some("%zz\u{fffd}"));
    }

    #[test]
    fn json_bodies() {
        let p =
            Params::from_json(br#"{"n": null, "o": {"k": 1}, "a": [1, null, "s"], "x[]": ["q"]}"#)
                .unwrap();
        assert!(p.all("n").is_empty());
        assert_eq!(p.last("o"), Some(r#"{"k":1}"#));
        assert_eq!(p.all("a"), ["1", "s"]);
        assert_eq!(p.all("x"), ["q"]);
        assert_eq!(Params::from_json(b"\"s\""), Err(BodyError::NotAnObject));
        assert!(matches!(Params::from_json(b"{"), Err(BodyError::Json(_))));
    }

    #[test]
    fn body_by_content_type() {
        let form = Params::from_body(
            Some("application/x-www-form-urlencoded; charset=utf-8"),
            b"a=1",
        )
        .unwrap();
        assert_eq!(form.last("a"), Some("1"));
        let sniffed = Params::from_body(None, b"  {\"a\": 2}").unwrap();
        assert_eq!(sniffed.last("a"), Some("2"));
        let json = Params::from_body(Some("Application/JSON"), b"{\"a\": 3}").unwrap();
        assert_eq!(json.last("a"), Some("3"));
        assert!(Params::from_body(Some("application/json"), b"a=1").is_err());
        assert!(Params::from_body(Some("image/png"), b"x").is_err());
        let mp = Params::from_body(
            Some("multipart/form-data; boundary=\"b1\""),
            b"preamble\r\n--b1\r\nContent-Disposition: form-data; name=\"a[]\"\r\n\r\nx\r\n--b1\r\ncontent-disposition: form-data; name=a[]\r\nContent-Type: text/plain\r\n\r\ny\r\nz\r\n--b1\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f.txt\"\r\n\r\nfile\r\n--b1--",
        )
        .unwrap();
        assert_eq!(mp.all("a"), ["x", "y\r\nz"]);
        assert!(mp.all("f").is_empty(), "files are no parameters");
        for bad in ["multipart/form-data", "multipart/form-data; boundary="] {
            assert!(Params::from_body(Some(bad), b"--x\r\n").is_err(), "{bad}");
        }
        let ct = Some("multipart/form-data; boundary=b");
        for bad in [
            &b"no delimiter"[..],
            b"--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nnever ends",
            b"--bX",
            b"--b\r\nX-Other: 1\r\n\r\nv\r\n--b--",
            b"--b\r\nContent-Disposition: form-data\r\n\r\nv\r\n--b--",
        ] {
            assert!(
                Params::from_body(ct, bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(
            Params::from_body(Some("image/png"), b"")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn query_replaces_all_body_values_of_a_name() {
        let q = Params::from_query("codes[]=q1");
        let b = Params::from_form(b"codes[]=b1&codes[]=b2&other=1");
        let m = Params::merge_query_wins(q, b);
        assert_eq!(m.all("codes"), ["q1"]);
        assert_eq!(m.last("other"), Some("1"));
    }
}
