//! Calling a script: `EVALSHA`, and `EVAL` when Redis does not know it yet (a fresh or
//! restarted server, a failover, `SCRIPT FLUSH`). `NOSCRIPT` means nothing ran, so sending
//! the script itself cannot count twice.
//!
//! A call's arguments are formatted once, straight into what goes out: over our own
//! connection into the call's RESP frame, through fred (Sentinel, Cluster, TLS; fred
//! routes the call by its keys' slot) into fred's values. Either way the reply comes back
//! as a [`Reply`].

use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;

use fred::bytes::Bytes;
use fred::bytes_utils::Str;
use fred::interfaces::LuaInterface;
use fred::prelude::*;
use ratelimit_core::Increment;

use super::commands::{io_error, refuses_scripts};
use super::{Instance, lone, scripts};
use crate::redis_mux::{self, Mux, Reply};

/// A script and its SHA-1 (each checked against Redis's `SCRIPT LOAD` by a test).
pub(super) struct Script {
    pub(super) body: &'static str,
    pub(super) sha: &'static str,
}

/// Where a script's arguments go, one at a time.
pub(super) trait Args {
    fn text(&mut self, a: &[u8]);

    fn int(&mut self, n: u64) {
        self.text(itoa::Buffer::new().format(n).as_bytes());
    }

    /// The shortest decimal that parses back to `x` (Rust's `Display`), which Lua's
    /// `tonumber` reads back as the very same double.
    fn float(&mut self, x: f64) {
        let mut buf = [0u8; 64];
        let mut w = &mut buf[..];
        if write!(w, "{x}").is_ok() {
            let n = 64 - w.len();
            self.text(&buf[..n]);
        } else {
            self.text(x.to_string().as_bytes());
        }
    }
}

/// Arguments written as RESP bulk strings, counted for the frame's header.
struct Frame {
    buf: Vec<u8>,
    parts: usize,
}

impl Args for Frame {
    fn text(&mut self, a: &[u8]) {
        redis_mux::push_bulk(&mut self.buf, a);
        self.parts += 1;
    }
}

/// The whole frame of one script call: `command script numkeys keys... args...`.
fn frame(command: &[u8], script: &[u8], keys: &[&str], args: &dyn Fn(&mut dyn Args)) -> Vec<u8> {
    let size = 64 + script.len() + keys.iter().map(|k| k.len() + 8).sum::<usize>();
    let mut f = Frame {
        buf: Vec::with_capacity(size + 160),
        parts: 0,
    };
    f.text(command);
    f.text(script);
    f.int(keys.len() as u64);
    for k in keys {
        f.text(k.as_bytes());
    }
    args(&mut f);
    // The header counts the parts; written last and moved in front (a few hundred bytes).
    let mut header = Vec::with_capacity(16);
    redis_mux::push_header(&mut header, b'*', f.parts);
    f.buf.splice(0..0, header);
    f.buf
}

/// Turns an error reply into an error.
fn checked(reply: Reply) -> Result<Reply, Error> {
    match reply {
        Reply::Error(e) => Err(Error::new(fred::error::ErrorKind::Unknown, e)),
        r => Ok(r),
    }
}

fn noscript(e: &Error) -> bool {
    e.details().starts_with("NOSCRIPT")
}

/// `script` over our own connection.
pub(super) async fn eval_mux(
    mux: &Mux,
    script: &Script,
    keys: &[&str],
    args: &(dyn Fn(&mut dyn Args) + Sync),
) -> Result<Reply, Error> {
    let call = |command: &'static [u8], body: &'static str| async move {
        let f = frame(command, body.as_bytes(), keys, args);
        checked(mux.call(f).await.map_err(io_error)?)
    };
    match call(b"EVALSHA", script.sha).await {
        Err(e) if noscript(&e) => call(b"EVAL", script.body).await,
        r => r,
    }
}

/// Arguments as fred's values.
struct Values(Vec<Value>);

