//! Settings from command-line flags and environment variables (flags win).

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use crate::ServerError;

/// Where the explorer page loads GraphiQL and React from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assets {
    /// A CDN serving npm packages as `{base}/{package}@{version}/{file}`.
    Cdn(String),
    /// A local `node_modules` directory (filled by `npm install graphiql@3 react@18
    /// react-dom@18`); the server serves the few files the page needs from it.
    Dir(PathBuf),
}

/// The CDN used when no assets directory is given.
pub const DEFAULT_ASSETS_URL: &str = "https://cdn.jsdelivr.net/npm";

/// Everything the server needs; [`Settings::default`] is what the binary runs with no flags.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Settings {
    /// Address the binary binds (tests bind their own listener instead).
    pub listen: SocketAddr,
    /// Explorer asset source.
    pub assets: Assets,
    /// Creature data file; `None` uses the data set shipped in `gql-demo`.
    pub data: Option<PathBuf>,
    /// Schema limits and message store limits.
    pub demo: gql_demo::Settings,
    /// Largest request body, and longest URL query string, in bytes.
    pub max_body_bytes: usize,
    /// Time allowed to receive request headers, and then the body.
    pub request_timeout: Duration,
    /// Connections served at once; further clients wait in the listen queue.
    pub max_connections: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 4000)),
            assets: Assets::Cdn(DEFAULT_ASSETS_URL.into()),
            data: None,
            demo: gql_demo::Settings::default(),
            max_body_bytes: 64 * 1024,
            request_timeout: Duration::from_secs(10),
            max_connections: 256,
        }
    }
}

/// What the command line asks for.
#[derive(Debug)]
#[non_exhaustive]
pub enum Command {
    /// Run the server.
    Serve(Settings),
    /// Print the schema in SDL and exit.
    PrintSchema(Settings),
    /// Print usage and exit.
    Help,
}

/// Usage text of the binary.
pub const USAGE: &str = "\
gql-demo: the GraphQL creature demo (endpoint /graphql, explorer on GET /graphql in a browser)

Usage: gql-demo [FLAGS]

Flags (environment variable in brackets; a flag wins over its variable):
  --port N                   listen port, default 4000, 0 picks a free one   [PORT]
  --host ADDR                listen address, default 127.0.0.1               [HOST]
  --assets-dir DIR           serve explorer assets from this node_modules dir [GQL_ASSETS_DIR]
  --assets-url URL           CDN base for explorer assets when no dir is given,
                             default https://cdn.jsdelivr.net/npm             [GQL_ASSETS_URL]
  --data FILE                creature data file (JSON array), default: built in [GQL_DATA]
  --max-depth N              deepest query nesting, default 20               [GQL_MAX_DEPTH]
  --max-complexity N         most fields per operation, fragments expanded,
                             default 500                                     [GQL_MAX_COMPLEXITY]
  --max-tokens N             most tokens per document, default 2000          [GQL_MAX_TOKENS]
  --max-body-bytes N         largest request body or query string, default 65536 [GQL_MAX_BODY_BYTES]
  --max-messages N           messages kept by the store, default 10000       [GQL_MAX_MESSAGES]
  --request-timeout-secs N   time to receive a request, default 10           [GQL_REQUEST_TIMEOUT_SECS]
  --max-connections N        connections served at once, default 256         [GQL_MAX_CONNECTIONS]
  --print-schema             print the schema (SDL) and exit
  --help                     print this text
";

/// (flag, environment variable) pairs that take a value.
const VALUE_FLAGS: &[(&str, &str)] = &[
    ("--port", "PORT"),
    ("--host", "HOST"),
    ("--assets-dir", "GQL_ASSETS_DIR"),
    ("--assets-url", "GQL_ASSETS_URL"),
    ("--data", "GQL_DATA"),
    ("--max-depth", "GQL_MAX_DEPTH"),
    ("--max-complexity", "GQL_MAX_COMPLEXITY"),
    ("--max-tokens", "GQL_MAX_TOKENS"),
    ("--max-body-bytes", "GQL_MAX_BODY_BYTES"),
    ("--max-messages", "GQL_MAX_MESSAGES"),
    ("--request-timeout-secs", "GQL_REQUEST_TIMEOUT_SECS"),
    ("--max-connections", "GQL_MAX_CONNECTIONS"),
];

