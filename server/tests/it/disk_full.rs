//! A disk that fills up, made with RLIMIT_FSIZE (no privileges needed; the manual check with a
//! small tmpfs is in RELIABILITY.md): uploads past the limit get a clear error, nothing partial
//! is stored, reads go on, and after a restart with room again the database is sound.

use std::os::unix::process::CommandExt;
use std::time::Duration;

use serde_json::{Value, json};

use crate::api::specs;
use crate::faults::inspect;
use crate::support::{KymoServer, TestRepo, assert_ok};

/// Largest file the server may write: room for the schema and a few uploads, not many.
const FILE_LIMIT: u64 = 3 * 1024 * 1024;
const BENCHMARKS: usize = 1_000;

fn upload(sha: &str, round: usize) -> Value {
    let benchmarks: Vec<Value> = (0..BENCHMARKS)
        .map(|b| {
            let samples: Vec<f64> = (0..20).map(|s| (round * 7 + b + s) as f64).collect();
            json!({ "name": format!("bench/{b}"), "metrics": [
                { "name": "time", "unit": "ns", "direction": "lower", "value": samples[10], "samples": samples }
            ]})
        })
        .collect();
    json!({ "commit": sha, "specs": specs(), "suites": [{ "suite": "s", "results": { "benchmarks": benchmarks } }] })
}

fn post(server: &KymoServer, body: &Value) -> (u16, Value) {
    let mut response = ureq::post(format!("{}/api/v1/repos/r/results", server.url))
        .config()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .header("authorization", format!("Bearer {}", server.admin))
        .send_json(body)
        .unwrap();
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn limit_file_size(command: &mut std::process::Command) {
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            // Ignored, SIGXFSZ no longer kills the process: the write fails with EFBIG instead,
            // as it would fail with ENOSPC on a full disk.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: FILE_LIMIT,
                rlim_max: FILE_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn a_full_disk_refuses_uploads_clearly_and_corrupts_nothing() {
    let mut server = KymoServer::start_with(&["--no-worker"], limit_file_size);
    let repo = TestRepo::new();
    let sha = repo.commit(&[("README", "x")], "first");
    assert_ok(&server.kymo(&["repo", "add", "r", repo.path().to_str().unwrap()]));

    let mut stored = 0;
    let refusal = loop {
        let (status, answer) = post(&server, &upload(&sha, stored));
        if status != 201 {
            break (status, answer);
        }
        stored += 1;
        assert!(stored < 50, "the file size limit never took effect");
    };
    assert!(stored >= 1, "not even one upload fitted: {refusal:?}");
    let (status, answer) = refusal;
    assert_eq!(status, 507, "{answer}");
    let message = answer["error"].as_str().unwrap_or_default();
    assert!(message.contains("disk"), "{message}");
    // Reads still work while the disk is full.
    assert_eq!(server.get("/healthz"), (200, "ok".into()));
    let (status, _) = server.get("/repos/r");
    assert_eq!(status, 200);

    server.restart(&["--no-worker"], |_| {});
    let (counts, integrity) = inspect(&server.db_path());
    assert_eq!(integrity, "ok");
    assert_eq!(counts.runs, stored as i64, "{counts:?}");
    assert_eq!(counts.measurements, (stored * BENCHMARKS) as i64);
    let (status, answer) = post(&server, &upload(&sha, stored));
    assert_eq!(status, 201, "{answer}");
}
