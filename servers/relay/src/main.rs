//! `event-relay`: reads flags and `EVENTS_*` settings and serves until SIGTERM or SIGINT.

use std::process::ExitCode;
use std::sync::Arc;

use relay_server::log::{Level, Logger, Stdout};
use relay_server::settings::USAGE;
use relay_server::{App, Settings, serve};
use tokio::net::TcpListener;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    if args.first().map(String::as_str) == Some("version") {
        println!("event-relay {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let settings = match Settings::parse(&args, &|k| std::env::var(k).ok()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("event-relay: {e}");
            return ExitCode::from(2);
        }
    };
    let log = match Logger::new(
        Arc::new(Stdout),
        settings.stdout_format,
        &settings.stdout_level,
        &settings.stdout_template,
    ) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("event-relay: {e}");
            return ExitCode::from(2);
        }
    };
    let app = match App::new(settings, log, Arc::new(|k: &str| std::env::var(k).ok())) {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("event-relay: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("event-relay: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let addr = app.settings.listen_addr();
        let listener = match TcpListener::bind(&addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("event-relay: cannot listen on {addr}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let local = listener.local_addr().map(|a| a.to_string()).unwrap_or(addr);
        app.log.log(
            Level::Info,
            &format!("listening on {local}"),
            &[("listen", &local)],
        );
        serve(Arc::clone(&app), listener, shutdown_signal()).await;
        let limit = app.settings.delivery.drain;
        app.log.log(
            Level::Info,
            &format!("stopping: delivering queued messages (up to {limit:?})"),
            &[],
        );
        let left = app.drain(limit).await;
        if left > 0 {
            app.log.log(
                Level::Warn,
                &format!("stopped with {left} messages undelivered"),
                &[],
            );
        }
        ExitCode::SUCCESS
    })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
