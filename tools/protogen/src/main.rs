//! `cargo run --manifest-path tools/protogen/Cargo.toml` from the repository root.

use std::path::Path;

fn main() {
    let root = Path::new("servers/ratelimit/proto");
    let files = [
        "envoy/service/ratelimit/v3/rls.proto",
        "envoy/service/discovery/v3/discovery.proto",
        "envoy/service/rate_limit_quota/v3/rlqs.proto",
        "ratelimit/config/ratelimit/v3/rls_conf.proto",
    ];
    let fds = protox::compile(files.map(|f| root.join(f)), [root]).expect("protos compile");
    let out = Path::new("servers/ratelimit/src/pb");
    std::fs::create_dir_all(out).expect("output directory");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .out_dir(out)
        .compile_fds(fds)
        .expect("code generation");
    println!("generated into {}", out.display());
}
