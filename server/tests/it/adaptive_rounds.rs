//! Adaptive comparisons: `kymo try` measures rounds until every benchmark is decided or its
//! budget is spent, says `inconclusive` (never `unchanged`) for what it could not decide, and
//! states the change each verdict could have seen.

use std::process::Output;

use serde_json::{Value, json};

use crate::continuous::post;
use crate::support::{KymoServer, TestRepo, assert_ok, kymo_toml};
use crate::try_runs::{WORK_SCRIPT, branch};

/// A benchmark whose value is `work.txt`'s steps as microseconds with ±10 % of random jitter
/// per run, taking a quarter of a second of wall time: a 1 % change cannot be told from such
/// runs in the few rounds a 10-second budget holds (wall time only: no instruction counts).
/// The jitter comes from /dev/urandom, not from the process id: ids taken one after another
/// would give base and head the same offset round after round, noise that is not noise.
const LOUD_SCRIPT: &str = r#"n=$(cat work.txt)
sleep 0.25
jitter=$(( $(od -An -N2 -tu2 /dev/urandom) % 201 - 100 ))
echo "{\"benchmarks\":[{\"name\":\"loop\",\"metrics\":[{\"name\":\"time\",\"unit\":\"us\",\"direction\":\"lower\",\"value\":$(( n * (1000 + jitter) / 1000 ))}]}]}"
"#;

/// `main` at 300,000 steps; `slower` 40 % more work, `docs` the same code, `one-percent` 1 %
/// more work under the loud script.
fn repository() -> TestRepo {
    let repo = TestRepo::new();
    repo.commit(
        &[
            ("kymo.toml", &kymo_toml("sh bench.sh", "60s", 3)),
            ("bench.sh", WORK_SCRIPT),
            ("loud.sh", LOUD_SCRIPT),
            ("work.txt", "300000\n"),
            ("README.md", "loop\n"),
        ],
        "first",
    );
    branch(&repo, "slower", &[("work.txt", "420000\n")]);
    branch(&repo, "docs", &[("README.md", "loop, documented\n")]);
    branch(
        &repo,
        "loud",
        &[("kymo.toml", &kymo_toml("sh loud.sh", "60s", 3))],
    );
    repo
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The comparison `kymo try` printed last, through the API.
fn latest_view(server: &KymoServer) -> Value {
    let listed = server.get_json("/api/v1/repos/app/comparisons");
    let id = listed[0]["id"].as_i64().unwrap();
    server.get_json(&format!("/api/v1/repos/app/comparisons/{id}"))
}

#[test]
fn a_clear_slowdown_stops_at_the_first_look_and_the_same_code_is_unchanged_with_its_power() {
    let server = KymoServer::start(&[]);
    let repo = repository();
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));

    let slower = server.kymo(&["try", "app", "slower"]);
    assert_eq!(slower.status.code(), Some(1), "{}", stdout(&slower));
    let view = latest_view(&server);
    assert_eq!(view["comparison"]["budget_seconds"], 600, "{view:#}");
    assert_eq!(view["comparison"]["rounds"], 40, "{view:#}");
    // Decided at the first look: 3 rounds of the 40 the budget allowed.
    assert_eq!(view["rounds_run"], 3, "{view:#}");
    let verdict = &view["report"]["rows"][0]["verdict"];
    assert_eq!(verdict["kind"], "regression", "{view:#}");
    assert!(verdict["detectable_pct"].as_f64().is_some(), "{view:#}");
    assert!(stdout(&slower).contains("adaptive"), "{}", stdout(&slower));

    let docs = server.kymo(&["try", "app", "docs", "--all"]);
    let text = stdout(&docs);
    assert_eq!(docs.status.code(), Some(0), "{text}");
    let view = latest_view(&server);
    let verdict = &view["report"]["rows"][0]["verdict"];
    assert_eq!(verdict["kind"], "no_change", "{view:#}");
    let power = verdict["detectable_pct"].as_f64().unwrap();
    assert!(power > 0.0 && power < 5.0, "{view:#}");
    assert!(
        view["rounds_run"].as_i64().unwrap() < 20,
        "equivalence decided before the most rounds: {view:#}"
    );
    assert!(
        text.contains("unchanged: each of the 1 unchanged rows would have shown a change above"),
        "{text}"
    );
    assert!(text.contains(&format!("≥{power:.1}%")), "{text}");
    // The page says what the verdict could have seen.
    let id = view["comparison"]["id"].as_i64().unwrap();
    let (_, page) = server.get(&format!("/repos/app/comparisons/{id}"));
    assert!(
        page.contains("Could see") && page.contains("adaptive"),
        "{page}"
    );
    assert!(page.contains(&format!("≥ {power:.1} %")), "{page}");
}

