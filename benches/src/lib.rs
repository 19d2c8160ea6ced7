//! Shared workloads for the criterion benches, the load generator and the callgrind
//! driver, so that every number in `docs/benchmarks.md` is measured on the same rules and
//! the same request mix.
#![forbid(unsafe_code)]

pub mod h2raw;

use std::sync::Arc;

use ratelimit_backends::MemoryStore;
use ratelimit_core::decide::decide;
use ratelimit_core::rules::Match;
use ratelimit_core::{
    Code, Descriptor, Limiter, ManualClock, Now, Request, Response, RuleSet, Stats, Unit,
};

/// A fixed time, so that windows never roll over during a run and results repeat.
pub const NOW: u64 = 1_700_000_000;

/// Domains in the realistic configuration; 40 rules each.
pub const DOMAINS: usize = 5;

/// The realistic configuration: one document per domain, 40 rules each (200 in all), with
/// what production configs mix: key-only defaults with nested limits, explicit values,
/// trailing and inner wildcards, a three-level path, an unlimited rule and a shadow rule.
/// Limits are high so that the steady state is "allowed", the common case in production.
pub fn realistic_config() -> Vec<(String, String)> {
    (0..DOMAINS)
        .map(|d| {
            let mut y = format!("domain: dom{d}\ndescriptors:\n");
            let rl = |unit: &str, n: u32| {
                format!("    rate_limit: {{unit: {unit}, requests_per_unit: {n}}}\n")
            };
            // Key-only default with a key-only nested limit: 2 rules.
            y += "  - key: api_key\n";
            y += &rl("minute", 1_000_000_000);
            y += "    descriptors:\n      - key: method\n";
            y += "        rate_limit: {unit: second, requests_per_unit: 1000000000}\n";
            // Explicit customers, each with a wildcard path below: 24 rules.
            for c in 0..12 {
                y += &format!("  - key: api_key\n    value: cust{c}\n");
                y += &rl("hour", 1_000_000_000);
                y += &format!(
                    "    descriptors:\n      - key: path\n        value: \"/v1/r{c}/*\"\n        \
                     rate_limit: {{unit: minute, requests_per_unit: 1000000000}}\n"
                );
            }
            // Wildcard and key-only default on the same key: 2 rules.
            y += &format!("  - key: remote_address\n    value: \"10.{d}.*\"\n");
            y += &rl("second", 1_000_000_000);
            y += "  - key: remote_address\n";
            y += &rl("minute", 1_000_000_000);
            // Header matches with explicit values: 10 rules.
            for h in 0..10 {
                y += &format!("  - key: header_match\n    value: h{h}\n");
                y += &rl("minute", 1_000_000_000);
            }
            // Unlimited and shadow rules: 2 rules.
            y += "  - key: generic_key\n    value: internal\n    unlimited: true\n";
            y += "  - key: generic_key\n    value: canary\n    shadow_mode: true\n";
            y += &rl("second", 1_000_000_000);
            // A three-level path with an inner wildcard at the leaf: 1 rule.
            y += &format!(
                "  - key: tenant\n    value: t{d}\n    descriptors:\n      - key: plan\n        \
                 value: gold\n        descriptors:\n          - key: user\n            \
                 value: \"u*x\"\n            \
                 rate_limit: {{unit: day, requests_per_unit: 1000000000}}\n"
            );
            (format!("dom{d}.yaml"), y)
        })
        .collect()
}

/// The realistic request mix: `n` single-descriptor requests cycling over every kind of
/// match (explicit, wildcard, default, nested, unlimited, shadow, no rule).
pub fn realistic_requests(n: usize) -> Vec<Request> {
    (0..n)
        .map(|i| {
            let d = i % DOMAINS;
            let j = i / DOMAINS;
            let c = j % 12;
            let desc = match j % 9 {
                0 => Descriptor::new([
                    ("api_key", format!("cust{c}")),
                    ("path", format!("/v1/r{c}/items/{j}")),
                ]),
                1 => Descriptor::new([("api_key", format!("anon{j}"))]),
                2 => Descriptor::new([("api_key", format!("anon{j}")), ("method", "GET".into())]),
                3 => Descriptor::new([("remote_address", format!("10.{d}.{}.{}", j % 7, j % 250))]),
                4 => Descriptor::new([("remote_address", format!("192.168.1.{}", j % 250))]),
                5 => Descriptor::new([("header_match", format!("h{}", j % 10))]),
                6 => Descriptor::new([(
                    "generic_key",
                    if j % 2 == 0 { "internal" } else { "canary" },
                )]),
                7 => Descriptor::new([
                    ("tenant", format!("t{d}")),
                    ("plan", "gold".into()),
                    ("user", format!("u{j}x")),
                ]),
                _ => Descriptor::new([("unknown_key", format!("v{j}"))]),
            };
            Request::new(format!("dom{d}"), vec![desc])
        })
        .collect()
}

/// Compiles the realistic configuration.
pub fn realistic_rules(stats: &Stats) -> RuleSet {
    let files = realistic_config();
    RuleSet::from_yaml(
        files.iter().map(|(n, t)| (n.as_str(), t.as_str())),
        false,
        stats,
    )
    .expect("the generated config is valid")
}

