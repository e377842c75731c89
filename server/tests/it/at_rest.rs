//! Issue 20, data at rest and small things: the database is its owner's alone, and a
//! benchmark whose name holds `?`, `#`, `%` or `../` links to its own page.

use std::os::unix::fs::PermissionsExt;

use axum::http::StatusCode;
use serde_json::json;

use crate::api::{TestApp, specs};
use crate::eco::raw;
use crate::support::KymoServer;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_database_and_its_journals_are_readable_by_their_owner_only() {
    let server = KymoServer::start(&["--no-worker"]);
    let db = server.db_path();
    // A write makes sure the journals exist.
    server.get_json("/api/v1/repos");
    assert_eq!(mode(&db), 0o600, "kymo.db");
    for suffix in ["-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        let path = std::path::PathBuf::from(name);
        assert_eq!(mode(&path), 0o600, "kymo.db{suffix}");
    }
}

#[tokio::test]
async fn an_older_world_readable_database_is_tightened_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kymo.db");
    drop(kymo_core::db::Db::open(&path).await.unwrap());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let db = kymo_core::db::Db::open(&path).await.unwrap();
    assert_eq!(mode(&path), 0o600);
    db.close().await;
}

const HOSTILE_NAMES: [&str; 5] = [
    "q?x=1",
    "hash#frag",
    "100%25 sure",
    "dots/../../../queue",
    "lead/./x",
];

#[tokio::test]
async fn benchmarks_with_url_syntax_in_their_names_link_to_their_own_pages() {
    let app = TestApp::new().await;
    let (_repo, sha) = app.with_repo().await;
    let benchmarks: Vec<_> = HOSTILE_NAMES
        .iter()
        .map(|name| {
            json!({ "name": name, "metrics": [
            { "name": "time", "unit": "ns", "direction": "lower", "value": 1.0 } ] })
        })
        .collect();
    let upload = json!({ "commit": sha, "specs": specs(),
        "suites": [{ "suite": "s", "results": { "benchmarks": benchmarks } }] });
    let (status, answer) = app.post("/api/v1/repos/r/results", &upload).await;
    assert!(status.is_success(), "{status} {answer}");

    for page in ["/repos/r".to_owned(), format!("/repos/r/commits/{sha}")] {
        let body = raw(&app, &page).await.body;
        let links: Vec<&str> = body
            .split("href=\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .filter(|href| href.contains("/benchmarks/"))
            .collect();
        assert_eq!(links.len(), HOSTILE_NAMES.len(), "{page}: {links:?}");
        let mut reached = Vec::new();
        for link in links {
            assert!(!link.contains(['?', '#', ' ']), "{link}");
            assert!(!link.split('/').any(|part| part == ".."), "{link}");
            let target = raw(&app, link).await;
            assert_eq!(target.status, StatusCode::OK, "{page} links {link}");
            let heading = target.body.split("<h1>").nth(1).unwrap();
            reached.push(heading.split("</h1>").next().unwrap().to_owned());
        }
        reached.sort();
        let mut expected: Vec<String> = HOSTILE_NAMES.iter().map(|n| (*n).to_owned()).collect();
        expected.sort();
        assert_eq!(
            reached, expected,
            "{page}: each link reaches its own benchmark"
        );
    }
}
