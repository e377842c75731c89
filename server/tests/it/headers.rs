//! Security headers from the real `kymo serve`: pages run only this server's scripts and are
//! never framed by another site, JSON and the rest load nothing, nothing is sniffed, no page
//! address leaks to other sites; the trend image keeps its own policy, so it stays embeddable.

use crate::support::{KymoServer, TestRepo, assert_ok};

/// The status and the security headers of `path`.
fn headers_of(server: &KymoServer, path: &str) -> (u16, [Option<String>; 5]) {
    let response = ureq::get(format!("{}{path}", server.url))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    (
        response.status().as_u16(),
        [
            header("content-type"),
            header("content-security-policy"),
            header("x-frame-options"),
            header("x-content-type-options"),
            header("referrer-policy"),
        ],
    )
}

#[test]
fn every_answer_carries_security_headers_and_the_trend_image_stays_embeddable() {
    let repo = TestRepo::new();
    let sha = repo.commit(&[("file", "1")], "first");
    let server = KymoServer::start(&["--no-worker"]);
    let path = repo.path().to_str().unwrap();
    assert_ok(&server.kymo(&["repo", "add", "r", path]));

    let pages = [
        "/",
        "/repos/r",
        &format!("/repos/r/commits/{sha}"),
        "/queue",
        "/login",
    ];
    for page in pages {
        let (status, [kind, policy, frames, sniff, referrer]) = headers_of(&server, page);
        assert_eq!(status, 200, "{page}");
        assert!(kind.unwrap().starts_with("text/html"), "{page}");
        let policy = policy.unwrap_or_else(|| panic!("{page} has no CSP"));
        for directive in [
            "script-src 'self'",
            "frame-ancestors 'none'",
            "object-src 'none'",
            "base-uri 'none'",
        ] {
            assert!(policy.contains(directive), "{page}: {policy}");
        }
        assert!(!policy.contains("unsafe-eval"), "{page}: {policy}");
        assert_eq!(frames.as_deref(), Some("DENY"), "{page}");
        assert_eq!(sniff.as_deref(), Some("nosniff"), "{page}");
        assert_eq!(referrer.as_deref(), Some("same-origin"), "{page}");
    }
    // JSON, CSV, feeds, errors: nothing to load, never framed.
    for (path, expected) in [
        ("/api/v1/repos", 200),
        ("/api/v1/repos/missing", 404),
        ("/repos/r/regressions.atom", 200),
        ("/healthz", 200),
        ("/metrics", 200),
        ("/no/such/page", 404),
    ] {
        let (status, [_, policy, frames, sniff, referrer]) = headers_of(&server, path);
        assert_eq!(status, expected, "{path}");
        assert_eq!(
            policy.as_deref(),
            Some("default-src 'none'; frame-ancestors 'none'"),
            "{path}"
        );
        assert_eq!(frames.as_deref(), Some("DENY"), "{path}");
        assert_eq!(sniff.as_deref(), Some("nosniff"), "{path}");
        assert_eq!(referrer.as_deref(), Some("same-origin"), "{path}");
    }
    // The scripts the pages run are served as scripts, never sniffed as something else.
    let (status, [kind, _, _, sniff, _]) = headers_of(&server, "/static/kymo.css");
    assert_eq!((status, sniff.as_deref()), (200, Some("nosniff")));
    assert!(kind.unwrap().starts_with("text/css"));

    // An image for other sites' pages: its own policy, and no frame refusal.
    let upload = format!(
        r#"{{"commit":"{sha}","specs":{{"cpu_model":"c","logical_cores":1,"physical_cores":1,"memory_gib":1,"arch":"x86_64","virtualization":"none"}},"suites":[{{"suite":"s","results":{{"benchmarks":[{{"name":"b","metrics":[{{"name":"time","unit":"ns","direction":"lower","value":1}}]}}]}}}}]}}"#
    );
    let stored = ureq::post(format!("{}/api/v1/repos/r/results", server.url))
        .header("authorization", format!("Bearer {}", server.admin))
        .header("content-type", "application/json")
        .send(upload.as_str())
        .unwrap();
    assert_eq!(stored.status().as_u16(), 201);
    let (status, [kind, policy, frames, sniff, _]) =
        headers_of(&server, "/repos/r/trend.svg?benchmark=b");
    assert_eq!(status, 200);
    assert_eq!(kind.as_deref(), Some("image/svg+xml"));
    assert_eq!(
        policy.as_deref(),
        Some("default-src 'none'; style-src 'unsafe-inline'")
    );
    assert_eq!(frames, None, "an embeddable image may be framed");
    assert_eq!(sniff.as_deref(), Some("nosniff"));
}
