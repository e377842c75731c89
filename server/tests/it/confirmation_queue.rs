//! Confirmations in the queue: every finding at one commit shares one re-measurement that runs
//! only the benchmark it needs (a suite that filters by pattern is told which), history keeps
//! moving while confirmations wait (they take turns), and a finding that moves to another
//! commit gives its re-measurement's place up.

use kymo_core::stats::confirmation::{CONFIRMATION_BUDGET_SECONDS, CONFIRMATION_ROUNDS};
use kymo_worker::{Tick, Worker};
use serde_json::{Value, json};

use crate::api::TestApp;
use crate::continuous::{post, run_until_empty, samples_at, specs, worker};
use crate::out_of_order::{change_at, flat_history};
use crate::support::{KymoServer, TestRepo, assert_ok, kymo_toml};

/// A suite of benchmarks `b0`, `b1`, ... each printing the time samples in `bN.txt` and, for
/// `b0`, the matching throughput; a benchmark left out by `$KYMO_BENCH_FILTER` (an extended
/// regular expression of the names wanted) is not run.
const FILTERING_SUITE: &str = r#"out=""
for f in b*.txt; do
  name=${f%.txt}
  if [ -n "$KYMO_BENCH_FILTER" ] && ! echo "$name" | grep -Eq "$KYMO_BENCH_FILTER"; then continue; fi
  s=$(cat "$f")
  m="{\"name\":\"time\",\"unit\":\"ns\",\"direction\":\"lower\",\"samples\":[$s]}"
  if [ "$name" = b0 ]; then
    t=$(echo "$s" | awk -F, '{for (i = 1; i <= NF; i++) printf "%s%s", (i > 1 ? "," : ""), 1e9 / $i}')
    m="$m,{\"name\":\"throughput\",\"unit\":\"op/s\",\"direction\":\"higher\",\"samples\":[$t]}"
  fi
  out="$out${out:+,}{\"name\":\"$name\",\"metrics\":[$m]}"
  echo "$name" >> "$HOME/ran.txt"
done
echo "{\"benchmarks\":[$out]}"
"#;

/// Commits whose benchmark `bN` is at `levels(i)[N]` at commit `i`; their shas, oldest first.
fn history(repo: &TestRepo, commits: usize, levels: impl Fn(usize) -> Vec<f64>) -> Vec<String> {
    (0..commits)
        .map(|i| {
            let mut files = vec![
                ("kymo.toml".to_owned(), kymo_toml("sh bench.sh", "30s", 1)),
                ("bench.sh".to_owned(), FILTERING_SUITE.to_owned()),
                ("NOTES.md".to_owned(), format!("step {i}")),
            ];
            for (n, level) in levels(i).into_iter().enumerate() {
                files.push((format!("b{n}.txt"), samples_at(level, i)));
            }
            let files: Vec<(&str, &str)> = files
                .iter()
                .map(|(n, c)| (n.as_str(), c.as_str()))
                .collect();
            repo.commit(&files, &format!("change {i}"))
        })
        .collect()
}

/// A server without an embedded worker, the repository `app`, and one in-process worker.
fn setup(repo: &TestRepo, cpu: &str) -> (KymoServer, Worker, tempfile::TempDir) {
    let server = KymoServer::start(&["--no-worker"]);
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));
    let cache = tempfile::tempdir().unwrap();
    let machine = worker(&server, cpu, &[], cache.path());
    assert_eq!(machine.work_once().unwrap(), Tick::QueueEmpty);
    (server, machine, cache)
}

fn jobs(server: &KymoServer) -> Vec<Value> {
    server.get_json("/api/v1/jobs").as_array().unwrap().clone()
}

fn reason_of(server: &KymoServer, job: i64) -> String {
    let all = jobs(server);
    let job = all.iter().find(|j| j["id"] == job).unwrap();
    job["reason"].as_str().unwrap().to_owned()
}

#[test]
fn time_and_throughput_found_at_one_commit_share_one_confirmation_that_runs_only_that_benchmark() {
    let repo = TestRepo::new();
    // `b0` gets 30 % slower at commit 12 (its time and its throughput change); `b1` does not.
    let shas = history(&repo, 20, |i| {
        vec![if i >= 12 { 130.0 } else { 100.0 }, 50.0]
    });
    let (server, machine, cache) = setup(&repo, "Sharing CPU");
    for sha in &shas {
        let (status, _) = post(&server, "/api/v1/repos/app/runs", &json!({ "commit": sha }));
        assert_eq!(status, 202);
    }
    for _ in &shas {
        assert!(matches!(
            machine.work_once().unwrap(),
            Tick::Ran {
                succeeded: true,
                ..
            }
        ));
    }
    let found = server.get_json("/api/v1/repos/app/regressions");
    let found = found.as_array().unwrap();
    let metrics: Vec<&str> = found
        .iter()
        .map(|r| r["metric"].as_str().unwrap())
        .collect();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        metrics.contains(&"time") && metrics.contains(&"throughput"),
        "{metrics:?}"
    );
    assert!(
        found.iter().all(|r| r["sha"] == shas[12].as_str()),
        "{found:#?}"
    );
    let confirms = jobs(&server)
        .iter()
        .filter(|j| j["reason"] == "confirm")
        .count();
    assert_eq!(confirms, 1, "one re-measurement for both findings");

    // The suite's home is the repository's (named after its mirror) and kept across jobs.
    let ran_file = cache.path().join("Sharing CPU/homes/app.git/ran.txt");
    let ran_before = std::fs::read_to_string(&ran_file).unwrap();
    assert_eq!(run_until_empty(&machine), 1);
    let mut comparisons = Vec::new();
    for r in found {
        let path = format!("/api/v1/repos/app/regressions/{}/confirmation", r["id"]);
        let confirmation = server.get_json(&path);
        assert_eq!(confirmation["state"], "confirmed", "{confirmation:#}");
        comparisons.push(confirmation["comparison_id"].as_i64().unwrap());
    }
    assert_eq!(comparisons[0], comparisons[1], "the same comparison");
    let view = server.get_json(&format!("/api/v1/repos/app/comparisons/{}", comparisons[0]));
    assert_eq!(view["comparison"]["origin"], "confirm");
    assert_eq!(
        view["comparison"]["budget_seconds"],
        CONFIRMATION_BUDGET_SECONDS
    );
    assert_eq!(view["comparison"]["rounds"], CONFIRMATION_ROUNDS);
    let rows: Vec<&str> = (view["report"]["rows"].as_array().unwrap().iter())
        .map(|r| r["benchmark"].as_str().unwrap())
        .collect();
    assert_eq!(rows, ["b0", "b0"], "{view:#}");
    // The suite itself ran only `b0` in the re-measurement: told by KYMO_BENCH_FILTER.
    let ran = std::fs::read_to_string(&ran_file).unwrap();
    let during = &ran[ran_before.len()..];
    assert!(
        during.lines().count() >= 6,
        "three rounds, both sides: {during}"
    );
    assert!(during.lines().all(|l| l == "b0"), "{during}");
}

