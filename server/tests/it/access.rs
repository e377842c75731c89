//! Access: public reading, admin-only changes, scoped tokens, sessions with anti-forgery
//! checks, a private mode, the CLI's local admin token, and rate limits on failures.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{KymoServer, TestRepo, assert_ok, bench_script, kymo_bin, kymo_toml};

fn call(
    server: &KymoServer,
    method: &str,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let agent = ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .build()
        .new_agent();
    let url = format!("{}{path}", server.url);
    let mut request = match method {
        "GET" => agent.get(&url).force_send_body(),
        _ => agent.post(&url),
    };
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request.content_type("application/json").send("{}").unwrap();
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_to_string().unwrap_or_default(),
    )
}

fn token(server: &KymoServer, scope: &str, name: &str) -> String {
    let out = assert_ok(&server.kymo(&[
        "token",
        "create",
        &format!("--{scope}"),
        name,
        "--db",
        server.db_path().to_str().unwrap(),
    ]));
    out.trim().to_owned()
}

fn tracked(server: &KymoServer) -> TestRepo {
    let repo = TestRepo::new();
    repo.commit(
        &[
            ("kymo.toml", &kymo_toml("sh bench.sh", "10s", 1)),
            ("bench.sh", &bench_script(1.0)),
        ],
        "first",
    );
    assert_ok(&server.kymo(&["repo", "add", "app", repo.path().to_str().unwrap()]));
    repo
}

#[test]
fn changes_need_an_admin_token_and_each_scope_does_only_its_job() {
    let server = KymoServer::start(&["--no-worker"]);
    let _repo = tracked(&server);
    let worker = token(&server, "worker", "w1");
    let upload = token(&server, "upload", "ci");

    let (status, _) = call(&server, "POST", "/api/v1/repos/app/runs", None, &[]);
    assert_eq!(status, 401, "anonymous");
    let (status, body) = call(
        &server,
        "POST",
        "/api/v1/repos/app/runs",
        Some(&worker),
        &[],
    );
    assert_eq!(status, 403, "a worker token: {body}");
    assert!(body.contains("admin token"), "{body}");
    let (status, _) = call(
        &server,
        "POST",
        "/api/v1/repos/app/runs",
        Some(&upload),
        &[],
    );
    assert_eq!(status, 403, "an upload token");
    let (status, _) = call(
        &server,
        "POST",
        "/api/v1/repos/app/runs",
        Some("kymo_forged"),
        &[],
    );
    assert_eq!(status, 401, "a token that does not exist");
    let (status, _) = call(
        &server,
        "POST",
        "/api/v1/repos/app/runs",
        Some(&server.admin),
        &[],
    );
    assert_eq!(status, 202);
    assert_eq!(server.get_json("/api/v1/jobs").as_array().unwrap().len(), 1);

    // Reading is public; uploads take an upload (or admin) token, not a worker's.
    assert_eq!(server.get("/api/v1/repos").0, 200);
    assert_eq!(server.get("/repos/app").0, 200);
    let (status, _) = call(
        &server,
        "POST",
        "/api/v1/repos/app/results",
        Some(&worker),
        &[],
    );
    assert_eq!(status, 403);
    let (status, _) = call(
        &server,
        "POST",
        "/api/v1/repos/app/results",
        Some(&upload),
        &[],
    );
    assert_eq!(status, 422, "an upload token gets as far as the body check");

    // Tokens are listed with their last use, and a revoked one stops working.
    let listed = assert_ok(&server.kymo(&[
        "token",
        "list",
        "--json",
        "--db",
        server.db_path().to_str().unwrap(),
    ]));
    let listed: Vec<Value> = serde_json::from_str(&listed).unwrap();
    let ci = listed.iter().find(|t| t["name"] == "ci").unwrap();
    assert_eq!(ci["scope"], "upload");
    assert!(ci["last_used_at"].is_i64(), "{ci}");
    assert!(
        !listed.iter().any(|t| t.to_string().contains(&upload)),
        "secrets are never listed"
    );
    let id = ci["id"].to_string();
    assert_ok(&server.kymo(&[
        "token",
        "revoke",
        &id,
        "--db",
        server.db_path().to_str().unwrap(),
    ]));
    let (status, _) = call(
        &server,
        "POST",
        "/api/v1/repos/app/results",
        Some(&upload),
        &[],
    );
    assert_eq!(status, 401);
}

