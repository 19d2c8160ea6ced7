//! `gql-demo`: parse settings, bind, serve until Ctrl-C or SIGTERM.

use std::process::ExitCode;

use gql_server::{App, Command, USAGE, serve_app};

#[tokio::main]
async fn main() -> ExitCode {
    let command = match Command::parse(std::env::args().skip(1), |k| std::env::var(k).ok()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gql-demo: {e}");
            return ExitCode::from(2);
        }
    };
    let settings = match command {
        Command::Help => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Command::PrintSchema(settings) => {
            return match App::new(&settings) {
                Ok(app) => {
                    print!("{}", app.demo().sdl());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("gql-demo: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Serve(settings) => settings,
        _ => return ExitCode::FAILURE,
    };
    let app = match App::new(&settings) {
        Ok(app) => app,
        Err(e) => {
            eprintln!("gql-demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let listener = match tokio::net::TcpListener::bind(settings.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("gql-demo: cannot listen on {}: {e}", settings.listen);
            return ExitCode::FAILURE;
        }
    };
    let address = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    // Tests and scripts read this line to learn the port when PORT=0.
    println!("Running a GraphQL API server at http://{address}/graphql");
    match serve_app(listener, app, stop_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gql-demo: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
