//! `trading-api`: serves the trading API v2 sandbox, and issues API keys.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage:
  trading-api [--listen ADDR] [--data-dir DIR] [--ip-per-minute N] [--seed N] [--sandbox-clock]
              [--plan-spacing]
  trading-api create-key --data-dir DIR --name NAME [--plan PLAN] [--strict]
                         [--subaccount USERNAME] [--referred-by NAME]
  trading-api deposit --data-dir DIR --name NAME --wallet BTC|ETH|USDT --amount DECIMAL

  --listen ADDR    address to serve on (default 0.0.0.0:8090)
  --data-dir DIR   where keys and account data are kept (default: in memory, lost at exit)
  --ip-per-minute N  requests a minute per address without a valid key (default 60; 0: no limit)
  --seed N         seed of the simulated market (default 1); equal seeds give equal data
  --sandbox-clock  enable POST /sandbox/advance?ms=N, which moves the server clock forward
  --plan-spacing   enforce each plan's minimum spacing between signed calls on every account
                   (Free: 1 call per 1000 ms); without it only accounts that set
                   ratelimit_ms in user/settings are spaced
  --name NAME      account the key belongs to (created on first use)
  --plan PLAN      subscription plan of a new account: Free (default), Pro, Enterprise,
                   Unlimited (no request limits; for local tests)
  --subaccount USERNAME  the key signs for that sub-account of NAME (created with
                   subaccounts/subaccount-create, active)
  --referred-by NAME  records that the account was referred by account NAME
  --wallet, --amount  deposit credits AMOUNT to the account's executium-side wallet
  --strict         the key only accepts tokens that also sign method, path, query and body
  -h, --help       show this text

