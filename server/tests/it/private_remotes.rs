//! Private remotes against a real authenticated git server (`git http-backend` behind basic
//! auth): the right credential clones on the server and on a remote worker, a wrong or missing
//! one fails with a message that says so and holds no secret, and the secret shows nowhere.
//! A remote that accepts and never answers fails `repo add` and jobs within the git timeout.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::git_http::{GitHttpServer, silent_remote};
use crate::support::{
    KymoServer, TestRepo, assert_ok, bench_script, kymo_bin, kymo_toml, worker_token,
};

const TOKEN: &str = "tok-Sup3rSecret-4711";
const WRONG: &str = "tok-Wr0ngGuess-0815";
/// Seconds of silence after which git operations fail in these tests.
const GIT_TIMEOUT: &str = "3";

fn private_repo() -> TestRepo {
    let repo = TestRepo::new();
    let toml = kymo_toml("sh bench.sh", "30s", 1);
    let script = bench_script(5.0);
    repo.commit(
        &[
            ("kymo.toml", &toml),
            ("bench.sh", &script),
            ("src/deep/x.txt", "x"),
        ],
        "first",
    );
    repo
}

/// `kymo serve` without a worker, logging at info level into the returned file.
fn start_server() -> (KymoServer, tempfile::NamedTempFile) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let stderr = log.reopen().unwrap();
    let server = KymoServer::start_with(&["--no-worker"], |command| {
        command
            .env("KYMO_GIT_TIMEOUT", GIT_TIMEOUT)
            .env("RUST_LOG", "info")
            .stderr(stderr);
    });
    (server, log)
}

