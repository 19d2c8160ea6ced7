//! Protobuf and gRPC code generated from `proto/` by `scripts/gen-protos.sh` (a pure-Rust
//! compiler, so no `protoc` is needed). Modules mirror the proto packages because the
//! generated code refers to sibling packages by relative paths.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

pub mod envoy {
    pub mod config {
        pub mod core {
            pub mod v3 {
                include!("pb/envoy.config.core.v3.rs");
            }
        }
    }
    pub mod extensions {
        pub mod common {
            pub mod ratelimit {
                pub mod v3 {
                    include!("pb/envoy.extensions.common.ratelimit.v3.rs");
                }
            }
        }
    }
    pub mod r#type {
        pub mod v3 {
            include!("pb/envoy.r#type.v3.rs");
        }
    }
    pub mod service {
        pub mod ratelimit {
            pub mod v3 {
                include!("pb/envoy.service.ratelimit.v3.rs");
            }
        }
        pub mod discovery {
            pub mod v3 {
                include!("pb/envoy.service.discovery.v3.rs");
            }
        }
        pub mod rate_limit_quota {
            pub mod v3 {
                include!("pb/envoy.service.rate_limit_quota.v3.rs");
            }
        }
    }
}

pub mod google {
    pub mod rpc {
        include!("pb/google.rpc.rs");
    }
}

pub mod ratelimit {
    pub mod config {
        pub mod ratelimit {
            pub mod v3 {
                include!("pb/ratelimit.config.ratelimit.v3.rs");
            }
        }
    }
}

pub use envoy::extensions::common::ratelimit::v3 as descriptor;
pub use envoy::service::rate_limit_quota::v3 as rlqs;
pub use envoy::service::ratelimit::v3 as rls;
