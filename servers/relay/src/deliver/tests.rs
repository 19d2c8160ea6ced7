use super::*;

fn reply(status: u16, body: &str, retry_after: Option<&str>) -> Result<Reply, ClientError> {
    let mut headers = http::HeaderMap::new();
    if let Some(r) = retry_after {
        headers.insert(http::header::RETRY_AFTER, r.parse().unwrap());
    }
    Ok(Reply {
        status: StatusCode::from_u16(status).unwrap(),
        headers,
        body: Bytes::from(body.to_string()),
    })
}

#[test]
fn pacer_allows_a_burst_then_spaces_calls() {
    let t0 = Instant::now();
    let mut p = Pacer::new(20);
    for _ in 0..20 {
        assert_eq!(p.reserve("-100", t0), Duration::ZERO);
    }
    // Twenty a minute: one every three seconds once the burst is used.
    assert_eq!(p.reserve("-100", t0), Duration::from_secs(3));
    assert_eq!(p.reserve("-100", t0), Duration::from_secs(6));
    // Other chats have their own bucket.
    assert_eq!(p.reserve("-200", t0), Duration::ZERO);
    // Time refills the bucket: 30 s later, ten tokens minus the two promised.
    let later = t0 + Duration::from_secs(30);
    for _ in 0..8 {
        assert_eq!(p.reserve("-100", later), Duration::ZERO);
    }
    assert!(p.reserve("-100", later) > Duration::ZERO);
    let mut off = Pacer::new(0);
    for _ in 0..100 {
        assert_eq!(off.reserve("-100", t0), Duration::ZERO);
    }
}

#[test]
fn answers_are_classified() {
    assert!(classify(reply(200, "{}", None)).is_ok());
    assert_eq!(
        classify(reply(429, r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3","parameters":{"retry_after":3}}"#, None)).unwrap_err(),
        SendError::Retry { after: Some(Duration::from_secs(3)), reason: "HTTP 429: Too Many Requests: retry after 3".into() }
    );
    assert_eq!(
        classify(reply(429, "", Some("7"))).unwrap_err(),
        SendError::Retry {
            after: Some(Duration::from_secs(7)),
            reason: "HTTP 429".into()
        }
    );
    assert!(matches!(
        classify(reply(502, "", None)),
        Err(SendError::Retry { after: None, .. })
    ));
    assert_eq!(
        classify(reply(
            400,
            r#"{"ok":false,"description":"Bad Request: chat not found"}"#,
            None
        ))
        .unwrap_err(),
        SendError::Fatal("HTTP 400: Bad Request: chat not found".into())
    );
    assert!(matches!(
        classify(reply(
            400,
            r#"{"error":{"message":"slow down","code":613}}"#,
            None
        )),
        Err(SendError::Retry { .. })
    ));
    assert!(matches!(
        classify(Err(ClientError::Io("refused".into()))),
        Err(SendError::Retry { .. })
    ));
    assert_eq!(
        check_ok(reply(200, r#"{"ok":false,"error":"channel_not_found"}"#, None).unwrap())
            .unwrap_err(),
        SendError::Fatal("channel_not_found".into())
    );
}
