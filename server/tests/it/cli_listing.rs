//! The command line for people and scripts: listings as tables or `--json`, shell
//! completions, no progress drawing when output is not a terminal, and errors that say the fix.

use std::process::Command;

use serde_json::Value;

use crate::support::{KymoServer, TestRepo, assert_ok, kymo_bin};

#[test]
fn listings_print_tables_or_json_and_uploads_stay_quiet_in_pipes() {
    let repo = TestRepo::new();
    let sha = repo.commit(&[("README", "hello")], "first");
    let server = KymoServer::start(&["--no-worker"]);
    assert_ok(&server.kymo(&["repo", "add", "ci", repo.path().to_str().unwrap()]));

    let results = tempfile::tempdir().unwrap();
    for name in ["a", "b", "c"] {
        let doc = format!(
            r#"{{"benchmarks":[{{"name":"{name}","metrics":[{{"name":"time","unit":"ns","direction":"lower","value":1}}]}}]}}"#
        );
        std::fs::write(results.path().join(format!("{name}.json")), doc).unwrap();
    }
    let dir = results.path().to_str().unwrap();
    let upload = server.kymo(&["upload", "--repo", "ci", "--commit", &sha, dir]);
    assert!(assert_ok(&upload).contains("stored 3 measurements"));
    let stderr = String::from_utf8_lossy(&upload.stderr);
    assert!(
        !stderr.contains('\r') && !stderr.contains("parsing"),
        "{stderr:?}"
    );

    assert_ok(&server.kymo(&["run", "ci"]));
    let jobs: Value = serde_json::from_str(&assert_ok(&server.kymo(&["jobs", "--json"]))).unwrap();
    assert_eq!(jobs.as_array().unwrap().len(), 1, "{jobs}");
    assert_eq!(jobs[0]["state"], "queued");
    assert_eq!(jobs[0]["sha"], sha.as_str());
    let table = assert_ok(&server.kymo(&["jobs"]));
    assert!(table.starts_with("    ID STATE"), "{table}");
    assert!(table.contains(&sha[..10]), "{table}");

    let machines: Value =
        serde_json::from_str(&assert_ok(&server.kymo(&["machines", "--json"]))).unwrap();
    assert_eq!(machines.as_array().unwrap().len(), 1, "{machines}");
    let fingerprint = machines[0]["fingerprint"].as_str().unwrap();
    let table = assert_ok(&server.kymo(&["machines"]));
    assert!(table.contains(fingerprint), "{table}");

    let repos = assert_ok(&server.kymo(&["repo", "list"]));
    assert!(repos.starts_with("NAME"), "{repos}");

    let unknown = server.kymo(&["run", "nope"]);
    assert!(!unknown.status.success());
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(stderr.contains("`kymo repo list` shows"), "{stderr}");
}

#[test]
fn completions_cover_every_subcommand_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(kymo_bin())
            .args(["completions", shell])
            .output()
            .unwrap();
        let script = assert_ok(&out);
        for sub in [
            "serve",
            "upload",
            "compare",
            "jobs",
            "machines",
            "completions",
        ] {
            assert!(script.contains(sub), "{shell} lacks {sub}");
        }
    }
    let out = Command::new(kymo_bin())
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"));
}

#[test]
fn an_unreachable_server_is_reported_with_the_fix() {
    // A port nothing listens on: bind one, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(kymo_bin())
        .args(["jobs", "--server", &format!("http://127.0.0.1:{port}")])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot reach the server"), "{stderr}");
    assert!(
        stderr.contains("is `kymo serve` running there?"),
        "{stderr}"
    );
    assert!(stderr.contains("--server URL"), "{stderr}");
}
