//! Settings from upstream's environment variable names, parsed strictly: a bad value is a
//! startup error naming the variable and the value, never a silent default.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use ratelimit_backends::memcached::{self, MemcachedSettings, MemcachedTls};
use ratelimit_backends::redis::{
    OnEmpty, RedisKind, RedisSettings, RedisTls, SocketType, StartupBackoff,
};
use ratelimit_core::{HeaderNames, LimiterSettings};

/// A setting that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    /// The variable.
    pub name: String,
    /// Its value.
    pub value: String,
    /// What was expected.
    pub expected: String,
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid value for {}: {:?} (expected {})",
            self.name, self.value, self.expected
        )
    }
}

impl std::error::Error for SettingsError {}

/// Which counter store to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendType {
    /// In-process memory (this project's addition).
    Memory,
    /// Redis (upstream's default).
    Redis,
    /// memcached.
    Memcache,
}

/// Where rules come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// YAML files under the runtime directory.
    File,
    /// An xDS management server (state of the world).
    GrpcXdsSotw,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `time=... level=... msg=...`
    Text,
    /// `{"@timestamp":...,"@message":...,"level":...}`
    Json,
}

/// Everything the server reads from the environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `HOST`
    pub host: String,
    /// `PORT`
    pub port: u16,
    /// `GRPC_HOST`
    pub grpc_host: String,
    /// `GRPC_PORT`
    pub grpc_port: u16,
    /// `GRPC_UDS`
    pub grpc_uds: String,
    /// `GRPC_SERVER_USE_TLS`
    pub grpc_server_use_tls: bool,
    /// `GRPC_SERVER_TLS_CERT`: certificate chain (PEM), reloaded when it changes.
    pub grpc_server_tls_cert: String,
    /// `GRPC_SERVER_TLS_KEY`: private key (PEM), reloaded when it changes.
    pub grpc_server_tls_key: String,
    /// `GRPC_CLIENT_TLS_CACERT`: CA for client certificates; set means mutual TLS.
    pub grpc_client_tls_cacert: String,
    /// `GRPC_CLIENT_TLS_SAN`: DNS name a client certificate must carry.
    pub grpc_client_tls_san: String,
    /// `GRPC_MAX_CONNECTION_AGE` (24h): connections are asked to go away after this, +/-10%.
    pub grpc_max_connection_age: Duration,
    /// `GRPC_MAX_CONNECTION_AGE_GRACE` (1h): then closed this much later.
    pub grpc_max_connection_age_grace: Duration,
    /// `DEBUG_HOST`
    pub debug_host: String,
    /// `DEBUG_PORT`
    pub debug_port: u16,
    /// `DEBUG_PPROF_ENABLED` (true): serve `/debug/pprof/*` on the debug port.
    pub debug_pprof_enabled: bool,
    /// `BACKEND_TYPE`
    pub backend_type: BackendType,
    /// `CONFIG_TYPE`
    pub config_type: ConfigType,
    /// `RUNTIME_ROOT`
    pub runtime_root: PathBuf,
    /// `RUNTIME_SUBDIRECTORY`
    pub runtime_subdirectory: String,
    /// `RUNTIME_APPDIRECTORY`
    pub runtime_appdirectory: String,
    /// `RUNTIME_IGNOREDOTFILES`
    pub runtime_ignore_dotfiles: bool,
    /// `RUNTIME_WATCH_ROOT`
    pub runtime_watch_root: bool,
    /// `MERGE_DOMAIN_CONFIG`
    pub merge_domain_config: bool,
    /// `FORCE_START_WITHOUT_INITIAL_CONFIG`
    pub force_start_without_initial_config: bool,
    /// `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`
    pub healthy_with_at_least_one_config_loaded: bool,
    /// `LOG_LEVEL` (lower-cased)
    pub log_level: String,
    /// `LOG_FORMAT`
    pub log_format: LogFormat,
    /// `HTTP_MAX_BODY_BYTES`: our bound on `/json` bodies (upstream has none).
    pub http_max_body_bytes: usize,
    /// `HTTP_READ_TIMEOUT`: bound on reading a request (headers and body).
    pub http_read_timeout: Duration,
    /// Each port's bound on connections and their timeouts (`GRPC_MAX_CONNECTIONS`,
    /// `CONNECTION_FIRST_BYTE_TIMEOUT`, `GRPC_MAX_CONNECTION_IDLE`, ...).
    pub ports: crate::conn::Ports,
    /// `GRPC_KEEPALIVE_TIME` (0: none): how often the server PINGs a connection.
    pub grpc_keepalive_time: Option<Duration>,
    /// `GRPC_KEEPALIVE_TIMEOUT` (20s): how long a PING may go unanswered.
    pub grpc_keepalive_timeout: Duration,
    /// `HTTP_SERVER_USE_TLS`: the main HTTP port serves TLS with the gRPC port's files.
    pub http_server_use_tls: bool,
    /// `DEBUG_SERVER_USE_TLS`: the debug port likewise.
    pub debug_server_use_tls: bool,
    /// `MAX_REQUEST_DESCRIPTORS`, `MAX_DESCRIPTOR_ENTRIES`, `MAX_REQUEST_STRING_BYTES`.
    pub request_limits: crate::limits::RequestLimits,
    /// `STATS_DYNAMIC_CAP`: bound on stats named from request values.
    pub stats_dynamic_cap: u64,
    /// `STATS_DYNAMIC_BYTES`: byte budget of those stats (names plus bookkeeping).
    pub stats_dynamic_bytes: u64,
    /// The limiter's switches (`CACHE_KEY_PREFIX`, `NEAR_LIMIT_RATIO`, ...).
    pub limiter: LimiterSettings,
    /// `REDIS_*`: the main Redis instance.
    pub redis: RedisSettings,
    /// `REDIS_PERSECOND_*`, when `REDIS_PERSECOND=true`.
    pub redis_per_second: Option<RedisSettings>,
    /// `REDIS_STARTUP_*`
    pub redis_startup: StartupBackoff,
    /// `MEMCACHE_*`
    pub memcache: MemcachedSettings,
    /// Problems worth a warning at startup (deprecated settings and the like).
    pub warnings: Vec<String>,
    /// Where statistics go (`USE_STATSD`, `USE_DOG_STATSD`, `USE_PROMETHEUS`, ...).
    pub stats_sink: StatsSink,
    /// `STATS_FLUSH_INTERVAL`
    pub stats_flush_interval: Duration,
    /// `EXTRA_TAGS`
    pub extra_tags: Vec<(String, String)>,
    /// `TRACING_*`
    pub tracing: crate::tracing::TracingSettings,
    // Rule delivery: the file watcher's fallback and the xDS client.
    /// `RUNTIME_POLL_INTERVAL` (10s, our addition): how often the rule directory is also
    /// compared against its last loaded state, in case a change event was missed; 0 = never.
    pub runtime_poll_interval: Duration,
    /// `CONFIG_GRPC_XDS_NODE_ID`
    pub xds_node_id: String,
    /// `CONFIG_GRPC_XDS_NODE_METADATA`: `k1=v1,k2=v2`.
    pub xds_node_metadata: Vec<(String, String)>,
    /// `CONFIG_GRPC_XDS_SERVER_URL`: `host:port`, or a URL with `http://` / `https://`.
    pub xds_server_url: String,
    /// `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL`: pause between failed connects.
    pub xds_connect_retry_interval: Duration,
    /// `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS`: `k1:v1,k2:v2`, sent as gRPC metadata.
    pub xds_additional_headers: Vec<(String, String)>,
    /// `CONFIG_GRPC_XDS_SERVER_USE_TLS`
    pub xds_use_tls: bool,
    /// `CONFIG_GRPC_XDS_CLIENT_TLS_CERT`: client certificate (PEM) for mutual TLS.
    pub xds_client_tls_cert: String,
    /// `CONFIG_GRPC_XDS_CLIENT_TLS_KEY`: its private key (PEM).
    pub xds_client_tls_key: String,
    /// `CONFIG_GRPC_XDS_SERVER_TLS_CACERT`: CA bundle for the server's certificate.
    pub xds_server_tls_cacert: String,
    /// `CONFIG_GRPC_XDS_SERVER_TLS_SAN`: name to verify instead of the URL's host.
    pub xds_server_tls_san: String,
    /// `XDS_CLIENT_BACKOFF_INITIAL_INTERVAL` (10s)
    pub xds_backoff_initial: Duration,
    /// `XDS_CLIENT_BACKOFF_MAX_INTERVAL` (60s)
    pub xds_backoff_max: Duration,
    /// `XDS_CLIENT_BACKOFF_RANDOM_FACTOR` (0.5): the growth factor per failed attempt.
    pub xds_backoff_factor: f64,
    /// `XDS_CLIENT_BACKOFF_JITTER` (true)
    pub xds_backoff_jitter: bool,
    /// `XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES` (0 = gRPC's 4 MiB).
    pub xds_max_msg_size: usize,
}

