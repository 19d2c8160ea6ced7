use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

/// Runs `f` against a peer that answers with `reply` once it has read `expect`.
async fn exchange<T>(
    expect: &'static [u8],
    reply: &'static [u8],
    f: impl AsyncFnOnce(&mut Conn<tokio::io::DuplexStream>) -> T,
) -> T {
    let (client, mut server) = duplex(4096);
    let peer = tokio::spawn(async move {
        let mut got = vec![0u8; expect.len()];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(got, expect, "{}", String::from_utf8_lossy(&got));
        server.write_all(reply).await.unwrap();
        server
    });
    let mut conn = Conn::new(client);
    let out = f(&mut conn).await;
    drop(peer.await.unwrap());
    out
}

#[tokio::test]
async fn get_maps_values_to_keys() {
    let v = exchange(
        b"get a b a c\r\n",
        b"VALUE a 0 1\r\n7\r\nVALUE c 0 3 99\r\nabc\r\nEND\r\n",
        async |c| c.get(&["a", "b", "a", "c"]).await,
    )
    .await
    .unwrap();
    assert_eq!(v, [7, 0, 7, 0]);
}

#[tokio::test]
async fn pipelined_replies_in_order() {
    let r = exchange(
        b"incr a 1\r\nincr b 2\r\nincr c 3\r\n",
        b"5\r\nNOT_FOUND\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        async |c| c.arith("incr", &[("a", 1), ("b", 2), ("c", 3)]).await,
    )
    .await
    .unwrap();
    assert_eq!(r[0], Reply::Value(5));
    assert_eq!(r[1], Reply::NotFound);
    assert!(matches!(&r[2], Reply::Error(e) if e.contains("non-numeric")));
    let r = exchange(
        b"add a 0 60 2\r\n12\r\nadd b 0 60 1\r\n1\r\n",
        b"STORED\r\nNOT_STORED\r\n",
        async |c| c.add(&[("a", 12, 60), ("b", 1, 60)]).await,
    )
    .await
    .unwrap();
    assert_eq!(r, [Reply::Stored, Reply::NotStored]);
}

/// The committed cargo-fuzz corpus of `memcached_reply`, replayed on stable.
#[test]
fn fuzz_corpus_replays() {
    let corpus = test_support::fuzz::corpus("memcached_reply");
    let files = corpus.len();
    let answered: usize = corpus.iter().map(|(_, d)| check_replies(d)).sum();
    assert!(
        files >= 4 && answered >= 3,
        "{files} files, {answered} answers"
    );
}

#[tokio::test]
async fn a_pipeline_mixes_commands_in_one_write() {
    let r = exchange(
        b"gets a\r\nincr b_60 2\r\ngets b_0\r\nadd c 0 90 1\r\n0\r\ncas a 0 90 2 41\r\n15\r\ndecr b_60 2\r\n",
        b"VALUE a 0 2 41\r\n12\r\nEND\r\n7\r\nEND\r\nNOT_STORED\r\nEXISTS\r\n5\r\n",
        async |c| {
            c.run(&[
                Cmd::Gets("a"),
                Cmd::Incr("b_60", 2),
                Cmd::Gets("b_0"),
                Cmd::Add("c", 0, 90),
                Cmd::Cas("a", 15, 90, 41),
                Cmd::Decr("b_60", 2),
            ])
            .await
        },
    )
    .await
    .unwrap();
    assert_eq!(
        r,
        [
            Reply::Item { value: 12, cas: 41 },
            Reply::Value(7),
            Reply::NotFound,
            Reply::NotStored,
            Reply::Exists,
            Reply::Value(5),
        ]
    );
}

/// The committed cargo-fuzz corpus of `memcached_pipeline`, replayed on stable.
#[test]
fn pipeline_fuzz_corpus_replays() {
    let corpus = test_support::fuzz::corpus("memcached_pipeline");
    let files = corpus.len();
    let answered: usize = corpus.iter().map(|(_, d)| check_pipeline_replies(d)).sum();
    assert!(
        files >= 5 && answered >= 4,
        "{files} files, {answered} answers"
    );
}

#[tokio::test]
async fn a_pipeline_refuses_what_fits_no_command() {
    for reply in [
        &b"VALUE b 0 1 7\r\n1\r\nEND\r\n"[..],
        b"VALUE a 0 1\r\n1\r\nEND\r\n",
        b"VALUE a 0 1 7\r\n1\r\nVALUE a 0 1 8\r\n2\r\nEND\r\n",
        b"STORED\r\n",
        b"EXISTS\r\n",
    ] {
        let (client, mut server) = duplex(4096);
        server.write_all(reply).await.unwrap();
        // Kept open: each reply is refused as soon as it is read.
        let mut c = Conn::new(client);
        assert!(c.run(&[Cmd::Gets("a")]).await.is_err(), "{reply:?}");
        assert!(c.replied());
        drop(server);
    }
    let (client, server) = duplex(4096);
    drop(server);
    let mut c = Conn::new(client);
    assert!(c.run(&[Cmd::Incr("a", 1)]).await.is_err());
    assert!(!c.replied(), "a closed connection answered nothing");
}

#[tokio::test]
async fn garbage_is_an_error_not_a_panic() {
    for reply in [
        &b"VALUE a 0 99999999999\r\n"[..],
        b"VALUE a 0 x\r\n",
        b"VALUE a\r\n",
        b"VALUE a 0 1\r\n12\r\nEND\r\n",
        b"SERVER_ERROR out of memory\r\n",
        b"no newline",
    ] {
        let (client, mut server) = duplex(4096);
        server.write_all(reply).await.unwrap();
        drop(server);
        let mut c = Conn::new(client);
        assert!(c.get(&["a"]).await.is_err(), "{reply:?}");
    }
    let (client, mut server) = duplex(4096);
    server.write_all(&[b'9'; 2000]).await.unwrap();
    let mut c = Conn::new(client);
    assert!(c.arith("incr", &[("a", 1)]).await.is_err());
}