#[test]
fn a_browser_session_needs_its_anti_forgery_token_and_ends_at_logout() {
    let server = KymoServer::start(&["--no-worker"]);
    let _repo = tracked(&server);
    let session = server.login();
    let login_page = session.get("/login");
    assert!(
        login_page.contains("local-admin") && login_page.contains("Log out"),
        "{login_page}"
    );
    let csrf = login_page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();

    // A session alone does not make a JSON request: it needs the token from the page.
    let cookie = [
        ("cookie", session.cookie()),
        ("origin", server.url.as_str()),
    ];
    let (status, _) = call(&server, "POST", "/api/v1/repos/app/runs", None, &cookie);
    assert_eq!(status, 403);
    let with_csrf = [cookie[0], cookie[1], ("x-csrf-token", csrf.as_str())];
    let (status, _) = call(&server, "POST", "/api/v1/repos/app/runs", None, &with_csrf);
    assert_eq!(status, 202);
    // The same request from another site is refused, token or not.
    let cross = [
        cookie[0],
        ("origin", "https://evil.example"),
        ("x-csrf-token", csrf.as_str()),
    ];
    let (status, _) = call(&server, "POST", "/api/v1/repos/app/runs", None, &cross);
    assert_eq!(status, 403);

    assert_eq!(session.post_form("/logout", "csrf=wrong"), 403);
    assert_eq!(session.post_form("/logout", &format!("csrf={csrf}")), 303);
    let (status, _) = call(&server, "POST", "/api/v1/repos/app/runs", None, &with_csrf);
    assert_eq!(status, 401, "the session ended");
}

#[test]
fn the_session_cookie_is_http_only_and_strict_and_failed_logins_are_limited() {
    let server = KymoServer::start(&["--no-worker", "--secure-cookies"]);
    let agent = ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .build()
        .new_agent();
    let login = |token: &str| {
        agent
            .post(format!("{}/login", server.url))
            .header("origin", &server.url)
            .send_form([("token", token), ("next", "//evil.example")])
            .unwrap()
    };
    let good = login(&server.admin);
    assert_eq!(good.status().as_u16(), 303);
    assert_eq!(
        good.headers()["location"],
        "/",
        "only local paths are followed"
    );
    let cookie = good.headers()["set-cookie"].to_str().unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Secure", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let cross_site = agent
        .post(format!("{}/login", server.url))
        .header("origin", "https://evil.example")
        .send_form([("token", server.admin.as_str())])
        .unwrap();
    assert_eq!(cross_site.status().as_u16(), 403);

    let statuses: Vec<u16> = (0..12)
        .map(|_| login("kymo_wrong").status().as_u16())
        .collect();
    assert_eq!(&statuses[..10], &[401; 10]);
    assert_eq!(statuses[11], 429, "{statuses:?}");
    // A live token is never locked out with the address it shares (issue 20): guessing
    // 32 random bytes is hopeless anyway, and 127.0.0.1 is also the embedded worker.
    assert_eq!(
        login(&server.admin).status().as_u16(),
        303,
        "the right token logs in from a locked address"
    );
    assert_eq!(
        login("kymo_wrong").status().as_u16(),
        429,
        "wrong ones stay locked"
    );
}

#[test]
fn a_private_server_shows_nothing_without_a_login() {
    let server = KymoServer::start(&["--no-worker", "--private"]);
    let _repo = tracked(&server);
    let (status, _) = call(&server, "GET", "/", None, &[]);
    assert_eq!(status, 303);
    let (status, _) = call(&server, "GET", "/api/v1/repos", None, &[]);
    assert_eq!(status, 401);
    assert_eq!(server.get("/healthz").0, 200);
    assert_eq!(server.get("/login").0, 200);
    let (status, body) = call(&server, "GET", "/api/v1/repos", Some(&server.admin), &[]);
    assert_eq!(status, 200, "{body}");
    assert!(server.login().get("/").contains("app"));
}

