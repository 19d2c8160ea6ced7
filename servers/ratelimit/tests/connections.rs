//! How every port treats connections that misbehave: silent ones, idle ones, clients that
//! stop reading, floods up to the open file limit, and requests over the size limits.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use ratelimit_core::{Descriptor, Request};
use ratelimit_server::convert;
use ratelimit_server::pb::rls::rate_limit_service_client::RateLimitServiceClient;

use crate::common::{post_json, request, start, start_with_file_limit};
use crate::grpc_face::{RULES, SHOULD_RATE_LIMIT, call, channel, raw_call, req};

/// Reads until the peer closes (end of stream or reset): true if that happens within `d`.
pub fn closed_within(s: &mut TcpStream, d: Duration) -> bool {
    let deadline = Instant::now() + d;
    let mut buf = [0u8; 16 << 10];
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

/// Frames of HTTP/2 as a client writes them, enough for unary gRPC calls.
pub mod h2 {
    pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    pub fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
        let mut p = Vec::new();
        for (id, v) in pairs {
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        frame(0x4, 0, 0, &p)
    }

    /// HEADERS and DATA (END_STREAM) of one `ShouldRateLimit` call; header fields as HPACK
    /// literals without indexing, so every frame stands alone.
    pub fn call(stream: u32, message: &[u8]) -> Vec<u8> {
        let mut block = Vec::new();
        for (k, v) in [
            (":method", "POST"),
            (":scheme", "http"),
            (
                ":path",
                "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
            ),
            (":authority", "test"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ] {
            block.push(0);
            block.push(k.len() as u8);
            block.extend_from_slice(k.as_bytes());
            block.push(v.len() as u8);
            block.extend_from_slice(v.as_bytes());
        }
        let mut grpc = vec![0];
        grpc.extend_from_slice(&(message.len() as u32).to_be_bytes());
        grpc.extend_from_slice(message);
        let mut out = frame(0x1, 0x4, stream, &block);
        out.extend(frame(0x0, 0x1, stream, &grpc));
        out
    }

    /// The frame types the server sends until it closes or `within` passes; PINGs are
    /// answered, as every HTTP/2 client does.
    pub fn frame_types(s: &mut std::net::TcpStream, within: std::time::Duration) -> Vec<u8> {
        use std::io::{Read, Write};
        s.set_read_timeout(Some(within)).unwrap();
        let mut types = Vec::new();
        let mut head = [0u8; 9];
        while s.read_exact(&mut head).is_ok() {
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let mut payload = vec![0; len];
            if s.read_exact(&mut payload).is_err() {
                break;
            }
            let (kind, ack) = (head[3], head[4] & 0x1 != 0);
            if kind == 0x6 && !ack && s.write_all(&frame(0x6, 0x1, 0, &payload)).is_err() {
                break;
            }
            types.push(kind);
        }
        types
    }
}

fn encoded(r: &Request) -> Vec<u8> {
    prost::Message::encode_to_vec(&convert::request_to_pb(r))
}

#[test]
fn every_port_closes_a_connection_that_never_speaks() {
    let srv = start(
        &[("rl.yaml", RULES)],
        &[("CONNECTION_FIRST_BYTE_TIMEOUT", "300ms")],
    );
    let grpc: SocketAddr = srv.grpc.parse().unwrap();
    for (port, addr) in [("http", srv.http), ("debug", srv.debug), ("grpc", grpc)] {
        let mut silent = TcpStream::connect(addr).unwrap();
        assert!(
            closed_within(&mut silent, Duration::from_secs(5)),
            "the {port} port kept a silent connection open"
        );
    }
    // A client that speaks at once is served as before.
    assert_eq!(request(srv.http, "GET", "/healthcheck", b"").status, 200);
}

#[test]
fn an_idle_grpc_connection_is_sent_goaway_and_closed() {
    let srv = start(
        &[("rl.yaml", RULES)],
        &[("GRPC_MAX_CONNECTION_IDLE", "400ms")],
    );
    let mut s = TcpStream::connect(&srv.grpc).unwrap();
    s.write_all(h2::PREFACE).unwrap();
    s.write_all(&h2::settings(&[])).unwrap();
    let message = encoded(&req("rl", &[("free", "x")]));
    s.write_all(&h2::call(1, &message)).unwrap();
    let started = Instant::now();
    let types = h2::frame_types(&mut s, Duration::from_secs(8));
    // SETTINGS, the call's HEADERS, DATA and trailers, then GOAWAY once idle, and the
    // server closes the connection.
    assert!(types.contains(&0x1), "the call was answered: {types:?}");
    assert!(
        types.contains(&0x7),
        "no GOAWAY for an idle connection: {types:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(8), "not closed");
}

#[test]
fn a_grpc_client_that_grants_no_window_is_dropped() {
    let srv = start(
        &[("rl.yaml", RULES)],
        &[("CONNECTION_WRITE_TIMEOUT", "500ms")],
    );
    let mut s = TcpStream::connect(&srv.grpc).unwrap();
    s.write_all(h2::PREFACE).unwrap();
    // SETTINGS_INITIAL_WINDOW_SIZE 0: the server may send no response body.
    s.write_all(&h2::settings(&[(0x4, 0)])).unwrap();
    let message = encoded(&req("rl", &[("free", "x")]));
    for stream in (1..40).step_by(2) {
        s.write_all(&h2::call(stream, &message)).unwrap();
    }
    let started = Instant::now();
    assert!(
        closed_within(&mut s, Duration::from_secs(10)),
        "a connection whose answers cannot be sent was kept"
    );
    assert!(started.elapsed() >= Duration::from_millis(400));
    // Other clients are served.
    assert_eq!(request(srv.http, "GET", "/healthcheck", b"").status, 200);
}

/// Opens `n` connections that never send a byte (as many as the test process can).
fn silent_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_answer_while_silent_connections_flood_every_port() {
    // The test holds about 2,500 sockets itself.
    rlimit::increase_nofile_limit(8192).unwrap();
    let srv = start_with_file_limit(
        1024,
        &[("rl.yaml", RULES)],
        &[("CONNECTION_FIRST_BYTE_TIMEOUT", "60s")],
    );
    let grpc: SocketAddr = srv.grpc.parse().unwrap();
    let (h, d) = (srv.http, srv.debug);
    let flood = tokio::task::spawn_blocking(move || {
        let mut held = silent_connections(grpc, 1100);
        held.extend(silent_connections(h, 1100));
        held.extend(silent_connections(d, 200));
        held
    })
    .await
    .unwrap();
    assert!(flood.len() >= 2000, "the test opened only {}", flood.len());
    // Each port is at its bound: a client that speaks takes the place of a silent one.
    let (h, d) = (srv.http, srv.debug);
    let answers = tokio::task::spawn_blocking(move || {
        (
            request(h, "GET", "/healthcheck", b"").status,
            request(d, "GET", "/stats", b"").status,
        )
    })
    .await
    .unwrap();
    assert_eq!(answers, (200, 200));
    let ch = channel(&srv.grpc).await;
    let answer = call(&ch, &req("rl", &[("free", "x")])).await;
    assert!(answer.is_ok(), "{answer:?}");
    drop(flood);
    let log: Vec<String> = srv.proc.lines.try_iter().collect();
    let noisy = log.iter().filter(|l| l.contains("open files")).count();
    assert!(
        noisy <= 3,
        "the file limit was hit: {noisy} lines, e.g. {log:?}"
    );
}

#[tokio::test]
async fn requests_over_the_size_limits_are_refused_naming_the_limit() {
    let srv = start(
        &[("rl.yaml", RULES)],
        &[
            ("MAX_REQUEST_DESCRIPTORS", "50"),
            ("MAX_REQUEST_STRING_BYTES", "1024"),
        ],
    );
    let many = Request::new("rl", vec![Descriptor::new([("free", "x")]); 51]);
    let ch = channel(&srv.grpc).await;
    let mut client = RateLimitServiceClient::new(ch.clone());
    let status = client
        .should_rate_limit(convert::request_to_pb(&many))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert!(
        status.message().contains("MAX_REQUEST_DESCRIPTORS"),
        "{status:?}"
    );
    let long = req("rl", &[("free", &"x".repeat(1025))]);
    let status = call(&ch, &long).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    // At the limit is fine.
    let fifty = Request::new("rl", vec![Descriptor::new([("free", "x")]); 50]);
    assert!(call(&ch, &fifty).await.is_ok());
    // Large messages are checked before they are decoded, to the same effect.
    let value = "x".repeat(1000);
    let large_within = Request::new("rl", vec![Descriptor::new([("free", value.as_str())]); 50]);
    assert!(call(&ch, &large_within).await.is_ok());
    let large_over = Request::new("rl", vec![Descriptor::new([("free", "x")]); 5000]);
    let status = call(&ch, &large_over).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert!(status.message().contains("5000 descriptors"), "{status:?}");
    // An unknown, empty group in front: prost skips it and decodes the rest, so the check
    // of the bytes must see past it too.
    let mut grouped = vec![0x6b, 0x6c];
    grouped.extend_from_slice(&prost::Message::encode_to_vec(&convert::request_to_pb(
        &large_over,
    )));
    assert_eq!(
        raw_call(&srv.grpc, SHOULD_RATE_LIMIT, &grouped).await,
        tonic::Code::ResourceExhausted
    );

    let descriptor = r#"{"entries":[{"key":"free","value":"x"}]}"#;
    let body = format!(
        r#"{{"domain":"rl","descriptors":[{}]}}"#,
        vec![descriptor; 51].join(",")
    );
    let http = srv.http;
    let answer = tokio::task::spawn_blocking(move || post_json(http, &body))
        .await
        .unwrap();
    assert_eq!(answer.status, 400);
    let why = answer.header("x-ratelimit-error").unwrap_or_default();
    assert!(why.contains("MAX_REQUEST_DESCRIPTORS"), "{why}");
    // Every refusal, four over gRPC and one on /json, is counted where the docs say.
    let debug = srv.debug;
    let stats = tokio::task::spawn_blocking(move || request(debug, "GET", "/stats", b"").text())
        .await
        .unwrap();
    assert!(
        stats.contains("ratelimit.service.call.should_rate_limit.service_error: 5\n"),
        "{stats}"
    );
}