impl Command {
    /// Reads flags (without the program name) and variables through `env`, so tests can pass
    /// their own environment.
    pub fn parse<I, F>(args: I, env: F) -> Result<Self, ServerError>
    where
        I: IntoIterator<Item = String>,
        F: Fn(&str) -> Option<String>,
    {
        let mut given: Vec<(&'static str, String)> = Vec::new();
        let mut print_schema = false;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--help" | "-h" => return Ok(Self::Help),
                "--print-schema" => {
                    print_schema = true;
                    continue;
                }
                _ => {}
            }
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
                None => (arg.clone(), None),
            };
            let Some(&(flag, _)) = VALUE_FLAGS.iter().find(|(f, _)| *f == name) else {
                return Err(ServerError::Settings(format!(
                    "unknown argument {arg:?} (see --help)"
                )));
            };
            let value = match inline {
                Some(v) => v,
                None => args
                    .next()
                    .ok_or_else(|| ServerError::Settings(format!("{flag} needs a value")))?,
            };
            given.push((flag, value));
        }
        let lookup = |flag: &str| -> Option<(String, String)> {
            if let Some((_, v)) = given.iter().rev().find(|(f, _)| *f == flag) {
                return Some((flag.to_owned(), v.clone()));
            }
            let var = VALUE_FLAGS.iter().find(|(f, _)| *f == flag)?.1;
            env(var)
                .filter(|v| !v.is_empty())
                .map(|v| (var.to_owned(), v))
        };
        let number = |flag: &str| -> Result<Option<usize>, ServerError> {
            match lookup(flag) {
                None => Ok(None),
                Some((source, v)) => v.trim().parse::<usize>().map(Some).map_err(|_| {
                    ServerError::Settings(format!("{source} must be a whole number, got {v:?}"))
                }),
            }
        };
        let positive = |flag: &str| -> Result<Option<usize>, ServerError> {
            match number(flag)? {
                Some(0) => Err(ServerError::Settings(format!("{flag} must be at least 1"))),
                other => Ok(other),
            }
        };

        let mut settings = Settings::default();
        let port = match number("--port")? {
            Some(p) => u16::try_from(p).map_err(|_| {
                ServerError::Settings(format!("port must be at most 65535, got {p}"))
            })?,
            None => settings.listen.port(),
        };
        let host = match lookup("--host") {
            Some((source, h)) => h.parse().map_err(|_| {
                ServerError::Settings(format!("{source} is not an IP address: {h:?}"))
            })?,
            None => settings.listen.ip(),
        };
        settings.listen = SocketAddr::new(host, port);
        if let Some((_, url)) = lookup("--assets-url") {
            settings.assets = Assets::Cdn(url.trim_end_matches('/').to_owned());
        }
        if let Some((_, dir)) = lookup("--assets-dir") {
            settings.assets = Assets::Dir(dir.into());
        }
        settings.data = lookup("--data").map(|(_, p)| p.into());
        if let Some(n) = positive("--max-depth")? {
            settings.demo.limits.max_depth = n;
        }
        if let Some(n) = positive("--max-complexity")? {
            settings.demo.limits.max_complexity = n;
        }
        if let Some(n) = positive("--max-tokens")? {
            settings.demo.limits.max_tokens = n;
        }
        if let Some(n) = positive("--max-body-bytes")? {
            settings.max_body_bytes = n;
        }
        if let Some(n) = number("--max-messages")? {
            settings.demo.store.max_messages = n;
        }
        if let Some(n) = positive("--request-timeout-secs")? {
            settings.request_timeout = Duration::from_secs(n as u64);
        }
        if let Some(n) = positive("--max-connections")? {
            settings.max_connections = n;
        }
        Ok(if print_schema {
            Self::PrintSchema(settings)
        } else {
            Self::Serve(settings)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<Command, ServerError> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Command::parse(args.iter().map(|s| s.to_string()), move |k| {
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    fn serve(args: &[&str], env: &[(&str, &str)]) -> Settings {
        match parse(args, env).unwrap() {
            Command::Serve(s) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_env_and_flags() {
        let s = serve(&[], &[]);
        assert_eq!(s.listen.to_string(), "127.0.0.1:4000");
        assert_eq!(s.assets, Assets::Cdn(DEFAULT_ASSETS_URL.into()));
        let s = serve(&[], &[("PORT", "4100"), ("GQL_MAX_DEPTH", "7")]);
        assert_eq!(s.listen.port(), 4100);
        assert_eq!(s.demo.limits.max_depth, 7);
        let s = serve(
            &["--port=4200", "--assets-dir", "/x", "--host", "0.0.0.0"],
            &[
                ("PORT", "4100"),
                ("GQL_ASSETS_URL", "https://example.test/npm/"),
            ],
        );
        assert_eq!(s.listen.to_string(), "0.0.0.0:4200");
        assert_eq!(s.assets, Assets::Dir("/x".into()));
        let s = serve(&[], &[("GQL_ASSETS_URL", "https://example.test/npm/")]);
        assert_eq!(s.assets, Assets::Cdn("https://example.test/npm".into()));
        assert!(matches!(
            parse(&["--print-schema"], &[]).unwrap(),
            Command::PrintSchema(_)
        ));
        assert!(matches!(parse(&["--help"], &[]).unwrap(), Command::Help));
    }

    #[test]
    fn bad_values_are_named() {
        for (args, env, expected) in [
            (
                &["--port", "x"][..],
                &[][..],
                "--port must be a whole number",
            ),
            (&[], &[("PORT", "70000")][..], "at most 65535"),
            (&["--bogus"], &[], "unknown argument"),
            (&["--max-depth"], &[], "--max-depth needs a value"),
            (&["--max-depth", "0"], &[], "at least 1"),
            (&[], &[("HOST", "nope")], "HOST is not an IP address"),
        ] {
            let err = parse(args, env).unwrap_err().to_string();
            assert!(err.contains(expected), "{args:?}: {err}");
        }
    }
}
