//! The mux against a socket the test plays Redis on.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// A mux connected to a socket the test plays Redis on.
async fn mux_and_fake_redis() -> (Mux, tokio::net::TcpStream) {
    mux_with_timeout(Duration::from_secs(5)).await
}

async fn mux_with_timeout(timeout: Duration) -> (Mux, tokio::net::TcpStream) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mux = Mux::start(Target {
        addr: listener.local_addr().unwrap().to_string(),
        unix: false,
        auth: Vec::new(),
        timeout,
        tls: None,
    });
    let (redis, _) = listener.accept().await.unwrap();
    (mux, redis)
}

fn frame(args: &[&[u8]]) -> Vec<u8> {
    let mut f = Vec::new();
    encode(&mut f, args);
    f
}

/// Reads from the fake Redis until what came ends with `end`.
async fn read_until(redis: &mut tokio::net::TcpStream, end: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    while !got.ends_with(end) {
        let n = redis.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the mux closed the connection");
        got.extend_from_slice(&chunk[..n]);
    }
    got
}

/// A call Redis answers too late gets a timeout at its deadline; its late reply is
/// read and dropped, so the next call still gets its own reply.
#[tokio::test]
async fn an_unanswered_call_times_out_and_the_connection_stays_in_step() {
    let timeout = Duration::from_millis(300);
    let (mux, mut redis) = mux_with_timeout(timeout).await;
    let t = std::time::Instant::now();
    let slow = tokio::spawn({
        let mux = mux.clone();
        async move { mux.call(frame(&[b"INCRBY", b"slow", b"1"])).await }
    });
    read_until(&mut redis, b"$4\r\nslow\r\n$1\r\n1\r\n").await;
    let answer = tokio::time::timeout(Duration::from_secs(5), slow)
        .await
        .expect("no answer at all")
        .unwrap();
    let took = t.elapsed();
    assert_eq!(
        answer,
        Err("redis request timed out after 300ms".to_owned()),
        "after {took:?}"
    );
    assert!(took >= timeout && took < timeout * 3, "{took:?}");
    let next = tokio::spawn({
        let mux = mux.clone();
        async move { mux.call(frame(&[b"INCRBY", b"next", b"1"])).await }
    });
    read_until(&mut redis, b"$4\r\nnext\r\n$1\r\n1\r\n").await;
    redis.write_all(b":41\r\n:7\r\n").await.unwrap();
    assert_eq!(next.await.unwrap(), Ok(Reply::Int(7)));
}