create-key prints {\"key\": ..., \"secret\": ...} as JSON; the secret is not shown again.";

#[derive(Debug, PartialEq)]
enum Command {
    Help,
    Serve {
        listen: SocketAddr,
        data_dir: Option<PathBuf>,
        ip_per_minute: u32,
        seed: u64,
        sandbox_clock: bool,
        plan_spacing: bool,
    },
    CreateKey {
        data_dir: PathBuf,
        name: String,
        plan: String,
        strict: bool,
        subaccount: Option<String>,
        referred_by: Option<String>,
    },
    Deposit {
        data_dir: PathBuf,
        name: String,
        wallet: String,
        amount: String,
    },
}

fn parse_args(args: impl Iterator<Item = String>) -> Result<Command, String> {
    let mut args = args.peekable();
    let deposit = args.peek().is_some_and(|a| a == "deposit");
    let create = deposit || args.peek().is_some_and(|a| a == "create-key");
    if create {
        args.next();
    }
    let mut subaccount = None;
    let mut referred_by = None;
    let mut wallet = None;
    let mut amount = None;
    let mut listen: SocketAddr = ([0, 0, 0, 0], 8090).into();
    let mut data_dir = None;
    let mut name = None;
    let mut plan = "Free".to_owned();
    let mut strict = false;
    let mut ip_per_minute = 60;
    let mut seed = 1;
    let mut sandbox_clock = false;
    let mut plan_spacing = false;
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
            None => (arg.clone(), None),
        };
        let mut value = |what: &str| {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or(format!("{flag} needs {what}"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--listen" if !create => {
                let v = value("an address such as 127.0.0.1:8090")?;
                listen = v
                    .parse()
                    .map_err(|e| format!("--listen {v:?} is not an address: {e}"))?;
            }
            "--ip-per-minute" if !create => {
                let v = value("a number of requests")?;
                ip_per_minute = v
                    .parse()
                    .map_err(|_| format!("--ip-per-minute {v:?} is not a whole number"))?;
            }
            "--seed" if !create => {
                let v = value("a whole number")?;
                seed = v
                    .parse()
                    .map_err(|_| format!("--seed {v:?} is not a whole number"))?;
            }
            "--sandbox-clock" if !create && inline.is_none() => sandbox_clock = true,
            "--plan-spacing" if !create && inline.is_none() => plan_spacing = true,
            "--data-dir" => data_dir = Some(PathBuf::from(value("a directory")?)),
            "--name" if create => name = Some(value("an account name")?),
            "--plan" if create => plan = value("a plan name")?,
            "--strict" if create && !deposit && inline.is_none() => strict = true,
            "--subaccount" if create && !deposit => subaccount = Some(value("a username")?),
            "--referred-by" if create && !deposit => {
                referred_by = Some(value("an account name")?);
            }
            "--wallet" if deposit => wallet = Some(value("BTC, ETH or USDT")?),
            "--amount" if deposit => amount = Some(value("a decimal amount")?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if !create {
        return Ok(Command::Serve {
            listen,
            data_dir,
            ip_per_minute,
            seed,
            sandbox_clock,
            plan_spacing,
        });
    }
    let what = if deposit { "deposit" } else { "create-key" };
    let data_dir = data_dir.ok_or(format!("{what} needs --data-dir"))?;
    let name = name
        .filter(|n| !n.trim().is_empty())
        .ok_or(format!("{what} needs --name"))?;
    if deposit {
        return Ok(Command::Deposit {
            data_dir,
            name,
            wallet: wallet.ok_or("deposit needs --wallet")?,
            amount: amount.ok_or("deposit needs --amount")?,
        });
    }
    Ok(Command::CreateKey {
        data_dir,
        name,
        plan,
        strict,
        subaccount,
        referred_by,
    })
}

fn main() -> ExitCode {
    match parse_args(std::env::args().skip(1)) {
        Ok(Command::Help) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Command::Serve {
            listen,
            data_dir,
            ip_per_minute,
            seed,
            sandbox_clock,
            plan_spacing,
        }) => serve(
            listen,
            data_dir,
            ip_per_minute,
            seed,
            (sandbox_clock, plan_spacing),
        ),
        Ok(Command::CreateKey {
            data_dir,
            name,
            plan,
            strict,
            subaccount,
            referred_by,
        }) => create_key(
            &data_dir,
            &name,
            &plan,
            strict,
            subaccount.as_deref(),
            referred_by.as_deref(),
        ),
        Ok(Command::Deposit {
            data_dir,
            name,
            wallet,
            amount,
        }) => {
            let now = (trading_server::system_clock())();
            let result = trading_server::store::Store::open(&data_dir)
                .and_then(|store| store.credit_deposit(&name, &wallet, &amount, now));
            match result {
                Ok(r) => {
                    let mut out = serde_json::Map::new();
                    out.insert("id".into(), r.id.into());
                    out.extend(r.fields);
                    println!("{}", serde_json::Value::Object(out));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("trading-api deposit: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("trading-api: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn create_key(
    dir: &std::path::Path,
    name: &str,
    plan: &str,
    strict: bool,
    subaccount: Option<&str>,
    referred_by: Option<&str>,
) -> ExitCode {
    let now = (trading_server::system_clock())();
    let result = trading_server::store::Store::open(dir).and_then(|store| {
        let k = match subaccount {
            Some(user) => store.create_subaccount_key(name, user, strict, now)?,
            None => store.create_key(name, plan, strict, now)?,
        };
        if let Some(by) = referred_by {
            store.set_referrer(name, by)?;
        }
        Ok(k)
    });
    match result {
        Ok(k) => {
            println!("{}", serde_json::json!({"key": k.key, "secret": k.secret}));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("trading-api create-key: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(
    listen: SocketAddr,
    data_dir: Option<PathBuf>,
    ip_per_minute: u32,
    seed: u64,
    (sandbox_clock, plan_spacing): (bool, bool),
) -> ExitCode {
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
            // SIGINT from a terminal, SIGTERM from service managers and containers.
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
            eprintln!("trading-api: shutting down");
        };
        let mut settings = trading_server::Settings {
            data_dir,
            ip_per_minute,
            seed,
            plan_spacing,
            ..trading_server::Settings::default()
        };
        if sandbox_clock {
            let clock = trading_server::SandboxClock::new();
            settings.clock = clock.clock();
            settings.sandbox = Some(clock);
        }
        match trading_server::serve(listener, settings, shutdown).await {
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

    fn parse(args: &[&str]) -> Result<Command, String> {
        parse_args(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn serve_arguments() {
        let Command::Serve {
            listen,
            data_dir,
            ip_per_minute,
            seed,
            sandbox_clock,
            plan_spacing,
        } = parse(&[]).unwrap()
        else {
            panic!()
        };
        assert_eq!((listen.port(), data_dir, ip_per_minute), (8090, None, 60));
        assert_eq!((seed, sandbox_clock, plan_spacing), (1, false, false));
        let Command::Serve {
            listen,
            data_dir,
            ip_per_minute,
            seed,
            sandbox_clock,
            plan_spacing,
        } = parse(&[
            "--plan-spacing",
            "--seed",
            "99",
            "--sandbox-clock",
            "--listen",
            "127.0.0.1:1",
            "--data-dir=/tmp/x",
            "--ip-per-minute",
            "0",
        ])
        .unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (
                listen.port(),
                ip_per_minute,
                seed,
                sandbox_clock,
                plan_spacing
            ),
            (1, 0, 99, true, true)
        );
        assert!(parse(&["--seed", "x"]).is_err());
        assert!(parse(&["--ip-per-minute", "-1"]).is_err());
        assert_eq!(data_dir, Some(PathBuf::from("/tmp/x")));
        assert_eq!(parse(&["--help"]).unwrap(), Command::Help);
        assert!(parse(&["--listen"]).is_err());
        assert!(parse(&["--listen", "nowhere"]).is_err());
        assert!(parse(&["--name", "x"]).is_err());
    }

    #[test]
    fn create_key_arguments() {
        assert_eq!(
            parse(&[
                "create-key",
                "--data-dir",
                "d",
                "--name",
                "alice",
                "--strict"
            ])
            .unwrap(),
            Command::CreateKey {
                data_dir: PathBuf::from("d"),
                name: "alice".into(),
                plan: "Free".into(),
                strict: true,
                subaccount: None,
                referred_by: None,
            }
        );
        assert!(parse(&["create-key", "--name", "alice"]).is_err());
        assert!(matches!(
            parse(&["create-key", "--data-dir", "d", "--name", "a", "--subaccount", "kid01", "--referred-by", "b"]),
            Ok(Command::CreateKey { subaccount: Some(s), referred_by: Some(r), .. }) if s == "kid01" && r == "b"
        ));
        assert_eq!(
            parse(&[
                "deposit",
                "--data-dir",
                "d",
                "--name",
                "a",
                "--wallet",
                "BTC",
                "--amount",
                "1.5"
            ])
            .unwrap(),
            Command::Deposit {
                data_dir: PathBuf::from("d"),
                name: "a".into(),
                wallet: "BTC".into(),
                amount: "1.5".into(),
            }
        );
        assert!(
            parse(&[
                "deposit",
                "--data-dir",
                "d",
                "--name",
                "a",
                "--wallet",
                "BTC"
            ])
            .is_err()
        );
        assert!(parse(&["deposit", "--data-dir", "d", "--name", "a", "--strict"]).is_err());
        assert!(parse(&["create-key", "--data-dir", "d"]).is_err());
        assert!(parse(&["create-key", "--data-dir", "d", "--name", " "]).is_err());
        assert!(
            parse(&[
                "create-key",
                "--data-dir",
                "d",
                "--name",
                "a",
                "--listen",
                "x"
            ])
            .is_err()
        );
    }
}
