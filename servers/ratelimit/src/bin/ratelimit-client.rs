//! `ratelimit-client`: sends one `ShouldRateLimit` call and prints the answer.
//!
//! Flags follow upstream's client (Go style, `-flag value` or `-flag=value`):
//! `-dial_string host:port` (default `localhost:8081`), `-domain d`, and one
//! `-descriptors k=v,k2=v2` per descriptor. Our additions: `-hits_addend n`, `-uds path`,
//! `-use_tls`, `-tls_ca_cert`, `-tls_client_cert`, `-tls_client_key`, `-tls_server_name`,
//! `-timeout` (Go duration, default 10s).
//!
//! Exit status: 0 OK, 3 OVER_LIMIT, 1 the call failed, 2 bad flags.

use std::process::ExitCode;
use std::time::Duration;

use ratelimit_core::{Code, Descriptor, Entry, Request};
use ratelimit_server::convert;
use ratelimit_server::pb::rls::rate_limit_service_client::RateLimitServiceClient;
use ratelimit_server::settings::parse_go_duration;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, Uri};

const USAGE: &str =
    "usage: ratelimit-client -domain DOMAIN -descriptors k=v[,k2=v2] [-descriptors ...]
  -dial_string host:port   server address (default localhost:8081)
  -uds PATH                connect to a unix socket instead
  -hits_addend N           hits for the whole request (default 1)
  -use_tls                 use TLS
  -tls_ca_cert PATH        CA that signed the server certificate
  -tls_client_cert PATH    client certificate (mutual TLS)
  -tls_client_key PATH     client key (mutual TLS)
  -tls_server_name NAME    name to verify in the server certificate
  -timeout DURATION        give up after this long (default 10s)
exit status: 0 OK, 3 OVER_LIMIT, 1 error, 2 bad flags";

#[derive(Default)]
struct Args {
    dial: String,
    uds: Option<String>,
    domain: String,
    descriptors: Vec<Descriptor>,
    hits: u32,
    tls: bool,
    ca: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    server_name: Option<String>,
    timeout: Duration,
}

fn parse_args(argv: &[String]) -> Result<Args, String> {
    let mut a = Args {
        dial: "localhost:8081".into(),
        timeout: Duration::from_secs(10),
        ..Args::default()
    };
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        let flag = arg.trim_start_matches('-');
        if flag.len() == arg.len() {
            return Err(format!("unexpected argument {arg:?}"));
        }
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (flag, None),
        };
        if name == "use_tls" {
            a.tls = inline.as_deref().map_or(Ok(true), |v| match v {
                "true" | "1" => Ok(true),
                "false" | "0" => Ok(false),
                _ => Err(format!("-use_tls takes true or false, not {v:?}")),
            })?;
            continue;
        }
        if name == "h" || name == "help" {
            return Err(String::new());
        }
        let value = match inline {
            Some(v) => v,
            None => it
                .next()
                .cloned()
                .ok_or_else(|| format!("flag -{name} needs a value"))?,
        };
        match name {
            "dial_string" => a.dial = value,
            "uds" => a.uds = Some(value),
            "domain" => a.domain = value,
            "descriptors" => a.descriptors.push(parse_descriptor(&value)?),
            "hits_addend" => {
                a.hits = value
                    .parse()
                    .map_err(|_| format!("-hits_addend {value:?} is not a number"))?
            }
            "tls_ca_cert" => a.ca = Some(value),
            "tls_client_cert" => a.cert = Some(value),
            "tls_client_key" => a.key = Some(value),
            "tls_server_name" => a.server_name = Some(value),
            "timeout" => {
                a.timeout = parse_go_duration(&value)
                    .ok_or_else(|| format!("-timeout {value:?} is not a duration"))?
            }
            _ => return Err(format!("unknown flag -{name}")),
        }
    }
    if a.domain.is_empty() {
        return Err("-domain is required".into());
    }
    if a.descriptors.is_empty() {
        return Err("at least one -descriptors is required".into());
    }
    Ok(a)
}

fn parse_descriptor(s: &str) -> Result<Descriptor, String> {
    let entries = s
        .split(',')
        .map(|pair| {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("descriptor entry {pair:?} is not key=value"))?;
            if k.is_empty() {
                return Err(format!("descriptor entry {pair:?} has an empty key"));
            }
            Ok(Entry::new(k, v))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Descriptor {
        entries,
        ..Descriptor::default()
    })
}