#[test]
fn the_cli_on_the_servers_machine_finds_the_admin_token_and_elsewhere_needs_one() {
    let server = KymoServer::start(&["--no-worker"]);
    let _repo = tracked(&server);
    let mode = std::fs::metadata(server.dir.path().join("kymo.db.admin-token")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    // No token given: the one beside the database (KYMO_DB) is used.
    let output = Command::new(kymo_bin())
        .args(["run", "app"])
        .env("KYMO_SERVER", &server.url)
        .env("KYMO_DB", server.db_path())
        .env_remove("KYMO_TOKEN")
        .output()
        .unwrap();
    assert_ok(&output);
    // Without it, the CLI says what is missing.
    let output = Command::new(kymo_bin())
        .args(["run", "app"])
        .env("KYMO_SERVER", &server.url)
        .env("KYMO_DB", server.dir.path().join("elsewhere.db"))
        .env("XDG_CONFIG_HOME", server.dir.path().join("another-user"))
        .env_remove("KYMO_TOKEN")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("token"), "{stderr}");
}

/// A `kymo` command run in `dir` against `url`, with no token given and `config` as its
/// user's config directory.
fn cli_in(dir: &Path, url: &str, config: &Path, args: &[&str]) -> std::process::Output {
    Command::new(kymo_bin())
        .args(args)
        .current_dir(dir)
        .env("KYMO_SERVER", url)
        .env("XDG_CONFIG_HOME", config)
        .env_remove("KYMO_TOKEN")
        .env_remove("KYMO_DB")
        .output()
        .unwrap()
}

#[test]
fn admin_commands_from_another_directory_find_the_token_of_the_server_this_user_started() {
    let mut server = KymoServer::start(&["--no-worker"]);
    let _repo = tracked(&server);
    // `kymo serve` recorded where its token is, for this user only, and not the token itself.
    let record = server.config_dir().join("kymo").join("servers.json");
    let mode = std::fs::metadata(&record).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    let text = std::fs::read_to_string(&record).unwrap();
    assert!(
        text.contains(&server.url) && text.contains("kymo.db.admin-token"),
        "{text}"
    );
    assert!(!text.contains(&server.admin), "{text}");

    let elsewhere = tempfile::tempdir().unwrap();
    let set = |server: &KymoServer, config: &Path, comments: &str| {
        let args = ["repo", "set", "app", "--pull-comments", comments];
        cli_in(elsewhere.path(), &server.url, config, &args)
    };
    let shown = assert_ok(&set(&server, &server.config_dir(), "changes"));
    assert!(shown.contains("pull request comments: changes"), "{shown}");
    let queued = cli_in(
        elsewhere.path(),
        &server.url,
        &server.config_dir(),
        &["run", "app"],
    );
    assert_ok(&queued);

    // Another user (another config directory) has no token, and is told how to get one.
    let refused = set(&server, &elsewhere.path().join("stranger"), "always");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--token"), "{stderr}");

    // A restart writes a new token (on a new port here): the record leads to it.
    server.restart(&["--no-worker"], |_| {});
    let shown = assert_ok(&set(&server, &server.config_dir(), "always"));
    assert!(shown.contains("pull request comments: always"), "{shown}");
}

#[test]
fn bad_webhook_signatures_are_limited_per_address() {
    let server = KymoServer::start(&["--no-worker"]);
    let _repo = tracked(&server);
    let body = json!({ "ref": "refs/heads/main", "after": "a".repeat(40) }).to_string();
    let statuses: Vec<u16> = (0..12)
        .map(|i| {
            let delivery = format!("bad-{i}");
            crate::webhooks::deliver(
                &server,
                "github?repo=app",
                &[
                    ("x-github-event", "push"),
                    ("x-github-delivery", &delivery),
                    ("x-hub-signature-256", "sha256=00"),
                ],
                body.as_bytes(),
            )
            .0
        })
        .collect();
    assert_eq!(&statuses[..10], &[401; 10]);
    assert_eq!(statuses[10], 429, "{statuses:?}");
}