impl Args for Values {
    fn text(&mut self, a: &[u8]) {
        self.0.push(Value::Bytes(Bytes::copy_from_slice(a)));
    }

    fn int(&mut self, n: u64) {
        match i64::try_from(n) {
            Ok(n) => self.0.push(Value::Integer(n)),
            Err(_) => self.text(itoa::Buffer::new().format(n).as_bytes()),
        }
    }
}

/// `script` through fred.
pub(super) async fn eval_fred(
    client: &Client,
    script: &Script,
    keys: &[&str],
    args: &(dyn Fn(&mut dyn Args) + Sync),
) -> Result<Reply, Error> {
    let values = || {
        let mut v = Values(Vec::with_capacity(8));
        args(&mut v);
        Value::Array(v.0)
    };
    let sha = Str::from_static(script.sha);
    let reply = match client.evalsha(sha, keys.to_vec(), values()).await {
        Err(e) if noscript(&e) => {
            client
                .eval(Str::from_static(script.body), keys.to_vec(), values())
                .await
        }
        r => r,
    };
    Ok(value_reply(reply?))
}

/// A fred value as our connection would have read it.
fn value_reply(v: Value) -> Reply {
    match v {
        Value::Integer(n) => Reply::Int(n),
        Value::String(s) => Reply::Bulk(s.into_inner().to_vec()),
        Value::Bytes(b) => Reply::Bulk(b.to_vec()),
        _ => Reply::Other,
    }
}

impl Instance {
    /// One group through its script: a lone sliding window or bucket through its own
    /// (`redis/lone.rs`), anything else through the group script (`redis/scripts.rs`). A
    /// Redis that refuses scripts cannot decide it in one atomic step: that is an error,
    /// not a fallback. `out[i]` gets the answer for `group[i]`.
    pub(super) async fn count_group(
        &self,
        group: &[&Increment],
        out: &mut [u64],
    ) -> Result<(), Error> {
        let refused = |why: &str| {
            Error::new(
                fred::error::ErrorKind::Unknown,
                format!(
                    "redis {} refuses scripts ({why}): sliding_window, token_bucket and \
                     rate_limits lists need them to count atomically",
                    self.settings.url
                ),
            )
        };
        if self.scripts_refused.load(Relaxed) {
            return Err(refused("refused before"));
        }
        let lone = lone::lone(group);
        let args = |a: &mut dyn Args| match &lone {
            Some(l) => l.args(group[0], a),
            None => scripts::group_args(group, a),
        };
        let script = lone.as_ref().map_or(&scripts::GROUP_SCRIPT, |l| l.script());
        // One key for a lone increment: no `Vec` of them.
        let one;
        let many: Vec<&str>;
        let keys: &[&str] = if let [inc] = group {
            one = [inc.key.as_str()];
            &one
        } else {
            many = group.iter().map(|i| i.key.as_str()).collect();
            &many
        };
        let reply = match &self.mux {
            Some(mux) => eval_mux(mux, script, keys, &args).await,
            None => Box::pin(eval_fred(self.pool.next(), script, keys, &args)).await,
        };
        let reply = match reply {
            Err(e) if refuses_scripts(e.details()) => {
                if !self.scripts_refused.swap(true, Relaxed) {
                    (self.warn)(&format!(
                        "redis {} refused the scripts of sliding windows, token buckets \
                         and rate_limits lists ({}); they fail, fixed windows count with \
                         INCRBY + EXPIRE",
                        self.settings.url,
                        e.details()
                    ));
                }
                return Err(refused(e.details()));
            }
            r => r?,
        };
        let protocol = |e| Error::new(fred::error::ErrorKind::Protocol, e);
        match lone {
            Some(l) => out[0] = l.answer(group[0], reply).map_err(protocol)?,
            None => scripts::answers(group, reply, out).map_err(protocol)?,
        }
        Ok(())
    }
}