/// The one statistics sink in use.
#[derive(Debug, Clone)]
pub enum StatsSink {
    /// `DISABLE_STATS=true`.
    Null,
    /// `USE_STATSD=false` and no other sink: statistics go to the log.
    Log,
    /// statsd over TCP at `STATSD_HOST:STATSD_PORT`.
    Statsd(String),
    /// DogStatsD over UDP at `STATSD_HOST:STATSD_PORT`, with mogrifiers.
    DogStatsd(String, Vec<crate::metrics::statsd::Mogrifier>),
    /// A Prometheus endpoint.
    Prometheus {
        /// `PROMETHEUS_ADDR` (Go's `:9090` form accepted).
        addr: String,
        /// `PROMETHEUS_PATH`
        path: String,
        /// `PROMETHEUS_MAPPER_YAML` (read and checked at start).
        mappings: Vec<crate::metrics::prometheus::Mapping>,
        /// `PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS`
        millis: bool,
    },
}

/// Reads variables through `lookup` so that tests need not touch the process environment.
pub struct Env<F: Fn(&str) -> Option<String>>(pub F);

impl<F: Fn(&str) -> Option<String>> Env<F> {
    fn raw(&self, name: &str) -> Option<String> {
        (self.0)(name)
    }

    fn string(&self, name: &str, default: &str) -> String {
        self.raw(name).unwrap_or_else(|| default.to_owned())
    }

    fn err(&self, name: &str, value: &str, expected: &str) -> SettingsError {
        SettingsError {
            name: name.into(),
            value: value.into(),
            expected: expected.into(),
        }
    }

    /// Go's `strconv.ParseBool` accepts exactly these spellings.
    fn boolean(&self, name: &str, default: bool) -> Result<bool, SettingsError> {
        match self.raw(name) {
            None => Ok(default),
            Some(v) => match v.as_str() {
                "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
                "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
                "" => Ok(default),
                _ => Err(self.err(name, &v, "a boolean such as true or false")),
            },
        }
    }

    fn number<T: std::str::FromStr>(
        &self,
        name: &str,
        default: T,
        expected: &str,
    ) -> Result<T, SettingsError> {
        match self.raw(name) {
            None => Ok(default),
            Some(v) if v.is_empty() => Ok(default),
            Some(v) => v.trim().parse().map_err(|_| self.err(name, &v, expected)),
        }
    }

