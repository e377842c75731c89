//! Test fixtures: throwaway git repositories and a `kymo serve` process.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// A git repository in a temp dir, committed to with git2.
pub struct TestRepo {
    pub dir: TempDir,
    repo: git2::Repository,
}

impl TestRepo {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init_opts(
            dir.path(),
            git2::RepositoryInitOptions::new().initial_head("main"),
        )
        .unwrap();
        Self { dir, repo }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `files` into the work tree and commits everything; returns the sha.
    pub fn commit(&self, files: &[(&str, &str)], message: &str) -> String {
        for (name, contents) in files {
            let path = self.dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, contents).unwrap();
        }
        let mut index = self.repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write().unwrap();
        let tree = self.repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("Ada Bench", "ada@example.com").unwrap();
        let parent = self.repo.head().ok().map(|h| h.peel_to_commit().unwrap());
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        let oid = self
            .repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .unwrap();
        oid.to_string()
    }
}

/// A kymo.toml with one suite running `command`.
pub fn kymo_toml(command: &str, timeout: &str, repeat: u32) -> String {
    format!(
        "[[suite]]\nname = \"demo\"\nrun = {command:?}\nformat = \"kymo\"\nrepeat = {repeat}\ntimeout = {timeout:?}\n"
    )
}

/// A suite script printing one kymo JSON result with `value`.
pub fn bench_script(value: f64) -> String {
    format!(
        "echo '{{\"benchmarks\":[{{\"name\":\"parse/small\",\"params\":{{\"size\":\"16\"}},\"metrics\":[{{\"name\":\"time\",\"unit\":\"ns\",\"direction\":\"lower\",\"value\":{value}}}]}}]}}'\n"
    )
}

pub fn kymo_bin() -> &'static str {
    env!("CARGO_BIN_EXE_kymo")
}

/// Spawns `kymo serve` on `dir/kymo.db` and reads the URL it prints.
/// The admin token `kymo serve` wrote beside its database in `dir`.
fn admin_token(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("kymo.db.admin-token"))
        .expect("kymo serve writes an admin token beside its database")
}

fn spawn_server(
    dir: &Path,
    extra: &[&str],
    configure: impl FnOnce(&mut Command),
) -> (Child, String) {
    let mut command = Command::new(kymo_bin());
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(dir.join("kymo.db"))
        .args(extra)
        .env("RUST_LOG", "warn")
        // Its record for the CLI goes to the test's own config directory, not the user's.
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    configure(&mut command);
    let mut child = command.spawn().unwrap();
    let url = served_url(&mut child);
    (child, url)
}

/// The URL a `kymo serve` child prints on its first line of stdout (piped).
pub fn served_url(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned()
}

/// A running `kymo serve`, killed on drop.
pub struct KymoServer {
    pub url: String,
    pub dir: TempDir,
    /// The admin token `kymo serve` wrote beside its database.
    pub admin: String,
    child: Child,
}

impl KymoServer {
    pub fn start(extra: &[&str]) -> Self {
        Self::start_with(extra, |_| {})
    }

    /// Starts `kymo serve` in a new temp dir, letting `configure` adjust the command first.
    pub fn start_with(extra: &[&str], configure: impl FnOnce(&mut Command)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (child, url) = spawn_server(dir.path(), extra, configure);
        let admin = admin_token(dir.path());
        Self {
            url,
            dir,
            admin,
            child,
        }
    }

    /// Kills the server with SIGKILL, as a crash or the OOM killer would.
    pub fn sigkill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same database and data directory.
    pub fn restart(&mut self, extra: &[&str], configure: impl FnOnce(&mut Command)) {
        self.sigkill();
        let (child, url) = spawn_server(self.dir.path(), extra, configure);
        (self.child, self.url) = (child, url);
        // Each start of `kymo serve` writes a new admin token and revokes the old one.
        self.admin = admin_token(self.dir.path());
    }

    pub fn db_path(&self) -> PathBuf {
        self.dir.path().join("kymo.db")
    }

    /// The `XDG_CONFIG_HOME` the server and the CLI commands of the test see.
    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    /// Runs a `kymo` CLI command against this server.
    pub fn kymo(&self, args: &[&str]) -> Output {
        Command::new(kymo_bin())
            .args(args)
            .env("KYMO_SERVER", &self.url)
            .env("KYMO_TOKEN", &self.admin)
            .env("RUST_LOG", "warn")
            .env("XDG_CONFIG_HOME", self.config_dir())
            .output()
            .unwrap()
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        let mut response = ureq::get(format!("{}{path}", self.url))
            .config()
            .http_status_as_error(false)
            .build()
            .call()
            .unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_to_string().unwrap())
    }

    pub fn get_json(&self, path: &str) -> Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Waits until every job is finished and `count` jobs exist; returns the jobs.
    pub fn wait_for_jobs(&self, count: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let jobs = self.get_json("/api/v1/jobs");
            let jobs = jobs.as_array().unwrap().clone();
            let done = jobs
                .iter()
                .all(|j| matches!(j["state"].as_str(), Some("succeeded" | "failed")));
            if jobs.len() >= count && done {
                return jobs;
            }
            assert!(Instant::now() < deadline, "jobs did not finish: {jobs:#?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// A browser session on a [`KymoServer`]: its cookie, sent with same-origin requests.
pub struct BrowserSession {
    url: String,
    cookie: String,
}

impl KymoServer {
    /// Logs in with the admin token as the login form does.
    pub fn login(&self) -> BrowserSession {
        let response = ureq::post(format!("{}/login", self.url))
            .config()
            .max_redirects(0)
            .http_status_as_error(false)
            .build()
            .header("origin", &self.url)
            .send_form([("token", self.admin.as_str()), ("next", "/")])
            .unwrap();
        assert_eq!(response.status().as_u16(), 303, "login failed");
        let cookie = response.headers()["set-cookie"].to_str().unwrap();
        BrowserSession {
            url: self.url.clone(),
            cookie: cookie.split(';').next().unwrap().to_owned(),
        }
    }
}

impl BrowserSession {
    /// The `name=value` of the session cookie.
    pub fn cookie(&self) -> &str {
        &self.cookie
    }

    pub fn get(&self, path: &str) -> String {
        ureq::get(format!("{}{path}", self.url))
            .header("cookie", &self.cookie)
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap()
    }

    /// Posts a form from a page of the same site; returns the status.
    pub fn post_form(&self, path: &str, body: &str) -> u16 {
        ureq::post(format!("{}{path}", self.url))
            .config()
            .max_redirects(0)
            .http_status_as_error(false)
            .build()
            .header("cookie", &self.cookie)
            .header("origin", &self.url)
            .header("content-type", "application/x-www-form-urlencoded")
            .send(body)
            .unwrap()
            .status()
            .as_u16()
    }
}

impl Drop for KymoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Asserts a CLI command succeeded, showing its output when it did not.
pub fn assert_ok(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "kymo failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Starts `kymo worker` against `server` with its own cache directory.
pub fn start_worker(server: &KymoServer, token: &str, cache: &Path) -> Child {
    Command::new(kymo_bin())
        .args(["worker", "--server", &server.url, "--token", token])
        .arg("--cache-dir")
        .arg(cache)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Creates a worker token in the server's database, as an operator would.
pub fn worker_token(server: &KymoServer) -> String {
    let db = server.db_path();
    let out = assert_ok(&server.kymo(&[
        "token",
        "create",
        "--worker",
        "w",
        "--db",
        db.to_str().unwrap(),
    ]));
    out.trim().to_owned()
}
