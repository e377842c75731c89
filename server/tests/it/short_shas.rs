//! Short commit hashes: the API takes the unambiguous prefixes git (and so the CLI) takes,
//! down to 4 digits, and refuses an ambiguous one with the commits it could name.

use std::collections::HashMap;

use axum::http::StatusCode;
use serde_json::json;

use crate::api::TestApp;
use crate::support::TestRepo;

#[tokio::test]
async fn the_api_takes_short_hashes_and_refuses_an_ambiguous_one() {
    // Commit until two commits share their first 4 digits (a few hundred, by the birthday
    // bound of 65,536 prefixes).
    let repo = TestRepo::new();
    let mut by_prefix: HashMap<String, String> = HashMap::new();
    let (first, second) = loop {
        let n = by_prefix.len();
        assert!(n < 20_000, "no two commits share a prefix");
        let sha = repo.commit(&[("file", &n.to_string())], &format!("change {n}"));
        if let Some(other) = by_prefix.insert(sha[..4].to_owned(), sha.clone()) {
            break (other, sha);
        }
    };
    let app = TestApp::new().await;
    let body = json!({ "name": "r", "url": repo.path().to_str().unwrap(), "branch": "main" });
    assert_eq!(
        app.post("/api/v1/repos", &body).await.0,
        StatusCode::CREATED
    );

    // The shortest prefix that is unique names its commit, in any case.
    let common = (first.bytes().zip(second.bytes()))
        .take_while(|(a, b)| a == b)
        .count();
    let unique = common + 1;
    for asked in [
        first[..unique].to_owned(),
        first[..unique].to_ascii_uppercase(),
        first.clone(),
    ] {
        let (status, found) = app.get(&format!("/api/v1/repos/r/commits/{asked}")).await;
        assert_eq!(status, StatusCode::OK, "{asked}: {found}");
        assert_eq!(found["commit"]["sha"], first.as_str());
    }
    let (status, report) = app
        .get(&format!(
            "/api/v1/repos/r/compare?base={}&head={}",
            &first[..unique],
            &second[..unique]
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["head"], second.as_str());

    // Four digits two commits share: a clear refusal naming both.
    let (status, refused) = app
        .get(&format!("/api/v1/repos/r/commits/{}", &first[..4]))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let error = refused["error"].as_str().unwrap();
    assert!(error.contains("ambiguous"), "{error}");
    assert!(
        error.contains(&first[..12]) && error.contains(&second[..12]),
        "{error}"
    );

    // Too short, not hex, or unknown: not found, as before.
    for asked in ["abc", "zzzzzzz", "0000000000000000000000000000000000000000"] {
        let (status, _) = app.get(&format!("/api/v1/repos/r/commits/{asked}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{asked}");
    }
}