#[test]
fn a_one_percent_change_in_loud_wall_time_runs_to_its_budget_and_is_inconclusive_with_its_power() {
    let server = KymoServer::start(&[]);
    let repo = repository();
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));
    // The loud branch's head does 1 % more work than its own base.
    git_branch_off(&repo, "loud", "loud-1pc", &[("work.txt", "303000\n")]);

    let started = std::time::Instant::now();
    let loud = server.kymo(&[
        "try", "app", "loud-1pc", "--base", "loud", "--budget", "10s",
    ]);
    let text = stdout(&loud);
    assert_eq!(loud.status.code(), Some(0), "{text}");
    let view = latest_view(&server);
    let rounds = view["rounds_run"].as_i64().unwrap();
    assert!(
        (2..20).contains(&rounds),
        "the budget, not the most rounds, ended it: {view:#}"
    );
    let verdict = &view["report"]["rows"][0]["verdict"];
    assert_eq!(verdict["kind"], "inconclusive", "{view:#}");
    let power = verdict["detectable_pct"].as_f64().unwrap();
    assert!(power > 1.0, "a 1 % change was beyond its reach: {view:#}");
    let note = verdict["note"].as_str().unwrap();
    assert!(note.starts_with("undecided after"), "{note}");
    assert!(note.contains(&format!("{power:.1} %")), "{note}");
    assert!(
        text.contains("inconclusive") && text.contains(&format!("≥{power:.1}%")),
        "{text}"
    );
    // Its log says why it stopped; the whole run kept to its budget (builds and polling aside).
    let listed = server.get_json("/api/v1/jobs");
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["state"] == "succeeded")
    );
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}

#[test]
fn a_budget_shorter_than_two_rounds_still_gets_the_first_look() {
    let server = KymoServer::start(&[]);
    let repo = repository();
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));
    // A suite that takes 3 s a side: two rounds (12 s) spend the whole 10-second budget.
    let slow = kymo_toml("sleep 3; sh bench.sh", "60s", 1);
    git_branch_off(&repo, "main", "slow", &[("kymo.toml", &slow)]);
    git_branch_off(&repo, "slow", "slow-40pc", &[("work.txt", "420000\n")]);

    let args = [
        "try",
        "app",
        "slow-40pc",
        "--base",
        "slow",
        "--budget",
        "10s",
    ];
    let run = server.kymo(&args);
    let view = latest_view(&server);
    // Cut at two rounds, before the first look, it is judged on one degree of freedom.
    assert_eq!(view["rounds_run"], 3, "{view:#}");
    assert_eq!(
        view["report"]["rows"][0]["verdict"]["kind"], "regression",
        "{view:#}"
    );
    assert_eq!(run.status.code(), Some(1), "{}", stdout(&run));
}

#[test]
fn budgets_outside_their_range_are_refused_and_queue_nothing() {
    let server = KymoServer::start(&[]);
    let repo = repository();
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));
    for budget in ["5s", "0", "25h", "soon", "-3"] {
        let refused = server.kymo(&["try", "app", "docs", "--budget", budget]);
        assert_eq!(refused.status.code(), Some(2), "{budget}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            stderr.contains("budget") || stderr.contains(budget),
            "{budget}: {stderr}"
        );
    }
    for budget in [json!(9), json!(86_401), json!("ten"), json!(-1)] {
        let body = json!({"commit": "docs", "budget_seconds": budget});
        let (status, answer) = post(&server, "/api/v1/repos/app/try", &body);
        assert_eq!(status, 422, "{body}: {answer}");
    }
    let (status, _) = post(
        &server,
        "/api/v1/repos/app/settings",
        &json!({"budget_seconds": 0}),
    );
    assert_eq!(status, 422);
    let listed = server.get_json("/api/v1/repos/app/comparisons");
    assert!(listed.as_array().unwrap().is_empty(), "{listed:#}");
    // The repository's budget: set, shown, and refused out of range (nothing changes).
    assert_ok(&server.kymo(&["repo", "set", "app", "--budget", "2m"]));
    let shown = assert_ok(&server.kymo(&["repo", "set", "app"]));
    assert!(shown.contains("comparison budget: 120 s"), "{shown}");
    let refused = server.kymo(&["repo", "set", "app", "--budget", "3s"]);
    assert_ne!(refused.status.code(), Some(0));
    let shown = assert_ok(&server.kymo(&["repo", "set", "app"]));
    assert!(shown.contains("comparison budget: 120 s"), "{shown}");
}

/// Commits `files` on a new branch `name` forked from `from`, then returns to `main`.
fn git_branch_off(repo: &TestRepo, from: &str, name: &str, files: &[(&str, &str)]) {
    crate::webhooks::git(repo.path(), &["checkout", "--quiet", from]);
    branch(repo, name, files);
}
