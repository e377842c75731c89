//! `kymo try`: a ref against its merge base, measured interleaved by the embedded worker, with
//! the exit status a CI step or a person at a terminal acts on.

use std::process::Output;

use serde_json::Value;

use crate::support::{KymoServer, TestRepo, assert_ok, kymo_toml};
use crate::webhooks::git;

/// A benchmark whose cost is what `work.txt` says (in thousands of steps, as milliseconds),
/// with up to ±2 % of run-to-run jitter (from the process id, so every run differs). Not a
/// timed loop: on this shared virtual machine the CPU time of the same loop ranged from 410 to
/// 620 ms with nothing else running (other guests share the cores), which no three-round
/// verdict can see a 30 % step through. What these tests check is the path from a pull request
/// or `kymo try` to its verdict, status and comment; the verdict's power on real timings is
/// measured by `scripts/pr-verdict-power.sh`.
pub const WORK_SCRIPT: &str = r#"n=$(cat work.txt)
jitter=$(( ($$ * 7919) % 41 - 20 ))
echo "{\"benchmarks\":[{\"name\":\"loop\",\"metrics\":[{\"name\":\"time\",\"unit\":\"ms\",\"direction\":\"lower\",\"value\":$(( n * (1000 + jitter) / 1000000 ))}]}]}"
"#;

/// Commits `files` on a new branch `name` forked from the current commit, then returns to
/// `main`.
pub fn branch(repo: &TestRepo, name: &str, files: &[(&str, &str)]) -> String {
    git(repo.path(), &["checkout", "--quiet", "-b", name]);
    let sha = repo.commit(files, name);
    git(repo.path(), &["checkout", "--quiet", "main"]);
    // git2 writes files into the work tree; the checkout above put main's back.
    sha
}

/// The tracked repository: `main` does 300,000 steps, branches fork from it, then `main` moves
/// on to 600,000 steps, so that only a comparison with the merge base judges a branch right.
fn repository() -> TestRepo {
    let repo = TestRepo::new();
    repo.commit(
        &[
            ("kymo.toml", &kymo_toml("sh bench.sh", "60s", 3)),
            ("bench.sh", WORK_SCRIPT),
            ("work.txt", "300000\n"),
            ("README.md", "loop\n"),
        ],
        "first",
    );
    branch(&repo, "slower", &[("work.txt", "420000\n")]);
    branch(&repo, "docs", &[("README.md", "loop, documented\n")]);
    branch(&repo, "broken", &[("bench.sh", "exit 3\n")]);
    repo.commit(&[("work.txt", "600000\n")], "main does more work");
    repo
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn comparisons(server: &KymoServer) -> Vec<Value> {
    (server.get_json("/api/v1/repos/app/comparisons"))
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn try_exits_1_on_a_branch_40_percent_slower_than_its_merge_base_and_0_on_a_docs_change() {
    let server = KymoServer::start(&[]);
    let repo = repository();
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));

    let slower = server.kymo(&["try", "app", "slower"]);
    let text = stdout(&slower);
    assert_eq!(
        slower.status.code(),
        Some(1),
        "{text}\n{}",
        String::from_utf8_lossy(&slower.stderr)
    );
    assert!(text.contains("loop"), "{text}");
    assert!(text.contains("regression"), "{text}");
    assert!(text.contains("interleaved"), "{text}");

    let docs = server.kymo(&["try", "app", "docs"]);
    assert_eq!(
        docs.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&docs),
        String::from_utf8_lossy(&docs.stderr)
    );

    // Both were judged against the merge base (300,000 steps), not main's head (600,000),
    // which would have made the slower branch an improvement.
    let listed = comparisons(&server);
    assert_eq!(listed.len(), 2, "{listed:#?}");
    let first = &listed[1];
    let view = server.get_json(&format!(
        "/api/v1/repos/app/comparisons/{}",
        first["id"].as_i64().unwrap()
    ));
    assert_eq!(view["interleaved"], true);
    assert_eq!(view["rounds_run"], 3);
    let row = &view["report"]["rows"][0];
    assert_eq!(row["benchmark"], "loop");
    assert_eq!(row["verdict"]["kind"], "regression", "{view:#}");
    let change = row["verdict"]["change_pct"].as_f64().unwrap();
    assert!(
        (15.0..80.0).contains(&change),
        "{change} % for 40 % more steps"
    );
    // Three repeats per round, three rounds, on each side.
    assert_eq!(row["verdict"]["base_samples"], 9);
    assert_eq!(row["verdict"]["head_samples"], 9);
    assert!(
        view["report"]["baseline"]
            .as_str()
            .unwrap()
            .starts_with("merge-base of main"),
        "{view:#}"
    );

    // The repository page lists both; the comparison's page says how it was measured.
    let (_, page) = server.get("/repos/app");
    assert!(
        page.contains("try slower") && page.contains("try docs"),
        "{page}"
    );
    let (status, page) = server.get(&format!("/repos/app/comparisons/{}", first["id"]));
    assert_eq!(status, 200);
    assert!(page.contains("measured alternately"), "{page}");
    assert!(page.contains("3 rounds ran (adaptive"), "{page}");
    assert!(page.contains("regression"), "{page}");
    let (status, _) = server.get("/repos/app/comparisons/999");
    assert_eq!(status, 404);

    // Nothing measured by a comparison enters the tracked branch's history.
    let series = server.get_json("/api/v1/repos/app/series?benchmark=loop&metric=time");
    assert!(series.as_array().unwrap().is_empty(), "{series:#}");
    let regressions = server.get_json("/api/v1/repos/app/regressions");
    assert!(
        regressions.as_array().unwrap().is_empty(),
        "{regressions:#}"
    );
    let jobs = server.get_json("/api/v1/jobs");
    let reasons: Vec<&str> = (jobs.as_array().unwrap().iter())
        .map(|j| j["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["try", "try"]);
}

#[test]
fn try_exits_2_when_the_run_fails_or_cannot_be_asked_for_and_queues_nothing_for_bad_input() {
    let server = KymoServer::start(&[]);
    let repo = repository();
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));

    let broken = server.kymo(&["try", "app", "broken"]);
    assert_eq!(broken.status.code(), Some(2), "{}", stdout(&broken));
    let stderr = String::from_utf8_lossy(&broken.stderr);
    assert!(
        stderr.contains("failed") && stderr.contains("head"),
        "{stderr}"
    );

    let unknown = server.kymo(&["try", "app", "no-such-branch"]);
    assert_eq!(unknown.status.code(), Some(2));
    for rounds in ["0", "41"] {
        let refused = server.kymo(&["try", "app", "docs", "--rounds", rounds]);
        assert_eq!(refused.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("rounds"),
            "{}",
            String::from_utf8_lossy(&refused.stderr)
        );
    }
    assert_eq!(comparisons(&server).len(), 1);
}