/// `kymo` with extra environment variables (secrets are passed by variable, as users should).
fn kymo_env(server: &KymoServer, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(kymo_bin());
    command
        .args(args)
        .env("KYMO_SERVER", &server.url)
        .env("KYMO_TOKEN", &server.admin)
        .env("RUST_LOG", "warn");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

/// `kymo repo add priv URL` as user alice with `token`, passed by environment variable.
fn add_with_token(server: &KymoServer, url: &str, token: &str) -> Output {
    let args = [
        "repo",
        "add",
        "priv",
        url,
        "--https-user",
        "alice",
        "--https-token-env",
        "T",
    ];
    kymo_env(server, &args, &[("T", token)])
}

fn failure(output: &Output) -> String {
    assert!(!output.status.success(), "expected a failure");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn spawn_worker(server: &KymoServer, token: &str, cache: &std::path::Path) -> Child {
    Command::new(kymo_bin())
        .args(["worker", "--server", &server.url, "--token", token])
        .arg("--cache-dir")
        .arg(cache)
        .env("KYMO_GIT_TIMEOUT", GIT_TIMEOUT)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Asserts that nothing a reader, an admin or the server's log sees holds a secret.
fn assert_secret_shown_nowhere(server: &KymoServer, log: &std::path::Path, secrets: &[&str]) {
    let log = std::fs::read_to_string(log).unwrap();
    assert!(
        log.contains("repository added"),
        "the log is captured: {log}"
    );
    let mut seen = vec![("the server's log".to_owned(), log)];
    for path in [
        "/",
        "/repos/priv",
        "/repos/inline",
        "/queue",
        "/deliveries",
        "/api/v1/repos",
        "/api/v1/repos/inline",
        "/api/v1/jobs",
    ] {
        seen.push((path.to_owned(), server.get(path).1));
    }
    for args in [
        &["repo", "list"][..],
        &["repo", "list", "--json"],
        &["jobs"],
    ] {
        let out = server.kymo(args);
        seen.push((
            args.join(" "),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
    }
    for (what, text) in seen {
        for secret in secrets {
            assert!(!text.contains(secret), "{what} shows a secret:\n{text}");
        }
    }
}

#[test]
fn private_https_remotes_clone_with_the_right_token_only_and_never_show_it() {
    let repo = private_repo();
    let git = GitHttpServer::start(repo.path(), "alice", TOKEN);
    let url = format!("{}/.git", git.base);
    let (server, log) = start_server();

    let none = failure(&server.kymo(&["repo", "add", "priv", &url]));
    assert!(
        none.contains("asks for a user name and token") && none.contains("kymo repo set"),
        "{none}"
    );
    let wrong = failure(&add_with_token(&server, &url, WRONG));
    assert!(
        wrong.contains("refused the HTTPS token of user alice"),
        "{wrong}"
    );
    assert!(!wrong.contains(WRONG), "{wrong}");
    assert_eq!(
        server.get_json("/api/v1/repos"),
        serde_json::json!([]),
        "nothing stored"
    );
    assert!(git.refused() >= 2);

    assert_ok(&add_with_token(&server, &url, TOKEN));
    // A token written into the URL is moved out of it into the credential.
    let inline = format!(
        "{}/.git",
        git.base.replace("://", &format!("://alice:{TOKEN}@"))
    );
    assert_ok(&server.kymo(&["repo", "add", "inline", &inline]));
    let shown = assert_ok(&server.kymo(&["repo", "set", "inline"]));
    assert!(
        shown.contains("credential: HTTPS token of user alice"),
        "{shown}"
    );
    assert_eq!(server.get_json("/api/v1/repos/inline")["url"], url.as_str());

    // A remote worker receives the credential with the job and clones with it.
    let token = worker_token(&server);
    assert_ok(&server.kymo(&["run", "priv"]));
    let cache = tempfile::tempdir().unwrap();
    let mut worker = spawn_worker(&server, &token, cache.path());
    let jobs = server.wait_for_jobs(1, Duration::from_secs(60));
    let _ = worker.kill();
    let _ = worker.wait();
    assert_eq!(jobs[0]["state"], "succeeded", "{jobs:#?}");

    // A wrong new credential is refused and changes nothing; clearing it makes fetches fail.
    let set = [
        "repo",
        "set",
        "priv",
        "--https-user",
        "alice",
        "--https-token-env",
        "T",
    ];
    let refused = failure(&kymo_env(&server, &set, &[("T", WRONG)]));
    assert!(
        refused.contains("refused the HTTPS token") && !refused.contains(WRONG),
        "{refused}"
    );
    let kept = assert_ok(&server.kymo(&["repo", "set", "priv"]));
    assert!(kept.contains("HTTPS token of user alice"), "{kept}");
    assert_ok(&server.kymo(&["repo", "set", "priv", "--clear-credentials"]));
    let unauthenticated = failure(&server.kymo(&["run", "priv"]));
    assert!(
        unauthenticated.contains("asks for a user name and token"),
        "{unauthenticated}"
    );

    assert_secret_shown_nowhere(&server, log.path(), &[TOKEN, WRONG]);
}

#[test]
fn hostile_credential_input_is_refused_before_anything_is_stored() {
    let repo = private_repo();
    let (server, _log) = start_server();
    let path = repo.path().to_str().unwrap();
    let post = |body: serde_json::Value| {
        ureq::post(format!("{}/api/v1/repos", server.url))
            .config()
            .http_status_as_error(false)
            .build()
            .header("authorization", &format!("Bearer {}", server.admin))
            .send_json(body)
            .unwrap()
            .status()
            .as_u16()
    };
    for credential in [
        serde_json::json!({"kind": "https", "username": "a:b", "token": "t"}),
        serde_json::json!({"kind": "https", "username": "a", "token": "x\ny"}),
        serde_json::json!({"kind": "https", "username": "a", "token": "t".repeat(5000)}),
        serde_json::json!({"kind": "ssh", "key_path": "relative/key"}),
        serde_json::json!({"kind": "ftp", "username": "a"}),
        serde_json::json!({"kind": "https", "username": "a", "token": "t", "extra": 1}),
    ] {
        let status = post(serde_json::json!({"name": "r", "url": path, "credential": credential}));
        assert_eq!(status, 422, "{credential}");
    }
    let both = post(
        serde_json::json!({"name": "r", "url": "https://u:p@example.invalid/r",
        "credential": {"kind": "https", "username": "a", "token": "t"}}),
    );
    assert_eq!(both, 422);
    assert_eq!(server.get_json("/api/v1/repos"), serde_json::json!([]));
    let missing = failure(&server.kymo(&["repo", "set", "nope", "--clear-credentials"]));
    assert!(missing.contains("nope"), "{missing}");
    let anonymous = ureq::get(format!("{}/api/v1/repos/x/settings", server.url))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .unwrap()
        .status()
        .as_u16();
    assert_eq!(anonymous, 401, "settings are for admins");
}

#[test]
fn a_remote_that_never_answers_fails_repo_add_and_jobs_within_the_timeout() {
    let (silent, _listener) = silent_remote();
    let (server, _log) = start_server();
    let started = Instant::now();
    let error = failure(&server.kymo(&["repo", "add", "hang", &format!("{silent}/r.git")]));
    let took = started.elapsed();
    assert!(error.contains("did not answer within 3 s"), "{error}");
    assert!(took < Duration::from_secs(20), "repo add took {took:?}");
    let mirrors = server.dir.path().join("kymo-data").join("mirrors");
    let left: Vec<_> = walk(&mirrors);
    assert!(left.is_empty(), "a partial clone was left: {left:?}");

    // A job whose remote stops answering fails, and the worker goes on.
    let repo = private_repo();
    let git = GitHttpServer::start(repo.path(), "alice", TOKEN);
    let url = format!("{}/.git", git.base);
    assert_ok(&add_with_token(&server, &url, TOKEN));
    assert_ok(&server.kymo(&["run", "priv"]));
    git.hang();
    let token = worker_token(&server);
    let cache = tempfile::tempdir().unwrap();
    let mut worker = spawn_worker(&server, &token, cache.path());
    let jobs = server.wait_for_jobs(1, Duration::from_secs(60));
    let _ = worker.kill();
    let _ = worker.wait();
    let job_error = jobs[0]["error"].as_str().unwrap_or_default();
    assert_eq!(jobs[0]["state"], "failed", "{jobs:#?}");
    assert!(
        job_error.contains("did not answer within 3 s"),
        "{job_error}"
    );
    assert!(!job_error.contains(TOKEN));
    let (status, _) = server.get("/healthz");
    assert_eq!(status, 200);
}

/// Every file and directory under `dir` (none when it does not exist), the clones'
/// directory itself excepted.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == ".partial") {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}
