//! `ratelimit`: reads upstream's environment settings and serves until SIGTERM or SIGINT.
//! Everything between the two is [`ratelimit_server::server::run`].

use std::process::ExitCode;

use ratelimit_server::log::{self, Level};
use ratelimit_server::{Settings, server};

// Every request allocates (HTTP/2 frames, tonic's 8 KB encode buffer, the decision), and
// glibc's malloc spent about a tenth of the server's time on it, consolidating its free
// lists whenever a buffer that size was asked for.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    ratelimit_server::memory::keep_huge_pages_off();
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("check-config") {
        return ratelimit_server::checkconfig::main(&args[2..]);
    }
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ratelimit: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.worker_threads)
        .on_thread_park(ratelimit_server::memory::release_when_idle)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ratelimit: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(server::run(settings, server::termination_signal)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::log(Level::Error, &e);
            eprintln!("ratelimit: {e}");
            ExitCode::FAILURE
        }
    }
}
