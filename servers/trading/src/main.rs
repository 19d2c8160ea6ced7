//! `trading-api`: serves the trading API v2 sandbox.

use std::net::SocketAddr;
use std::process::ExitCode;

const USAGE: &str = "usage: trading-api [--listen ADDR]

  --listen ADDR   address to serve on (default 0.0.0.0:8090)
  -h, --help      show this text";

fn parse_args(args: impl Iterator<Item = String>) -> Result<Option<SocketAddr>, String> {
    let mut listen: SocketAddr = ([0, 0, 0, 0], 8090).into();
    let mut args = args;
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
            None => (arg.clone(), None),
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--listen" => {
                let v = inline
                    .or_else(|| args.next())
                    .ok_or("--listen needs an address such as 127.0.0.1:8090")?;
                listen = v
                    .parse()
                    .map_err(|e| format!("--listen {v:?} is not an address: {e}"))?;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(listen))
}

fn main() -> ExitCode {
    let listen = match parse_args(std::env::args().skip(1)) {
        Ok(Some(addr)) => addr,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("trading-api: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("trading-api: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("trading-api: cannot listen on {listen}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let local = listener.local_addr().map_or(listen, |a| a);
        eprintln!("trading-api: listening on http://{local}/api/v2/");
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        match trading_server::serve(listener, trading_server::Settings::default(), shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("trading-api: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Option<SocketAddr>, String> {
        parse_args(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn arguments() {
        assert_eq!(parse(&[]).unwrap().unwrap().port(), 8090);
        assert_eq!(
            parse(&["--listen", "127.0.0.1:1"]).unwrap().unwrap().port(),
            1
        );
        assert_eq!(parse(&["--listen=127.0.0.1:2"]).unwrap().unwrap().port(), 2);
        assert_eq!(parse(&["--help"]).unwrap(), None);
        assert!(parse(&["--listen"]).is_err());
        assert!(parse(&["--listen", "nowhere"]).is_err());
        assert!(parse(&["--data-dir", "x"]).is_err());
    }
}