    /// A map in envconfig's syntax, `k1<sep>v1,k2<sep>v2`; items are trimmed, empty ones
    /// skipped, and an item without the separator or with an empty key is an error.
    fn pairs(&self, name: &str, sep: char) -> Result<Vec<(String, String)>, SettingsError> {
        let Some(raw) = self.raw(name) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            match item.split_once(sep) {
                Some((k, v)) if !k.trim().is_empty() => {
                    out.push((k.trim().to_owned(), v.trim().to_owned()))
                }
                _ => {
                    return Err(self.err(
                        name,
                        &raw,
                        &format!("a list such as k1{sep}v1,k2{sep}v2"),
                    ));
                }
            }
        }
        Ok(out)
    }

    fn duration(&self, name: &str, default: Duration) -> Result<Duration, SettingsError> {
        match self.raw(name) {
            None => Ok(default),
            Some(v) if v.is_empty() => Ok(default),
            Some(v) => parse_go_duration(&v)
                .ok_or_else(|| self.err(name, &v, "a duration such as 10s, 150us or 1h30m")),
        }
    }
}

fn redis_settings<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
    prefix: &str,
    warnings: &mut Vec<String>,
) -> Result<RedisSettings, SettingsError> {
    let name = |n: &str| format!("{prefix}{n}");
    let per_second = prefix == "REDIS_PERSECOND_";
    let socket_raw = env.string(&name("SOCKET_TYPE"), "unix");
    let socket_type = match socket_raw.to_ascii_lowercase().as_str() {
        "unix" => SocketType::Unix,
        "tcp" => SocketType::Tcp,
        _ => return Err(env.err(&name("SOCKET_TYPE"), &socket_raw, "tcp or unix")),
    };
    let kind_raw = env.string(&name("TYPE"), "SINGLE");
    let kind = match kind_raw.to_ascii_lowercase().as_str() {
        "single" => RedisKind::Single,
        "sentinel" => RedisKind::Sentinel,
        "cluster" => RedisKind::Cluster,
        _ => {
            return Err(env.err(
                &name("TYPE"),
                &kind_raw,
                "single, sentinel or cluster (Unrecognized redis type)",
            ));
        }
    };
    let on_empty_raw = env.string(&name("POOL_ON_EMPTY_BEHAVIOR"), "WAIT");
    let on_empty = match on_empty_raw.to_ascii_uppercase().as_str() {
        "CREATE" => OnEmpty::Create,
        "ERROR" => OnEmpty::Error,
        "WAIT" => OnEmpty::Wait,
        _ => {
            return Err(env.err(
                &name("POOL_ON_EMPTY_BEHAVIOR"),
                &on_empty_raw,
                "CREATE, ERROR or WAIT",
            ));
        }
    };
    // Upstream shares these two between both instances.
    let tls_files = |n: &str| {
        let v = env.string(n, "");
        (!v.is_empty()).then(|| PathBuf::from(v))
    };
    let tls = if env.boolean(&name("TLS"), false)? {
        let cert = tls_files("REDIS_TLS_CLIENT_CERT");
        let key = tls_files("REDIS_TLS_CLIENT_KEY");
        Some(RedisTls {
            ca: tls_files("REDIS_TLS_CACERT"),
            client_cert: cert.zip(key),
            skip_hostname_verification: env
                .boolean("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false)?,
        })
    } else {
        None
    };
    let default_url = if per_second {
        "/var/run/nutcracker/ratelimitpersecond.sock"
    } else {
        "/var/run/nutcracker/ratelimit.sock"
    };
    if env
        .raw(&name("PIPELINE_LIMIT"))
        .is_some_and(|v| !v.is_empty() && v != "0")
    {
        warnings.push(format!(
            "{} is deprecated and has no effect",
            name("PIPELINE_LIMIT")
        ));
    }
    // Accepted for compatibility; see docs/ratelimit-server.md for how batching works here.
    env.duration(&name("PIPELINE_WINDOW"), Duration::ZERO)?;
    env.number::<u32>(&name("CLUSTER_PIPELINE_PARALLELISM"), 1, "a whole number")?;
    Ok(RedisSettings {
        socket_type,
        url: env.string(&name("URL"), default_url),
        kind,
        auth: env.string(&name("AUTH"), ""),
        sentinel_auth: env.string(&name("SENTINEL_AUTH"), ""),
        tls,
        pool_size: env.number(&name("POOL_SIZE"), 10, "a whole number")?,
        on_empty,
        on_empty_wait: env
            .duration(&name("POOL_ON_EMPTY_WAIT_DURATION"), Duration::from_secs(1))?,
        timeout: env.duration(&name("TIMEOUT"), Duration::from_secs(10))?,
        health_check_active_connection: env
            .boolean("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false)?,
        fail_fast_when_disconnected: env.boolean("REDIS_FAIL_FAST_WHEN_DISCONNECTED", false)?,
    })
}

fn stats_sink<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<StatsSink, SettingsError> {
    use crate::metrics::{prometheus, statsd};
    if env.boolean("DISABLE_STATS", false)? {
        return Ok(StatsSink::Null);
    }
    let dog = env.boolean("USE_DOG_STATSD", false)?;
    let prom = env.boolean("USE_PROMETHEUS", false)?;
    // USE_STATSD defaults to true; only an explicit true conflicts with another sink.
    let statsd_explicit = env.raw("USE_STATSD").is_some() && env.boolean("USE_STATSD", true)?;
    let statsd_on = env.boolean("USE_STATSD", true)?;
    if [dog, prom, statsd_explicit].iter().filter(|x| **x).count() > 1 {
        return Err(env.err(
            "USE_STATSD",
            &env.string("USE_STATSD", ""),
            "Error: unable to use more than one stats sink at the same time. Set one of USE_DOG_STATSD, USE_STATSD, USE_PROMETHEUS.",
        ));
    }
    let target = format!(
        "{}:{}",
        env.string("STATSD_HOST", "localhost"),
        env.number::<u16>("STATSD_PORT", 8125, "a port number")?
    );
    if dog {
        let names = env.string("USE_DOG_STATSD_MOGRIFIERS", "");
        let mut mogrifiers = Vec::new();
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let var = |part: &str| format!("DOG_STATSD_MOGRIFIER_{name}_{part}");
            let pattern_raw = env.string(&var("PATTERN"), "");
            let pattern = regex::Regex::new(&pattern_raw).map_err(|e| {
                env.err(
                    &var("PATTERN"),
                    &pattern_raw,
                    &format!("a regular expression ({e})"),
                )
            })?;
            let new_name = env.string(&var("NAME"), "");
            if pattern_raw.is_empty() || new_name.is_empty() {
                return Err(env.err(
                    &var("NAME"),
                    &new_name,
                    "a pattern and a name for every mogrifier",
                ));
            }
            let tags_raw = env.string(&var("TAGS"), "");
            let tags = crate::metrics::parse_tags(&tags_raw)
                .map_err(|e| env.err(&var("TAGS"), &tags_raw, &format!("k1:$1,k2:$2 ({e})")))?;
            mogrifiers.push(statsd::Mogrifier {
                pattern,
                name: new_name,
                tags,
            });
        }
        return Ok(StatsSink::DogStatsd(target, mogrifiers));
    }
    if prom {
        let mut addr = env.string("PROMETHEUS_ADDR", ":9090");
        if addr.starts_with(':') {
            addr = format!("0.0.0.0{addr}");
        }
        let mapper = env.string("PROMETHEUS_MAPPER_YAML", "");
        let mappings = if mapper.is_empty() {
            prometheus::default_mappings()
        } else {
            let text = std::fs::read_to_string(&mapper).map_err(|e| {
                env.err(
                    "PROMETHEUS_MAPPER_YAML",
                    &mapper,
                    &format!("a readable mapper file ({e})"),
                )
            })?;
            prometheus::parse_mapper(&text).map_err(|e| {
                env.err(
                    "PROMETHEUS_MAPPER_YAML",
                    &mapper,
                    &format!("a valid mapper file ({e})"),
                )
            })?
        };
        return Ok(StatsSink::Prometheus {
            addr,
            path: env.string("PROMETHEUS_PATH", "/metrics"),
            mappings,
            millis: env.boolean("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", false)?,
        });
    }
    Ok(if statsd_on {
        StatsSink::Statsd(target)
    } else {
        StatsSink::Log
    })
}

/// Each port's connection handling. The HTTP ports close a connection that waits longer
/// than `HTTP_READ_TIMEOUT` for its next request, as hyper already does for HTTP/1.
fn port_settings<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
    http_read_timeout: Duration,
) -> Result<crate::conn::Ports, SettingsError> {
    use crate::conn::PortLimits;
    let first_byte_timeout =
        env.duration("CONNECTION_FIRST_BYTE_TIMEOUT", Duration::from_secs(10))?;
    let write_timeout = env.duration("CONNECTION_WRITE_TIMEOUT", Duration::from_secs(30))?;
    let port = |name: &str, default: usize, idle_timeout: Option<Duration>| {
        let max_connections = env.number(name, default, "a whole number above 0")?;
        if max_connections == 0 {
            return Err(env.err(name, "0", "a whole number above 0"));
        }
        Ok(PortLimits {
            max_connections,
            first_byte_timeout,
            write_timeout,
            idle_timeout,
        })
    };
    let grpc_idle = env.duration("GRPC_MAX_CONNECTION_IDLE", Duration::from_secs(3600))?;
    Ok(crate::conn::Ports {
        grpc: port(
            "GRPC_MAX_CONNECTIONS",
            10_000,
            Some(grpc_idle).filter(|d| !d.is_zero()),
        )?,
        http: port("HTTP_MAX_CONNECTIONS", 1_000, Some(http_read_timeout))?,
        debug: port("DEBUG_MAX_CONNECTIONS", 100, Some(http_read_timeout))?,
    })
}

