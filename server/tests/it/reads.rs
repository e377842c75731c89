//! Issue 20, availability: reads never fetch. A compare of an unknown commit answers from the
//! database; branch names resolve through the mirror as it is.

use axum::http::StatusCode;

use crate::api::TestApp;
use crate::support::{bench_script, kymo_toml};

#[tokio::test]
async fn a_compare_of_a_commit_the_server_has_not_fetched_is_404_without_touching_the_remote() {
    let app = TestApp::new().await;
    let (repo, first) = app.with_repo().await;
    let pushed = repo.commit(
        &[
            ("kymo.toml", &kymo_toml("sh bench.sh", "10s", 1)),
            ("bench.sh", &bench_script(2.0)),
        ],
        "pushed, never fetched",
    );
    let api = |base: &str, head: &str| format!("/api/v1/repos/r/compare?base={base}&head={head}");

    // Before this change the server fetched the upstream here and found the commit.
    let (status, answer) = app.get(&api(&first, &pushed)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("not found"),
        "{answer}"
    );
    let (status, _) = app.get(&api(&first, &"0".repeat(40))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app
        .get(&format!("/repos/r/compare/{first}...{pushed}"))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A branch name still resolves, through the mirror as it was last fetched: the remote
    // may be gone.
    std::fs::remove_dir_all(repo.path()).unwrap();
    let (status, answer) = app.get(&api(&first, "main")).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["head"], first.as_str());
    for hostile in ["-main", "no-such-branch", "main%0a", "%2e%2e%2f%2e%2e"] {
        let (status, answer) = app.get(&api(&first, hostile)).await;
        assert!(
            status == StatusCode::NOT_FOUND || status == StatusCode::UNPROCESSABLE_ENTITY,
            "{hostile}: {status} {answer}"
        );
    }
}