/// Redis stops reading: the socket fills, the write of a big call blocks, and the
/// calls queued behind it still end at their deadlines instead of waiting for ever.
#[tokio::test]
async fn calls_behind_a_blocked_write_still_time_out() {
    let timeout = Duration::from_millis(300);
    let (mux, _redis) = mux_with_timeout(timeout).await;
    let big = vec![b'x'; 32 << 20];
    let first = tokio::spawn({
        let (mux, f) = (mux.clone(), frame(&[b"SET", b"big", &big]));
        async move { mux.call(f).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = std::time::Instant::now();
    let behind = tokio::time::timeout(
        Duration::from_secs(5),
        mux.call(frame(&[b"INCRBY", b"behind", b"1"])),
    )
    .await
    .expect("no answer at all");
    let took = t.elapsed();
    assert_eq!(
        behind,
        Err("redis request timed out after 300ms".to_owned())
    );
    assert!(took < timeout * 3, "{took:?}");
    assert_eq!(
        first.await.unwrap(),
        Err("redis request timed out after 300ms".to_owned())
    );
}

/// With nothing listening, the connection task keeps reconnecting with pauses that
/// grow to a second; a call made meanwhile is held for the next connection, and ends
/// at its deadline, not at the next failed attempt.
#[tokio::test]
async fn calls_while_redis_is_unreachable_end_by_their_deadline() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .to_string();
    let timeout = Duration::from_millis(150);
    let mux = Mux::start(Target {
        addr,
        unix: false,
        auth: Vec::new(),
        timeout,
        tls: None,
    });
    let (mut worst, mut timed_out, mut refused) = (Duration::ZERO, 0, 0);
    let start = std::time::Instant::now();
    // Long enough for pauses of 320 ms, 640 ms and 1 s, each longer than the timeout.
    while start.elapsed() < Duration::from_millis(3500) {
        let t = std::time::Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(5), mux.call(frame(&[b"PING"])))
            .await
            .expect("no answer at all");
        worst = worst.max(t.elapsed());
        match r {
            Err(e) if e.contains("timed out") => timed_out += 1,
            Err(_) => refused += 1,
            Ok(r) => panic!("an answer from nowhere: {r:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(worst < timeout * 3, "a call took {worst:?}");
    assert!(timed_out > 0 && refused > 0, "{timed_out} {refused}");
}

/// A fake Redis numbering its connections from 1, answering every `PING` on a
/// connection with that connection's number.
async fn numbering_fake_redis() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        for n in 1.. {
            let (mut conn, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 256];
                loop {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(k) => buf.extend_from_slice(&chunk[..k]),
                    }
                    let ping = b"*1\r\n$4\r\nPING\r\n";
                    while buf.starts_with(ping) {
                        buf.drain(..ping.len());
                        let reply = format!(":{n}\r\n");
                        conn.write_all(reply.as_bytes()).await.unwrap();
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn a_one_worker_runtime_calls_over_a_connection_of_its_own_thread() {
    let ping = || {
        let mut f = Vec::new();
        encode(&mut f, &[b"PING"]);
        f
    };
    let shared = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mux = shared.block_on(async {
        Mux::start(Target {
            addr: numbering_fake_redis().await,
            unix: false,
            auth: Vec::new(),
            timeout: Duration::from_secs(5),
            tls: None,
        })
    });
    let on_shared = |mux: Mux| {
        shared
            .block_on(shared.spawn(async move { mux.call(ping()).await }))
            .unwrap()
    };
    assert_eq!(on_shared(mux.clone()), Ok(Reply::Int(1)));

    // A current-thread runtime: this thread's own connection, reused.
    let here = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(here.block_on(mux.call(ping())), Ok(Reply::Int(2)));
    assert_eq!(here.block_on(mux.call(ping())), Ok(Reply::Int(2)));

    // A one-worker runtime, as the server's connection threads are: its worker's own.
    let one = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let call_on_one = |mux: Mux| {
        one.block_on(one.spawn(async move { mux.call(ping()).await }))
            .unwrap()
    };
    assert_eq!(call_on_one(mux.clone()), Ok(Reply::Int(3)));
    assert_eq!(call_on_one(mux.clone()), Ok(Reply::Int(3)));

    // The work-stealing runtime's callers still share the first connection.
    assert_eq!(on_shared(mux.clone()), Ok(Reply::Int(1)));
    assert_eq!(here.block_on(mux.call(ping())), Ok(Reply::Int(2)));
}

/// A call queued behind a slow write whose caller gives up meanwhile is never sent;
/// the calls around it are sent and answered in order.
#[tokio::test]
async fn a_call_given_up_before_its_write_is_not_sent() {
    let (mux, mut redis) = mux_and_fake_redis().await;
    let frame = |args: &[&[u8]]| {
        let mut f = Vec::new();
        encode(&mut f, args);
        f
    };
    // Far more than loopback's socket buffers hold: with the peer not reading, the
    // write of this call blocks, and later calls queue behind it.
    let big = vec![b'x'; 32 << 20];
    let first = tokio::spawn({
        let (mux, f) = (mux.clone(), frame(&[b"SET", b"big", &big]));
        async move { mux.call(f).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let gave_up = tokio::time::timeout(
        Duration::from_millis(100),
        mux.call(frame(&[b"INCRBY", b"gave-up", b"1"])),
    )
    .await;
    assert!(gave_up.is_err(), "{gave_up:?}");
    let last = tokio::spawn({
        let (mux, f) = (mux.clone(), frame(&[b"INCRBY", b"waits", b"1"]));
        async move { mux.call(f).await }
    });
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    while !got.ends_with(b"$5\r\nwaits\r\n$1\r\n1\r\n") {
        let n = redis.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the mux closed the connection");
        got.extend_from_slice(&chunk[..n]);
    }
    assert!(!got.windows(7).any(|w| w == b"gave-up"));
    redis.write_all(b":1\r\n:2\r\n").await.unwrap();
    assert_eq!(first.await.unwrap(), Ok(Reply::Int(1)));
    assert_eq!(last.await.unwrap(), Ok(Reply::Int(2)));
}

/// A call of several commands gets one answer once all its replies are in: the first
/// reply, or the first error among them; the calls after it keep their own replies.
#[tokio::test]
async fn a_multi_command_call_answers_once_with_its_first_reply_or_error() {
    let (mux, mut redis) = mux_and_fake_redis().await;
    let frame = |commands: &[&[u8]]| {
        let mut f = Vec::new();
        for c in commands {
            encode(&mut f, &[c]);
        }
        f
    };
    let mut calls = Vec::new();
    for (frame, n) in [
        (frame(&[b"A1", b"A2"]), 2),
        (frame(&[b"B1", b"B2"]), 2),
        (frame(&[b"C1", b"C2"]), 2),
        (frame(&[b"D1"]), 1),
    ] {
        let mux = mux.clone();
        calls.push(tokio::spawn(async move { mux.call_many(frame, n).await }));
        // In this order on the wire.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut got = Vec::new();
    let mut chunk = [0u8; 256];
    while !got.ends_with(b"$2\r\nD1\r\n") {
        let n = redis.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the mux closed the connection");
        got.extend_from_slice(&chunk[..n]);
    }
    // A: both fine. B: the second fails. C: both fail, the first error wins. D: its
    // own single reply, after the six of the calls before it.
    redis
        .write_all(b":7\r\n:1\r\n:8\r\n-ERR two\r\n-ERR three\r\n-ERR four\r\n:9\r\n")
        .await
        .unwrap();
    let mut answers = Vec::new();
    for c in calls.drain(..3) {
        answers.push(c.await.unwrap());
    }
    assert_eq!(
        answers,
        [
            Ok(Reply::Int(7)),
            Ok(Reply::Error("ERR two".into())),
            Ok(Reply::Error("ERR three".into())),
        ]
    );
    assert_eq!(calls.pop().unwrap().await.unwrap(), Ok(Reply::Int(9)));
}