fn tracing_settings<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
) -> Result<crate::tracing::TracingSettings, SettingsError> {
    let proto = env.string("TRACING_EXPORTER_PROTOCOL", "http");
    let grpc = match proto.as_str() {
        "http" | "" => false,
        "grpc" => true,
        _ => return Err(env.err("TRACING_EXPORTER_PROTOCOL", &proto, "http or grpc")),
    };
    let rate: f64 = env.number("TRACING_SAMPLING_RATE", 1.0, "a number between 0 and 1")?;
    if !(0.0..=1.0).contains(&rate) {
        return Err(env.err(
            "TRACING_SAMPLING_RATE",
            &rate.to_string(),
            "a number between 0 and 1",
        ));
    }
    let instance = env.string("TRACING_SERVICE_INSTANCE_ID", "");
    Ok(crate::tracing::TracingSettings {
        enabled: env.boolean("TRACING_ENABLED", false)?,
        grpc,
        service_name: env.string("TRACING_SERVICE_NAME", "RateLimit"),
        service_namespace: env.string("TRACING_SERVICE_NAMESPACE", ""),
        instance_id: if instance.is_empty() {
            crate::tracing::random_uuid()
        } else {
            instance
        },
        sampling_rate: rate,
    })
}

fn memcache_settings<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
    backend: BackendType,
) -> Result<MemcachedSettings, SettingsError> {
    let hosts = env.string("MEMCACHE_HOST_PORT", "");
    let srv = env.string("MEMCACHE_SRV", "");
    let nameserver_raw = env.string("MEMCACHE_SRV_NAMESERVER", "");
    let srv_nameserver = if nameserver_raw.is_empty() {
        None
    } else {
        let v = nameserver_raw.trim();
        let addr = v
            .parse::<SocketAddr>()
            .ok()
            .or_else(|| v.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 53)));
        Some(addr.ok_or_else(|| {
            env.err(
                "MEMCACHE_SRV_NAMESERVER",
                &nameserver_raw,
                "an IP address with an optional port, such as 10.0.0.2 or 127.0.0.1:5353",
            )
        })?)
    };
    let tls = if env.boolean("MEMCACHE_TLS", false)? {
        let file = |n: &str| {
            let v = env.string(n, "");
            (!v.is_empty()).then(|| PathBuf::from(v))
        };
        let client_cert = match (
            file("MEMCACHE_TLS_CLIENT_CERT"),
            file("MEMCACHE_TLS_CLIENT_KEY"),
        ) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            // Upstream ignores a lone half; that would silently drop mutual TLS.
            (Some(_), None) | (None, Some(_)) => {
                let (set, unset) = if env.string("MEMCACHE_TLS_CLIENT_CERT", "").is_empty() {
                    ("MEMCACHE_TLS_CLIENT_KEY", "MEMCACHE_TLS_CLIENT_CERT")
                } else {
                    ("MEMCACHE_TLS_CLIENT_CERT", "MEMCACHE_TLS_CLIENT_KEY")
                };
                return Err(env.err(
                    set,
                    &env.string(set, ""),
                    &format!("{unset} to be set too (a client certificate needs its key)"),
                ));
            }
        };
        Some(MemcachedTls {
            ca: file("MEMCACHE_TLS_CACERT"),
            client_cert,
            skip_hostname_verification: env
                .boolean("MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", false)?,
        })
    } else {
        None
    };
    let srv_refresh = env.duration("MEMCACHE_SRV_REFRESH", Duration::ZERO)?;
    if backend == BackendType::Memcache {
        if !hosts.is_empty() && !srv.is_empty() {
            return Err(env.err("MEMCACHE_SRV", &srv, "not both MEMCACHE_HOST_PORT and MEMCACHE_SRV (Both MEMCACHE_HOST_PORT and MEMCACHE_SRV are set)"));
        }
        if !srv.is_empty() && !memcached::valid_srv_name(srv.trim()) {
            return Err(env.err(
                "MEMCACHE_SRV",
                &srv,
                "an SRV record name such as _memcache._tcp.example.com",
            ));
        }
        if hosts.is_empty() && srv.is_empty() {
            return Err(env.err(
                "MEMCACHE_HOST_PORT",
                "",
                "a comma-separated list of host:port, or MEMCACHE_SRV",
            ));
        }
    }
    Ok(MemcachedSettings {
        nodes: hosts
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect(),
        srv: (!srv.is_empty()).then(|| srv.trim().to_owned()),
        srv_refresh,
        srv_nameserver,
        tls,
        max_idle_conns: env.number("MEMCACHE_MAX_IDLE_CONNS", 2, "a whole number")?,
        timeout: env.duration("MEMCACHE_TIMEOUT", Duration::from_secs(1))?,
    })
}