async fn call(a: &Args) -> Result<ratelimit_core::Response, String> {
    let uri = if a.uds.is_some() {
        "http://localhost".to_owned()
    } else if a.tls {
        format!("https://{}", a.dial)
    } else {
        format!("http://{}", a.dial)
    };
    let mut ep = Endpoint::from_shared(uri)
        .map_err(|e| format!("bad -dial_string {:?}: {e}", a.dial))?
        .connect_timeout(a.timeout)
        .timeout(a.timeout);
    if a.tls {
        let mut tls = ClientTlsConfig::new();
        if let Some(ca) = &a.ca {
            let pem = std::fs::read(ca).map_err(|e| format!("cannot read {ca}: {e}"))?;
            tls = tls.ca_certificate(Certificate::from_pem(pem));
        }
        match (&a.cert, &a.key) {
            (Some(c), Some(k)) => {
                let cert = std::fs::read(c).map_err(|e| format!("cannot read {c}: {e}"))?;
                let key = std::fs::read(k).map_err(|e| format!("cannot read {k}: {e}"))?;
                tls = tls.identity(Identity::from_pem(cert, key));
            }
            (None, None) => {}
            _ => return Err("-tls_client_cert and -tls_client_key go together".into()),
        }
        if let Some(n) = &a.server_name {
            tls = tls.domain_name(n.clone());
        }
        ep = ep.tls_config(tls).map_err(|e| format!("TLS setup: {e}"))?;
    }
    let channel = match &a.uds {
        Some(path) => {
            let path = path.clone();
            ep.connect_with_connector(tower_service_fn(path))
                .await
                .map_err(|e| format!("cannot connect to unix socket: {e}"))?
        }
        None => ep
            .connect()
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", a.dial))?,
    };
    let mut client = RateLimitServiceClient::new(channel);
    let mut req = Request::new(a.domain.clone(), a.descriptors.clone());
    req.hits_addend = a.hits;
    let resp = client
        .should_rate_limit(convert::request_to_pb(&req))
        .await
        .map_err(|s| format!("ShouldRateLimit failed: {:?}: {}", s.code(), s.message()))?;
    Ok(convert::response_from_pb(resp.get_ref()))
}

fn tower_service_fn(
    path: String,
) -> impl tower_service::Service<
    Uri,
    Response = hyper_util::rt::TokioIo<tokio::net::UnixStream>,
    Error = std::io::Error,
    Future = impl Future<Output = std::io::Result<hyper_util::rt::TokioIo<tokio::net::UnixStream>>>
             + Send,
> + Clone
+ Send {
    tower::service_fn(move |_: Uri| {
        let path = path.clone();
        async move {
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                tokio::net::UnixStream::connect(path).await?,
            ))
        }
    })
}

fn describe(d: &Descriptor) -> String {
    d.entries
        .iter()
        .map(|e| format!("{}={}", e.key, e.value))
        .collect::<Vec<_>>()
        .join(",")
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse_args(&argv) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("ratelimit-client: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ratelimit-client: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(call(&args)) {
        Err(e) => {
            eprintln!("ratelimit-client: {e}");
            ExitCode::FAILURE
        }
        Ok(resp) => {
            println!("domain: {}", args.domain);
            println!("overall: {}", resp.overall_code.name());
            for (d, s) in args.descriptors.iter().zip(&resp.statuses) {
                let mut line = format!("  {}: {}", describe(d), s.code.name());
                if let Some(l) = &s.current_limit {
                    line.push_str(&format!(" limit={}/{}", l.requests_per_unit, l.unit.name()));
                    if !l.name.is_empty() {
                        line.push_str(&format!(" name={}", l.name));
                    }
                }
                line.push_str(&format!(" remaining={}", s.limit_remaining));
                if let Some(r) = s.duration_until_reset {
                    line.push_str(&format!(" reset={r}s"));
                }
                println!("{line}");
            }
            for h in &resp.response_headers_to_add {
                println!("  header {}: {}", h.key, h.value);
            }
            if resp.overall_code == Code::OverLimit {
                ExitCode::from(3)
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}
