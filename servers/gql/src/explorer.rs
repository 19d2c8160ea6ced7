//! The explorer page (GraphiQL) and the local copies of its assets.
//!
//! GraphiQL 3 is the last major version that ships a browser-ready UMD build
//! (`graphiql.min.js`, with graphql-js inside) that runs on React 18's UMD builds with no
//! bundler. GraphiQL 4 and 5 ship only ES modules with bare imports (and Monaco web
//! workers), which need an import map and many more files to work offline. So the page pins
//! GraphiQL 3.9.0 and React 18.3.1, from a CDN by default or from a local `node_modules`.

use std::{collections::HashMap, path::Path};

use bytes::Bytes;
use gql_demo::Request;

use crate::{ServerError, settings::Assets};

/// Path under which local assets are served.
pub const ASSETS_PREFIX: &str = "/graphql/assets/";

/// The files the page loads: (package, version, path inside the package, content type).
const FILES: [(&str, &str, &str, &str); 4] = [
    (
        "react",
        "18.3.1",
        "umd/react.production.min.js",
        "text/javascript; charset=utf-8",
    ),
    (
        "react-dom",
        "18.3.1",
        "umd/react-dom.production.min.js",
        "text/javascript; charset=utf-8",
    ),
    (
        "graphiql",
        "3.9.0",
        "graphiql.min.js",
        "text/javascript; charset=utf-8",
    ),
    (
        "graphiql",
        "3.9.0",
        "graphiql.min.css",
        "text/css; charset=utf-8",
    ),
];

/// Query shown when the page opens.
const DEFAULT_QUERY: &str = "# Press the run button (or Ctrl-Enter) to send this query.\n\
{\n  creatures {\n    id\n    name\n  }\n}\n";

/// Marks where a request's document goes in the rendered page; it is not valid JSON, so it
/// cannot be mistaken for a prefill.
const PREFILL_SLOT: &str = "@@prefill@@";

/// The rendered page, cut where a request's document goes, plus, for a local directory, the
/// asset bytes held in memory (four files, about 1.5 MB), so that no request path ever
/// reaches the file system.
#[derive(Debug)]
pub struct Explorer {
    before_prefill: String,
    after_prefill: String,
    files: HashMap<String, (Bytes, &'static str)>,
}

impl Explorer {
    /// Renders the page for `assets`; a directory must hold every file the page needs.
    pub fn new(assets: &Assets) -> Result<Self, ServerError> {
        let mut files = HashMap::new();
        let mut urls = Vec::with_capacity(FILES.len());
        match assets {
            Assets::Cdn(base) => {
                for (package, version, file, _) in FILES {
                    urls.push(format!("{base}/{package}@{version}/{file}"));
                }
            }
            Assets::Dir(dir) => {
                for (package, _, file, content_type) in FILES {
                    let relative = format!("{package}/{file}");
                    let bytes = read_asset(dir, &relative)?;
                    urls.push(format!("{ASSETS_PREFIX}{relative}"));
                    files.insert(relative, (bytes, content_type));
                }
            }
        }
        let page = render(&urls[0], &urls[1], &urls[2], &urls[3]);
        let (before, after) = page
            .split_once(PREFILL_SLOT)
            .expect("the page template has a prefill slot");
        Ok(Self {
            before_prefill: before.to_owned(),
            after_prefill: after.to_owned(),
            files,
        })
    }

    /// The HTML page, its editors filled with the document, variables and operation name of
    /// `request` (as express-graphql does for a browser's `GET /graphql?query=...`); an empty
    /// request shows the default query. Nothing runs until the user presses run.
    pub fn page(&self, request: &Request) -> Bytes {
        let prefill = prefill_json(request);
        let mut page = String::with_capacity(
            self.before_prefill.len() + prefill.len() + self.after_prefill.len(),
        );
        page.push_str(&self.before_prefill);
        page.push_str(&prefill);
        page.push_str(&self.after_prefill);
        Bytes::from(page)
    }

