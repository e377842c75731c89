//! The delivery loop as `kymo serve` runs it: started with the server, sending in the
//! background on the real clock, and stopped with it.

use std::time::{Duration, Instant};

use kymo_core::db::LeaseSettings;
use kymo_server::alerts::regressions_found;
use kymo_server::serve::{ServeOptions, start};
use serde_json::{Value, json};

use crate::alerts::upload;
use crate::listener::Listener;
use crate::support::TestRepo;

/// A blocking HTTP call off the runtime; returns the status and the JSON answer.
pub(crate) async fn call(
    method: &'static str,
    url: String,
    body: Value,
    token: &str,
) -> (u16, Value) {
    let bearer = format!("Bearer {token}");
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = match method {
            "GET" => agent.get(&url).header("authorization", &bearer).call(),
            _ => agent
                .post(&url)
                .header("authorization", &bearer)
                .send_json(&body),
        }
        .unwrap();
        let status = response.status().as_u16();
        (
            status,
            response.body_mut().read_json().unwrap_or(Value::Null),
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kymo_serve_delivers_in_the_background_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let running = start(ServeOptions {
        db: dir.path().join("kymo.db"),
        listen: "127.0.0.1:0".parse().unwrap(),
        embedded_worker: false,
        leases: LeaseSettings::default(),
        data_dir: dir.path().join("data"),
        public_url: Some("https://kymo.example/".into()),
        worker_labels: Vec::new(),
        allow_unconfined_suites: false,
        suite_maximums: Default::default(),
        header_read_timeout: kymo_server::serve::HEADER_READ_TIMEOUT,
        merge_when_idle: Some(kymo_server::serve::MERGE_WHEN_IDLE),
        access: Default::default(),
    })
    .await
    .unwrap();
    assert_eq!(&*running.state.public_url, "https://kymo.example");
    let api = format!("http://{}/api/v1", running.address);
    let admin = std::fs::read_to_string(dir.path().join("kymo.db.admin-token")).unwrap();

    let repo = TestRepo::new();
    let shas: Vec<String> = (0..24)
        .map(|i| repo.commit(&[("file", &format!("{i}"))], &format!("change {i}")))
        .collect();
    let body = json!({ "name": "r", "url": repo.path().to_str().unwrap() });
    assert_eq!(
        call("POST", format!("{api}/repos"), body, &admin).await.0,
        201
    );
    for (i, sha) in shas.iter().enumerate() {
        let (status, answer) = call(
            "POST",
            format!("{api}/repos/r/results"),
            upload(sha, i),
            &admin,
        )
        .await;
        assert_eq!(status, 201, "{answer}");
    }
    let hook = Listener::answering(&[200]);
    let channel = json!({ "url": format!("{}/hook", hook.url), "kind": "json" });
    assert_eq!(
        call("POST", format!("{api}/repos/r/alerts"), channel, &admin)
            .await
            .0,
        201
    );
    let (_, found) = call(
        "GET",
        format!("{api}/repos/r/regressions"),
        Value::Null,
        &admin,
    )
    .await;
    let ids: Vec<i64> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();

    regressions_found(&running.state, &ids).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while hook.received().is_empty() {
        assert!(Instant::now() < deadline, "the loop delivered nothing");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let alert = hook.received()[0].json();
    assert_eq!(alert["repository"], "r");
    assert!(
        alert["regression_url"]
            .as_str()
            .unwrap()
            .starts_with("https://kymo.example/repos/r/regressions/")
    );
    tokio::time::timeout(Duration::from_secs(30), running.stop())
        .await
        .expect("the server and its delivery loop stop")
        .unwrap();
    assert_eq!(hook.received().len(), 1);
}
