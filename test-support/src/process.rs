//! A child process that is stopped by PID: killed when dropped, or sent SIGTERM and given
//! time to exit with [`Proc::terminate`]. One of its output streams can be read line by
//! line while it runs.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Which output stream [`Proc::spawn`] reads into [`Proc::lines`]; the other keeps what
/// the command set (inherited by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capture {
    Stdout,
    Stderr,
    /// Neither: `lines` stays empty.
    Nothing,
}

pub struct Proc {
    pub child: Child,
    /// The captured stream's lines, in order, as they are written.
    pub lines: mpsc::Receiver<String>,
}

impl Proc {
    /// Spawns `cmd` with stdin closed and the `capture`d stream piped.
    pub fn spawn(mut cmd: Command, capture: Capture) -> Proc {
        cmd.stdin(Stdio::null());
        match capture {
            Capture::Stdout => cmd.stdout(Stdio::piped()),
            Capture::Stderr => cmd.stderr(Stdio::piped()),
            Capture::Nothing => &mut cmd,
        };
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
        Proc::adopt(child, capture)
    }

    /// Guards a child spawned elsewhere; reads the `capture`d stream if it was piped.
    pub fn adopt(mut child: Child, capture: Capture) -> Proc {
        let (tx, rx) = mpsc::channel();
        let stream: Option<Box<dyn Read + Send>> = match capture {
            Capture::Stdout => child.stdout.take().map(|s| Box::new(s) as _),
            Capture::Stderr => child.stderr.take().map(|s| Box::new(s) as _),
            Capture::Nothing => None,
        };
        if let Some(stream) = stream {
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Proc { child, lines: rx }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (a name such as `TERM` or `HUP`) with `kill(1)`; whether it was sent.
    pub fn signal(&self, signal: &str) -> bool {
        Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Reads lines until `pick` returns `Some`, for up to `limit`; `None` if the stream
    /// ended or the time ran out first. Lines read are consumed.
    pub fn find_line<T>(
        &self,
        limit: Duration,
        mut pick: impl FnMut(&str) -> Option<T>,
    ) -> Option<T> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).ok()?;
            if let Some(found) = pick(&line) {
                return Some(found);
            }
        }
    }

    /// Waits up to `limit` for the process to exit by itself.
    pub fn wait_timeout(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then up to `grace` to exit; killed after that. The exit status, `None`
    /// if it had to be killed.
    pub fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.child.try_wait().unwrap() {
            return Some(status);
        }
        self.signal("TERM");
        let status = self.wait_timeout(grace);
        if status.is_none() {
            self.kill();
        }
        status
    }

    /// Kills the process (SIGKILL) and reaps it; harmless if it already exited.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}