    /// A local asset by its path below [`ASSETS_PREFIX`]; only the page's files exist.
    pub fn asset(&self, relative: &str) -> Option<(Bytes, &'static str)> {
        self.files.get(relative).cloned()
    }
}

fn read_asset(dir: &Path, relative: &str) -> Result<Bytes, ServerError> {
    let path = dir.join(relative);
    std::fs::read(&path).map(Bytes::from).map_err(|e| {
        ServerError::Settings(format!(
            "explorer asset {} cannot be read ({e}); fill the directory with \
             `npm install graphiql@3.9.0 react@18.3.1 react-dom@18.3.1` and pass its \
             node_modules folder",
            path.display()
        ))
    })
}

/// The request's fields as GraphiQL's props want them (`variables` as text), in JSON that is
/// safe inside a `<script>` element: `<`, `>` and `&` only ever occur inside JSON strings,
/// where their `\u` escapes mean the same, so no `</script>` or `<!--` from a URL can end or
/// confuse the element. U+2028 and U+2029 are escaped for older JavaScript parsers.
fn prefill_json(request: &Request) -> String {
    let mut prefill = serde_json::Map::new();
    if let Some(query) = request.query.as_deref().filter(|q| !q.trim().is_empty()) {
        prefill.insert("query".into(), query.into());
    }
    match &request.variables {
        Some(serde_json::Value::String(text)) => {
            prefill.insert("variables".into(), text.as_str().into());
        }
        Some(value) if !value.is_null() => {
            prefill.insert("variables".into(), value.to_string().into());
        }
        _ => {}
    }
    if let Some(name) = &request.operation_name {
        prefill.insert("operationName".into(), name.as_str().into());
    }
    serde_json::Value::Object(prefill)
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

fn render(react: &str, react_dom: &str, graphiql: &str, css: &str) -> String {
    let default_query = serde_json::to_string(DEFAULT_QUERY).unwrap_or_else(|_| "\"\"".into());
    // Asset URLs come from the operator's settings, not from requests; they are still
    // escaped so that a URL with a quote cannot break the page.
    let (react, react_dom, graphiql, css) = (
        html_attr(react),
        html_attr(react_dom),
        html_attr(graphiql),
        html_attr(css),
    );
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>GraphQL demo explorer</title>
<style>
  html, body {{ margin: 0; height: 100%; }}
  #graphiql {{ height: 100vh; }}
  .gql-demo-failed {{ font: 16px/1.5 sans-serif; padding: 2em; max-width: 48em; }}
</style>
<link rel="stylesheet" href="{css}">
<script src="{react}"></script>
<script src="{react_dom}"></script>
<script src="{graphiql}"></script>
</head>
<body>
<div id="graphiql">Loading the explorer…</div>
<script id="gql-demo-prefill" type="application/json">{PREFILL_SLOT}</script>
<script>
(function () {{
  var root = document.getElementById('graphiql');
  if (typeof React === 'undefined' || typeof ReactDOM === 'undefined' || typeof GraphiQL === 'undefined') {{
    root.className = 'gql-demo-failed';
    root.textContent = 'The explorer scripts could not be loaded (no internet?). Start the server ' +
      'with --assets-dir pointing at a node_modules folder that holds graphiql@3.9.0, ' +
      'react@18.3.1 and react-dom@18.3.1. The endpoint itself works: POST queries to /graphql.';
    return;
  }}
  var fetcher = GraphiQL.createFetcher({{ url: new URL('/graphql', window.location.href).href }});
  // The document of a GET /graphql?query=... link; GraphiQL opens a tab for it.
  var prefill = JSON.parse(document.getElementById('gql-demo-prefill').textContent);
  ReactDOM.createRoot(root).render(React.createElement(GraphiQL, {{
    fetcher: fetcher,
    defaultQuery: {default_query},
    query: prefill.query,
    variables: prefill.variables,
    operationName: prefill.operationName,
    defaultEditorToolsVisibility: prefill.variables ? 'variables' : true
  }}));
}})();
</script>
</body>
</html>
"#
    )
}

fn html_attr(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdn_page_pins_versions() {
        let explorer = Explorer::new(&Assets::Cdn("https://cdn.example/npm".into())).unwrap();
        let page = String::from_utf8(explorer.page(&Request::default()).to_vec()).unwrap();
        assert!(page.contains("https://cdn.example/npm/graphiql@3.9.0/graphiql.min.js"));
        assert!(
            page.contains(r#"<script id="gql-demo-prefill" type="application/json">{}</script>"#)
        );
        assert!(page.contains("https://cdn.example/npm/react@18.3.1/umd/react.production.min.js"));
        assert!(explorer.asset("graphiql/graphiql.min.js").is_none());
    }

    #[test]
    fn missing_dir_is_a_clear_error() {
        let err = Explorer::new(&Assets::Dir("/nonexistent/node_modules".into()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("react.production.min.js"), "{err}");
        assert!(err.contains("npm install"), "{err}");
    }

    #[test]
    fn prefill_is_json_that_cannot_end_its_script() {
        let request = Request::from_params([
            ("query".into(), "{ a } </script><!-- & \u{2028}".into()),
            ("variables".into(), r#"{"n": "</SCRIPT>"}"#.into()),
            ("operationName".into(), "Op".into()),
        ]);
        let json = prefill_json(&request);
        for forbidden in ['<', '>', '&', '\u{2028}'] {
            assert!(!json.contains(forbidden), "{forbidden:?} in {json}");
        }
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            back,
            serde_json::json!({
                "query": "{ a } </script><!-- & \u{2028}",
                "variables": r#"{"n": "</SCRIPT>"}"#,
                "operationName": "Op",
            })
        );
        assert_eq!(prefill_json(&Request::from_query("  ")), "{}");
    }

    #[test]
    fn urls_are_escaped() {
        let page = render("a\"b", "<x>", "&", "c");
        assert!(page.contains("a&quot;b") && page.contains("&lt;x&gt;") && page.contains("&amp;"));
    }
}
