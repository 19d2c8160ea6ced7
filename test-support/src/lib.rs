//! Helpers the servers' tests share; a dev-dependency only, never published.
//!
//! - [`process`]: a child process guard that stops by PID (killed on drop, or SIGTERM
//!   then kill with [`process::Proc::terminate`]), its stdout or stderr read line by line.
//! - [`net`]: a free loopback port, a fresh temporary directory, and polling until
//!   something is ready.
//! - [`http`]: a small raw HTTP/1.1 client over a `TcpStream` (blocking and tokio), so
//!   tests can send anything, malformed bytes included; replies are parsed into status,
//!   headers and body (chunked bodies decoded).
//! - [`stores`]: Redis (single, Cluster, behind Sentinel) and memcached (plain and TLS)
//!   started on free loopback ports from the installed binaries, with tiny protocol
//!   clients to check what they hold.
//! - [`tls`] and [`dns`]: a throwaway CA with server and client certificates, and a DNS
//!   server that answers SRV questions.
//! - [`fuzz`]: the committed cargo-fuzz corpora, for the tests that replay them.
//!
//! What it does not do: it does not know any server's settings, log lines or binary
//! paths. `env!("CARGO_BIN_EXE_<name>")` only works in the test crate, so each server's
//! tests build their own [`std::process::Command`] and keep their own start-up helpers
//! (which ports a server announces, where its rules go, gRPC channels).

pub mod dns;
pub mod fuzz;
pub mod http;
pub mod net;
pub mod process;
pub mod stores;
pub mod tls;