/// Parses Go's `time.ParseDuration` syntax (`300ms`, `1.5h`, `2h45m`, `0`); negative
/// durations are rejected.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += n * scale;
    }
    if !total.is_finite() || total > 1e12 {
        return None;
    }
    Some(Duration::from_secs_f64(total))
}

impl Settings {
    /// Reads the process environment.
    pub fn from_env() -> Result<Settings, SettingsError> {
        Settings::from_lookup(|n| std::env::var(n).ok())
    }

    /// Reads settings through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Settings, SettingsError> {
        let env = Env(lookup);
        let backend_raw = env.string("BACKEND_TYPE", "redis");
        let backend_type = match backend_raw.as_str() {
            "memory" => BackendType::Memory,
            "redis" | "" => BackendType::Redis,
            "memcache" => BackendType::Memcache,
            _ => {
                return Err(env.err(
                    "BACKEND_TYPE",
                    &backend_raw,
                    "one of memory, redis, memcache",
                ));
            }
        };
        let config_raw = env.string("CONFIG_TYPE", "FILE");
        let config_type = match config_raw.as_str() {
            "FILE" => ConfigType::File,
            "GRPC_XDS_SOTW" => ConfigType::GrpcXdsSotw,
            _ => return Err(env.err("CONFIG_TYPE", &config_raw, "FILE or GRPC_XDS_SOTW")),
        };
        let log_format_raw = env.string("LOG_FORMAT", "text");
        let log_format = match log_format_raw.to_ascii_lowercase().as_str() {
            "text" | "" => LogFormat::Text,
            "json" => LogFormat::Json,
            _ => return Err(env.err("LOG_FORMAT", &log_format_raw, "text or json")),
        };
        let log_level = env.string("LOG_LEVEL", "warn").to_ascii_lowercase();
        if ![
            "trace", "debug", "info", "warn", "warning", "error", "fatal", "panic",
        ]
        .contains(&log_level.as_str())
        {
            return Err(env.err("LOG_LEVEL", &log_level, "one of debug, info, warn, error"));
        }
        let near: f32 = env.number("NEAR_LIMIT_RATIO", 0.8, "a number between 0 and 1")?;
        if !(0.0..=1.0).contains(&near) {
            return Err(env.err(
                "NEAR_LIMIT_RATIO",
                &near.to_string(),
                "a number between 0 and 1",
            ));
        }
        let headers = env.boolean("LIMIT_RESPONSE_HEADERS_ENABLED", false)?;
        let limiter = LimiterSettings {
            cache_key_prefix: env.string("CACHE_KEY_PREFIX", ""),
            near_limit_ratio: near,
            expiration_jitter_max_seconds: env.number(
                "EXPIRATION_JITTER_MAX_SECONDS",
                300,
                "a whole number of seconds",
            )?,
            shadow_mode: env.boolean("SHADOW_MODE", false)?,
            quota_mode: env.boolean("QUOTA_MODE", false)?,
            response_headers: headers.then(|| HeaderNames {
                limit: env.string("LIMIT_LIMIT_HEADER", "RateLimit-Limit"),
                remaining: env.string("LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
                reset: env.string("LIMIT_RESET_HEADER", "RateLimit-Reset"),
            }),
            dynamic_metadata: env.boolean("RESPONSE_DYNAMIC_METADATA", false)?,
            local_cache_bytes: env.number("LOCAL_CACHE_SIZE_IN_BYTES", 0, "a number of bytes")?,
            stop_increment_when_over_limit: env
                .boolean("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", false)?,
            refund_hits_when_over_limit: env.boolean("REFUND_HITS_WHEN_OVERLIMIT", false)?,
        };
        let mut warnings = Vec::new();
        let redis = redis_settings(&env, "REDIS_", &mut warnings)?;
        let redis_per_second = if env.boolean("REDIS_PERSECOND", false)? {
            Some(redis_settings(&env, "REDIS_PERSECOND_", &mut warnings)?)
        } else {
            None
        };
        let redis_startup = StartupBackoff {
            initial: env.duration("REDIS_STARTUP_INITIAL_INTERVAL", Duration::from_secs(1))?,
            max: env.duration("REDIS_STARTUP_MAX_INTERVAL", Duration::from_secs(30))?,
            max_elapsed: env.duration("REDIS_STARTUP_MAX_ELAPSED_TIME", Duration::ZERO)?,
        };
        let memcache = memcache_settings(&env, backend_type)?;
        let stats_sink = stats_sink(&env)?;
        let extra_tags_raw = env.string("EXTRA_TAGS", "");
        let extra_tags = crate::metrics::parse_tags(&extra_tags_raw)
            .map_err(|e| env.err("EXTRA_TAGS", &extra_tags_raw, &format!("k1:v1,k2:v2 ({e})")))?;
        let http_read_timeout = env.duration("HTTP_READ_TIMEOUT", Duration::from_secs(30))?;
        Ok(Settings {
            host: env.string("HOST", "0.0.0.0"),
            port: env.number("PORT", 8080, "a port number")?,
            grpc_host: env.string("GRPC_HOST", "0.0.0.0"),
            grpc_port: env.number("GRPC_PORT", 8081, "a port number")?,
            grpc_uds: env.string("GRPC_UDS", ""),
            grpc_server_use_tls: env.boolean("GRPC_SERVER_USE_TLS", false)?,
            grpc_server_tls_cert: env.string("GRPC_SERVER_TLS_CERT", ""),
            grpc_server_tls_key: env.string("GRPC_SERVER_TLS_KEY", ""),
            grpc_client_tls_cacert: env.string("GRPC_CLIENT_TLS_CACERT", ""),
            grpc_client_tls_san: env.string("GRPC_CLIENT_TLS_SAN", ""),
            grpc_max_connection_age: env
                .duration("GRPC_MAX_CONNECTION_AGE", Duration::from_secs(24 * 3600))?,
            grpc_max_connection_age_grace: env
                .duration("GRPC_MAX_CONNECTION_AGE_GRACE", Duration::from_secs(3600))?,
            debug_host: env.string("DEBUG_HOST", "0.0.0.0"),
            debug_port: env.number("DEBUG_PORT", 6070, "a port number")?,
            debug_pprof_enabled: env.boolean("DEBUG_PPROF_ENABLED", true)?,
            backend_type,
            config_type,
            runtime_root: PathBuf::from(env.string("RUNTIME_ROOT", "/srv/runtime_data/current")),
            runtime_subdirectory: env.string("RUNTIME_SUBDIRECTORY", ""),
            runtime_appdirectory: env.string("RUNTIME_APPDIRECTORY", "config"),
            runtime_ignore_dotfiles: env.boolean("RUNTIME_IGNOREDOTFILES", false)?,
            runtime_watch_root: env.boolean("RUNTIME_WATCH_ROOT", true)?,
            merge_domain_config: env.boolean("MERGE_DOMAIN_CONFIG", false)?,
            force_start_without_initial_config: env
                .boolean("FORCE_START_WITHOUT_INITIAL_CONFIG", false)?,
            healthy_with_at_least_one_config_loaded: env
                .boolean("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false)?,
            log_level,
            log_format,
            http_max_body_bytes: env.number("HTTP_MAX_BODY_BYTES", 1 << 20, "a number of bytes")?,
            http_read_timeout,
            ports: port_settings(&env, http_read_timeout)?,
            grpc_keepalive_time: Some(env.duration("GRPC_KEEPALIVE_TIME", Duration::ZERO)?)
                .filter(|d| !d.is_zero()),
            grpc_keepalive_timeout: env
                .duration("GRPC_KEEPALIVE_TIMEOUT", Duration::from_secs(20))?,
            http_server_use_tls: env.boolean("HTTP_SERVER_USE_TLS", false)?,
            debug_server_use_tls: env.boolean("DEBUG_SERVER_USE_TLS", false)?,
            request_limits: {
                let d = crate::limits::RequestLimits::DEFAULT;
                crate::limits::RequestLimits {
                    max_descriptors: env.number(
                        "MAX_REQUEST_DESCRIPTORS",
                        d.max_descriptors,
                        "a whole number",
                    )?,
                    max_entries: env.number(
                        "MAX_DESCRIPTOR_ENTRIES",
                        d.max_entries,
                        "a whole number",
                    )?,
                    max_string_bytes: env.number(
                        "MAX_REQUEST_STRING_BYTES",
                        d.max_string_bytes,
                        "a number of bytes",
                    )?,
                }
            },
            stats_dynamic_cap: env.number("STATS_DYNAMIC_CAP", 10_000, "a whole number")?,
            stats_dynamic_bytes: env.number(
                "STATS_DYNAMIC_BYTES",
                ratelimit_core::stats::DEFAULT_DYNAMIC_STATS_BYTES,
                "a number of bytes",
            )?,
            limiter,
            redis,
            redis_per_second,
            redis_startup,
            memcache,
            warnings,
            stats_sink,
            stats_flush_interval: env.duration("STATS_FLUSH_INTERVAL", Duration::from_secs(10))?,
            extra_tags,
            tracing: tracing_settings(&env)?,
            // Rule delivery.
            runtime_poll_interval: env
                .duration("RUNTIME_POLL_INTERVAL", Duration::from_secs(10))?,
            xds_node_id: env.string("CONFIG_GRPC_XDS_NODE_ID", "default"),
            xds_node_metadata: env.pairs("CONFIG_GRPC_XDS_NODE_METADATA", '=')?,
            xds_server_url: env.string("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000"),
            xds_connect_retry_interval: env.duration(
                "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
                Duration::from_secs(3),
            )?,
            xds_additional_headers: env.pairs("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", ':')?,
            xds_use_tls: env.boolean("CONFIG_GRPC_XDS_SERVER_USE_TLS", false)?,
            xds_client_tls_cert: env.string("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", ""),
            xds_client_tls_key: env.string("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", ""),
            xds_server_tls_cacert: env.string("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ""),
            xds_server_tls_san: env.string("CONFIG_GRPC_XDS_SERVER_TLS_SAN", ""),
            xds_backoff_initial: env.duration(
                "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
                Duration::from_secs(10),
            )?,
            xds_backoff_max: env
                .duration("XDS_CLIENT_BACKOFF_MAX_INTERVAL", Duration::from_secs(60))?,
            xds_backoff_factor: {
                let f: f64 = env.number(
                    "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
                    0.5,
                    "a non-negative number",
                )?;
                if !(f.is_finite() && f >= 0.0) {
                    return Err(env.err(
                        "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
                        &f.to_string(),
                        "a non-negative number",
                    ));
                }
                f
            },
            xds_backoff_jitter: env.boolean("XDS_CLIENT_BACKOFF_JITTER", true)?,
            xds_max_msg_size: env.number(
                "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
                0,
                "a number of bytes",
            )?,
        })
    }

    /// The directory holding the rule files.
    pub fn config_dir(&self) -> PathBuf {
        let mut p = self.runtime_root.clone();
        if !self.runtime_subdirectory.is_empty() {
            p.push(&self.runtime_subdirectory);
        }
        p.push(&self.runtime_appdirectory);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(move |n| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()))
    }

    #[test]
    fn defaults_match_upstream() {
        let s = with(&[]).unwrap();
        assert_eq!((s.port, s.grpc_port, s.debug_port), (8080, 8081, 6070));
        assert_eq!(s.backend_type, BackendType::Redis);
        assert_eq!(
            s.config_dir(),
            PathBuf::from("/srv/runtime_data/current/config")
        );
        assert_eq!(s.limiter.expiration_jitter_max_seconds, 300);
        assert!(s.runtime_watch_root);
    }

    #[test]
    fn bad_values_name_the_variable() {
        let e = with(&[("PORT", "80x")]).unwrap_err();
        assert_eq!(e.name, "PORT");
        assert!(e.to_string().contains("\"80x\""));
        assert_eq!(
            with(&[("SHADOW_MODE", "yes")]).unwrap_err().name,
            "SHADOW_MODE"
        );
        assert_eq!(
            with(&[("BACKEND_TYPE", "etcd")]).unwrap_err().name,
            "BACKEND_TYPE"
        );
        assert_eq!(
            with(&[("NEAR_LIMIT_RATIO", "2")]).unwrap_err().name,
            "NEAR_LIMIT_RATIO"
        );
        assert_eq!(
            with(&[("HTTP_READ_TIMEOUT", "5 parsecs")])
                .unwrap_err()
                .name,
            "HTTP_READ_TIMEOUT"
        );
    }

    #[test]
    fn xds_settings() {
        let s = with(&[]).unwrap();
        assert_eq!(s.xds_server_url, "localhost:18000");
        assert_eq!(s.xds_node_id, "default");
        assert_eq!(s.xds_backoff_initial, Duration::from_secs(10));
        assert_eq!(s.xds_backoff_factor, 0.5);
        assert!(s.xds_backoff_jitter);
        let s = with(&[
            ("CONFIG_GRPC_XDS_NODE_METADATA", "a=1, b = two=2 ,"),
            (
                "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
                "authorization:Bearer x:y",
            ),
        ])
        .unwrap();
        assert_eq!(
            s.xds_node_metadata,
            [("a".into(), "1".into()), ("b".into(), "two=2".into())]
        );
        assert_eq!(
            s.xds_additional_headers,
            [("authorization".into(), "Bearer x:y".into())]
        );
        for (name, value) in [
            ("CONFIG_GRPC_XDS_NODE_METADATA", "novalue"),
            ("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", ":v"),
            ("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "-1"),
            ("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "soon"),
        ] {
            assert_eq!(with(&[(name, value)]).unwrap_err().name, name);
        }
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("150us"), Some(Duration::from_micros(150)));
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration("10"), None);
        assert_eq!(parse_go_duration("-1s"), None);
        assert_eq!(parse_go_duration(""), None);
    }

    #[test]
    fn subdirectory_and_prefix() {
        let s = with(&[
            ("RUNTIME_ROOT", "/r"),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("CACHE_KEY_PREFIX", "p:"),
            ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
            ("LIMIT_RESET_HEADER", "X-Reset"),
        ])
        .unwrap();
        assert_eq!(s.config_dir(), PathBuf::from("/r/ratelimit/config"));
        assert_eq!(s.limiter.cache_key_prefix, "p:");
        assert_eq!(s.limiter.response_headers.unwrap().reset, "X-Reset");
    }

    #[test]
    fn store_settings_reject_bad_values() {
        assert_eq!(
            with(&[("REDIS_TYPE", "ring")]).unwrap_err().name,
            "REDIS_TYPE"
        );
        assert_eq!(
            with(&[("REDIS_TIMEOUT", "10")]).unwrap_err().name,
            "REDIS_TIMEOUT"
        );
        let e = with(&[
            ("REDIS_PERSECOND", "true"),
            ("REDIS_PERSECOND_POOL_SIZE", "x"),
        ])
        .unwrap_err();
        assert_eq!(e.name, "REDIS_PERSECOND_POOL_SIZE");
        let both = [
            ("BACKEND_TYPE", "memcache"),
            ("MEMCACHE_HOST_PORT", "a:1"),
            ("MEMCACHE_SRV", "_m._tcp"),
        ];
        let e = with(&both).unwrap_err().to_string();
        assert!(
            e.contains("Both MEMCACHE_HOST_PORT and MEMCACHE_SRV are set"),
            "{e}"
        );
    }

    #[test]
    fn memcache_settings() {
        let mc = [("BACKEND_TYPE", "memcache")];
        let with_mc = |extra: &[(&str, &str)]| {
            let mut v = mc.to_vec();
            v.extend_from_slice(extra);
            with(&v)
        };
        let s = with_mc(&[("MEMCACHE_HOST_PORT", "a:1, b:2")])
            .unwrap()
            .memcache;
        assert_eq!(s.nodes, ["a:1", "b:2"]);
        assert_eq!((s.srv.as_deref(), s.srv_refresh), (None, Duration::ZERO));
        assert!(s.tls.is_none() && s.srv_nameserver.is_none());
        assert_eq!(s.timeout, Duration::from_secs(1));

        let s = with_mc(&[
            ("MEMCACHE_SRV", "_memcache._tcp.example.com"),
            ("MEMCACHE_SRV_REFRESH", "30s"),
            ("MEMCACHE_SRV_NAMESERVER", "127.0.0.1:5353"),
        ])
        .unwrap()
        .memcache;
        assert_eq!(s.srv.as_deref(), Some("_memcache._tcp.example.com"));
        assert!(s.nodes.is_empty());
        assert_eq!(s.srv_refresh, Duration::from_secs(30));
        assert_eq!(s.srv_nameserver, Some("127.0.0.1:5353".parse().unwrap()));
        let s = with_mc(&[
            ("MEMCACHE_SRV", "_m._tcp.x"),
            ("MEMCACHE_SRV_NAMESERVER", "10.0.0.2"),
        ])
        .unwrap()
        .memcache;
        assert_eq!(s.srv_nameserver, Some("10.0.0.2:53".parse().unwrap()));

        let s = with_mc(&[
            ("MEMCACHE_HOST_PORT", "a:1"),
            ("MEMCACHE_TLS", "true"),
            ("MEMCACHE_TLS_CACERT", "/ca.pem"),
            ("MEMCACHE_TLS_CLIENT_CERT", "/c.pem"),
            ("MEMCACHE_TLS_CLIENT_KEY", "/c.key"),
            ("MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "true"),
        ])
        .unwrap()
        .memcache;
        assert_eq!(
            s.tls,
            Some(MemcachedTls {
                ca: Some("/ca.pem".into()),
                client_cert: Some(("/c.pem".into(), "/c.key".into())),
                skip_hostname_verification: true,
            })
        );
        // The files only count when TLS is on, as upstream.
        let s = with_mc(&[
            ("MEMCACHE_HOST_PORT", "a:1"),
            ("MEMCACHE_TLS_CACERT", "/ca"),
        ]);
        assert!(s.unwrap().memcache.tls.is_none());

        for (vars, name) in [
            (
                &[("MEMCACHE_SRV", "memcache.example.com")][..],
                "MEMCACHE_SRV",
            ),
            (
                &[
                    ("MEMCACHE_SRV", "_m._tcp.x"),
                    ("MEMCACHE_SRV_REFRESH", "10"),
                ],
                "MEMCACHE_SRV_REFRESH",
            ),
            (
                &[
                    ("MEMCACHE_SRV", "_m._tcp.x"),
                    ("MEMCACHE_SRV_NAMESERVER", "dns:53"),
                ],
                "MEMCACHE_SRV_NAMESERVER",
            ),
            (
                &[("MEMCACHE_HOST_PORT", "a:1"), ("MEMCACHE_TLS", "yes")],
                "MEMCACHE_TLS",
            ),
            (
                &[
                    ("MEMCACHE_HOST_PORT", "a:1"),
                    ("MEMCACHE_TLS", "1"),
                    ("MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "sure"),
                ],
                "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
            ),
            (
                &[
                    ("MEMCACHE_HOST_PORT", "a:1"),
                    ("MEMCACHE_TLS", "true"),
                    ("MEMCACHE_TLS_CLIENT_KEY", "/c.key"),
                ],
                "MEMCACHE_TLS_CLIENT_KEY",
            ),
            (&[][..], "MEMCACHE_HOST_PORT"),
        ] {
            let e = with_mc(vars).unwrap_err();
            assert_eq!(e.name, name, "{vars:?}: {e}");
        }
        let e = with_mc(&[
            ("MEMCACHE_HOST_PORT", "a:1"),
            ("MEMCACHE_TLS", "true"),
            ("MEMCACHE_TLS_CLIENT_CERT", "/c.pem"),
        ])
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("MEMCACHE_TLS_CLIENT_KEY to be set too"),
            "{e}"
        );
    }

    #[test]
    fn redis_settings_as_upstream() {
        let s = with(&[]).unwrap();
        assert_eq!(s.redis.socket_type, SocketType::Unix);
        assert_eq!(s.redis.url, "/var/run/nutcracker/ratelimit.sock");
        assert_eq!(s.redis.pool_size, 10);
        assert_eq!(s.redis.timeout, Duration::from_secs(10));
        assert!(s.redis_per_second.is_none());
        let s = with(&[
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", "mymaster,10.0.0.1:26379"),
            ("REDIS_TYPE", "Sentinel"),
            ("REDIS_PERSECOND", "true"),
            ("REDIS_PERSECOND_URL", "127.0.0.1:6380"),
            ("REDIS_PERSECOND_SOCKET_TYPE", "tcp"),
            ("REDIS_PIPELINE_LIMIT", "8"),
            ("REDIS_POOL_ON_EMPTY_BEHAVIOR", "error"),
        ])
        .unwrap();
        assert_eq!(s.redis.kind, RedisKind::Sentinel);
        assert_eq!(s.redis.on_empty, OnEmpty::Error);
        assert_eq!(s.redis_per_second.unwrap().url, "127.0.0.1:6380");
        assert_eq!(
            s.warnings,
            ["REDIS_PIPELINE_LIMIT is deprecated and has no effect"]
        );
    }
}
