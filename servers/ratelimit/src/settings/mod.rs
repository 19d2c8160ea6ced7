//! Settings from upstream's environment variable names, parsed strictly: a bad value is a
//! startup error naming the variable and the value, never a silent default.
//!
//! Parsing only: nothing here logs or opens anything. What deserves a warning is returned in
//! [`Settings::warnings`] for the caller to log.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use ratelimit_backends::memcached::MemcachedSettings;
use ratelimit_backends::redis::{RedisSettings, StartupBackoff};
use ratelimit_core::{HeaderNames, LimiterSettings};

use crate::log::LogFormat;

mod env;
mod groups;

pub use env::{Env, parse_go_duration};
use groups::{
    memcache_settings, port_settings, redis_settings, rlqs_settings, stats_sink, tracing_settings,
};

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
    /// `TOKIO_WORKER_THREADS` (one per CPU): the main runtime's workers, and as many gRPC
    /// connection threads.
    pub worker_threads: usize,
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
    /// `RLQS_*`: the Rate Limit Quota Service's knobs.
    pub rlqs: ratelimit_core::quota::QuotaSettings,
    /// `RLQS_SHARE_THROUGH_REDIS` (true): on a Redis store, replicas split each bucket's
    /// budget by the claims they publish there.
    pub rlqs_share_through_redis: bool,
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
            initial: env.interval("REDIS_STARTUP_INITIAL_INTERVAL", Duration::from_secs(1))?,
            max: env.interval("REDIS_STARTUP_MAX_INTERVAL", Duration::from_secs(30))?,
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
            worker_threads: {
                let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
                let expected = "a whole number above 0";
                let n = env.number("TOKIO_WORKER_THREADS", cpus, expected)?;
                if n == 0 {
                    return Err(env.err("TOKIO_WORKER_THREADS", "0", expected));
                }
                n
            },
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
            stats_flush_interval: env.interval("STATS_FLUSH_INTERVAL", Duration::from_secs(10))?,
            extra_tags,
            tracing: tracing_settings(&env)?,
            // Rule delivery.
            runtime_poll_interval: env
                .duration("RUNTIME_POLL_INTERVAL", Duration::from_secs(10))?,
            xds_node_id: env.string("CONFIG_GRPC_XDS_NODE_ID", "default"),
            xds_node_metadata: env.pairs("CONFIG_GRPC_XDS_NODE_METADATA", '=')?,
            xds_server_url: env.string("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000"),
            xds_connect_retry_interval: env.interval(
                "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
                Duration::from_secs(3),
            )?,
            xds_additional_headers: env.pairs("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", ':')?,
            xds_use_tls: env.boolean("CONFIG_GRPC_XDS_SERVER_USE_TLS", false)?,
            xds_client_tls_cert: env.string("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", ""),
            xds_client_tls_key: env.string("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", ""),
            xds_server_tls_cacert: env.string("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ""),
            xds_server_tls_san: env.string("CONFIG_GRPC_XDS_SERVER_TLS_SAN", ""),
            xds_backoff_initial: env.interval(
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
            rlqs: rlqs_settings(&env)?,
            rlqs_share_through_redis: env.boolean("RLQS_SHARE_THROUGH_REDIS", true)?,
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
mod tests;