#[test]
fn a_backfill_takes_turns_with_waiting_confirmations_instead_of_waiting_for_all_of_them() {
    let repo = TestRepo::new();
    // Three benchmarks step up 30 % at commits 8, 11 and 14; 40 commits in all.
    let step = |i: usize, at: usize| if i >= at { 130.0 } else { 100.0 };
    let shas = history(&repo, 40, |i| vec![step(i, 8), step(i, 11), step(i, 14)]);
    let cpu = "Fair CPU";
    let (server, machine, _cache) = setup(&repo, cpu);
    // The first 20 commits' results, uploaded from this machine: three changes to confirm.
    let machine_specs = serde_json::to_value(specs(cpu)).unwrap();
    for (i, sha) in shas.iter().take(20).enumerate() {
        let benchmarks: Vec<Value> = [step(i, 8), step(i, 11), step(i, 14)]
            .iter()
            .enumerate()
            .map(|(n, level)| {
                let samples: Vec<f64> = (samples_at(*level, i).split(','))
                    .map(|v| v.parse().unwrap())
                    .collect();
                json!({ "name": format!("b{n}"), "metrics": [{ "name": "time", "unit": "ns",
                    "direction": "lower", "value": samples[2], "samples": samples }] })
            })
            .collect();
        let body = json!({ "commit": sha, "specs": machine_specs, "suites": [{ "suite": "demo",
            "results": { "benchmarks": benchmarks } }] });
        let (status, answer) = post(&server, "/api/v1/repos/app/results", &body);
        assert_eq!(status, 201, "{answer}");
    }
    let waiting = jobs(&server)
        .iter()
        .filter(|j| j["reason"] == "confirm")
        .count();
    assert_eq!(waiting, 3, "{:#?}", jobs(&server));
    // Now the history of the 20 newer commits is asked for: ranked below confirmations.
    assert_ok(&server.kymo(&["run", "app", "--last", "20"]));

    let mut order = Vec::new();
    while let Tick::Ran { job, succeeded } = machine.work_once().unwrap() {
        assert!(succeeded);
        order.push(reason_of(&server, job));
    }
    assert_eq!(order.len(), 23, "{order:?}");
    let confirms: Vec<usize> = (order.iter().enumerate())
        .filter(|(_, r)| *r == "confirm")
        .map(|(i, _)| i)
        .collect();
    // Every confirmation is followed by history while history waits: the backfill is delayed
    // by one confirmation per history job at most, never by all three at once.
    assert_eq!(confirms, [0, 2, 4], "{order:?}");
    assert!(
        order.iter().filter(|r| *r == "history").count() == 20,
        "{order:?}"
    );
}

#[tokio::test]
async fn a_confirmation_whose_finding_moved_to_another_commit_is_cancelled_and_labelled_a_confirmation()
 {
    let app = TestApp::new().await;
    let (_repo, series, commits) = flat_history(&app).await;
    let db = &app.state.db;
    let at = |i: usize| kymo_core::db::FoundChange {
        previous_id: Some(commits[i - 1].0),
        ..change_at(commits[i].0, commits[i].1)
    };
    let ids = db.record_changes(series, &[at(3)], 0).await.unwrap();
    let target = db.confirmation_target(ids[0]).await.unwrap().unwrap();
    let (comparison, measured) = db
        .start_confirmation(&target, commits[2].0, 9, 300, "", app.state.leases, 10)
        .await
        .unwrap();
    assert!(!measured);
    let (_, queued) = app.get("/api/v1/jobs").await;
    assert_eq!(queued[0]["state"], "queued", "{queued:#}");
    assert_eq!(queued[0]["reason"], "confirm");

    // The analysis moves the finding one commit earlier: its old re-measurement is cancelled.
    let moved = db.record_changes(series, &[at(2)], 20).await.unwrap();
    assert_eq!(moved, ids, "the same finding, news at its new commit");
    let (_, listed) = app.get("/api/v1/jobs").await;
    let job = &listed[0];
    assert_eq!(job["state"], "cancelled", "{listed:#}");
    assert!(
        job["error"]
            .as_str()
            .unwrap()
            .contains("moved to another commit"),
        "{job:#}"
    );
    let (_, comparisons) = app.get("/api/v1/repos/r/comparisons").await;
    let listed = &comparisons[0];
    assert_eq!(listed["id"], comparison);
    assert_eq!(listed["origin"], "confirm", "not a try run: {listed:#}");
    assert_eq!(listed["state"], "cancelled");
}
