//! The settings groups with many variables of their own: the stores, the statistics sink,
//! the ports' connection handling and tracing.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ratelimit_backends::memcached::{self, MemcachedSettings, MemcachedTls};
use ratelimit_backends::redis::{OnEmpty, RedisKind, RedisSettings, RedisTls, SocketType};

use super::env::Env;
use super::{BackendType, SettingsError, StatsSink};

/// The largest mapper file read: the bound of a rule file.
const MAPPER_MAX_BYTES: u64 = ratelimit_core::Limits::DEFAULT.max_bytes as u64;

pub(super) fn redis_settings<F: Fn(&str) -> Option<String>>(
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

pub(super) fn stats_sink<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
) -> Result<StatsSink, SettingsError> {
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
            let read = crate::bounded_file::read(Path::new(&mapper), MAPPER_MAX_BYTES)
                .and_then(|text| text.ok_or_else(|| "no such file".to_owned()));
            let text = read.map_err(|e| {
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
pub(super) fn port_settings<F: Fn(&str) -> Option<String>>(
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

pub(super) fn tracing_settings<F: Fn(&str) -> Option<String>>(
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

pub(super) fn memcache_settings<F: Fn(&str) -> Option<String>>(
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

/// `RLQS_*`: the quota service's knobs (docs/rlqs.md). Durations in whole seconds.
pub(super) fn rlqs_settings<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
) -> Result<ratelimit_core::quota::QuotaSettings, SettingsError> {
    use ratelimit_core::quota::{NoMatch, QuotaSettings};
    let d = QuotaSettings::default();
    let no_match_raw = env.string("RLQS_NO_MATCH", "ALLOW_ALL");
    let no_match = match no_match_raw.to_ascii_uppercase().as_str() {
        "ALLOW_ALL" => NoMatch::AllowAll,
        "DENY_ALL" => NoMatch::DenyAll,
        _ => return Err(env.err("RLQS_NO_MATCH", &no_match_raw, "ALLOW_ALL or DENY_ALL")),
    };
    let secs = |name: &str, default: u64, min: u64| -> Result<u64, SettingsError> {
        let v = env.duration(name, Duration::from_secs(default))?;
        if v.subsec_nanos() != 0 || v.as_secs() < min {
            return Err(env.err(
                name,
                &env.string(name, ""),
                &format!("whole seconds, at least {min}s"),
            ));
        }
        Ok(v.as_secs())
    };
    let count = |name: &str, default: usize, of: &str| -> Result<usize, SettingsError> {
        let expected = format!("a count of {of}, at least 1");
        let n: u64 = env.number(name, default as u64, &expected)?;
        match usize::try_from(n) {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(env.err(name, &n.to_string(), &expected)),
        }
    };
    let ttl = secs("RLQS_ASSIGNMENT_TTL", d.assignment_ttl_secs, 2)?;
    let refresh = secs("RLQS_REFRESH_INTERVAL", d.refresh_secs, 1)?;
    if refresh >= ttl {
        return Err(env.err(
            "RLQS_REFRESH_INTERVAL",
            &env.string("RLQS_REFRESH_INTERVAL", ""),
            "less than RLQS_ASSIGNMENT_TTL",
        ));
    }
    let floor_permille = env.number("RLQS_FLOOR_PERMILLE", d.floor_permille, "0 to 1000")?;
    if floor_permille > 1000 {
        return Err(env.err(
            "RLQS_FLOOR_PERMILLE",
            &floor_permille.to_string(),
            "0 to 1000",
        ));
    }
    Ok(QuotaSettings {
        no_match,
        assignment_ttl_secs: ttl,
        refresh_secs: refresh,
        abandon_after_secs: secs("RLQS_ABANDON_AFTER", d.abandon_after_secs, 1)?,
        demand_window_secs: secs("RLQS_DEMAND_WINDOW", d.demand_window_secs, 1)?,
        floor_permille,
        change_permille: env.number(
            "RLQS_CHANGE_PERMILLE",
            d.change_permille,
            "a number of thousandths",
        )?,
        max_buckets_per_stream: count(
            "RLQS_MAX_BUCKETS_PER_STREAM",
            d.max_buckets_per_stream,
            "buckets",
        )?,
        max_buckets: count("RLQS_MAX_BUCKETS", d.max_buckets, "buckets")?,
        max_bucket_bytes: count("RLQS_MAX_BUCKET_BYTES", d.max_bucket_bytes, "bytes")?,
    })
}