/// The pure engine without a store: match, build the cache key, decide and count
/// statistics, as the limiter does per descriptor, with a fixed counter value. Returns the
/// number of descriptors answered OVER_LIMIT so the optimiser cannot drop the work.
pub fn plan_and_decide(
    rules: &RuleSet,
    req: &Request,
    scratch: &mut String,
    key: &mut String,
) -> usize {
    let mut over = 0;
    for d in &req.descriptors {
        let Match::Rule(r) = rules.find(&req.domain, &d.entries, scratch) else {
            continue;
        };
        let Some(limit) = r.limits.first() else {
            continue;
        };
        r.cache_key_into(
            key,
            "",
            &req.domain,
            &d.entries,
            limit.unit.window_start(NOW),
        );
        let spec = limit.spec(r.shadow_mode);
        let (status, delta) = decide(
            &spec,
            1 + key.len() as u64,
            1,
            0.8,
            Now::from_secs(NOW),
            false,
        );
        r.stats.add(&delta);
        over += usize::from(status.code == Code::OverLimit);
    }
    over
}

/// The embedded limiter type the benches use.
pub type MemLimiter = Limiter<Arc<MemoryStore>, Arc<ManualClock>>;

/// One domain, one key-only rule: the single-descriptor embedded case.
pub const SIMPLE_RULES: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n  - key: route\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n  - key: tenant\n    rate_limit: {unit: hour, requests_per_unit: 1000000000}\n";

/// A limiter on the memory store with [`SIMPLE_RULES`] and a frozen clock.
pub fn simple_limiter() -> MemLimiter {
    Limiter::builder(
        Arc::new(MemoryStore::new()),
        Arc::new(ManualClock::new(NOW)),
    )
    .yaml("api.yaml", SIMPLE_RULES)
    .build()
    .expect("valid rules")
}

/// [`SIMPLE_RULES`] with the `user` limit a token bucket: the same work as governor's keyed
/// GCRA limiter, through the whole decision path.
pub const TOKEN_BUCKET_RULES: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: token_bucket}\n";

/// A limiter on the memory store with [`TOKEN_BUCKET_RULES`] and a frozen clock.
pub fn token_bucket_limiter() -> MemLimiter {
    Limiter::builder(
        Arc::new(MemoryStore::new()),
        Arc::new(ManualClock::new(NOW)),
    )
    .yaml("api.yaml", TOKEN_BUCKET_RULES)
    .build()
    .expect("valid rules")
}

/// `keys` single-descriptor requests over distinct users.
pub fn simple_requests(keys: usize) -> Vec<Request> {
    (0..keys)
        .map(|k| Request::new("api", vec![Descriptor::new([("user", format!("user{k}"))])]))
        .collect()
}

/// `keys` three-descriptor requests (user, route, tenant), as an API gateway sends them.
pub fn triple_requests(keys: usize) -> Vec<Request> {
    (0..keys)
        .map(|k| {
            Request::new(
                "api",
                vec![
                    Descriptor::new([("user", format!("user{k}"))]),
                    Descriptor::new([("route", format!("/r{}", k % 16))]),
                    Descriptor::new([("tenant", format!("t{}", k % 4))]),
                ],
            )
        })
        .collect()
}

/// A request with a per-request limit override (`limit` set): each distinct value creates
/// one dynamic statistics entry, which is what the override-stats memory test measures.
pub fn override_request(i: u64) -> Request {
    Request::new(
        "api",
        vec![Descriptor::new([("user", format!("ovr{i}"))]).with_limit(1_000_000, Unit::Minute)],
    )
}

/// Decides through the synchronous in-process API into a response the caller reuses
/// (`should_rate_limit_now_into`), as a synchronous embedder deciding many requests
/// would: no future, no executor, no response built and dropped per decision.
pub fn decide_now(limiter: &MemLimiter, req: &Request, resp: &mut Response) -> Code {
    limiter
        .should_rate_limit_now_into(req, resp)
        .expect("the memory store counts in process")
        .expect("decided");
    resp.overall_code
}

/// The same through `should_rate_limit_now`, which returns a new response each time.
pub fn decide_now_owned(limiter: &MemLimiter, req: &Request) -> Code {
    limiter
        .should_rate_limit_now(req)
        .expect("the memory store counts in process")
        .expect("decided")
        .overall_code
}

/// Decides one request through the async API, entering an executor for it alone: what
/// synchronous code that only has the async API pays.
pub fn decide_blocking(limiter: &MemLimiter, req: &Request) -> Code {
    futures_executor::block_on(limiter.should_rate_limit(req))
        .expect("decided")
        .overall_code
}

/// Decides `n` requests (cycling through `reqs`) through the async API from inside one
/// task, as an async service awaits it in its handlers, and counts the OK answers.
/// The executor is entered once for all of them, so that its entry (thread-local
/// bookkeeping and an atomic swap, tens of nanoseconds) is not billed to every decision.
pub fn decide_async_n(limiter: &MemLimiter, reqs: &[Request], n: usize) -> usize {
    futures_executor::block_on(async {
        let mut ok = 0;
        for r in reqs.iter().cycle().take(n) {
            let code = limiter
                .should_rate_limit(std::hint::black_box(r))
                .await
                .expect("decided")
                .overall_code;
            ok += usize::from(code == Code::Ok);
        }
        ok
    })
}
