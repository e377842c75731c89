//! The spine: a repository with a kymo.toml, `kymo serve`, `kymo repo add`, `kymo run` on
//! three commits, and the results on the trend graph, the commit pages and the API.

use std::time::Duration;

use crate::support::{KymoServer, TestRepo, assert_ok, bench_script, kymo_toml};

#[test]
fn three_runs_become_three_points_on_the_trend_graph() {
    let repo = TestRepo::new();
    let toml = kymo_toml("sh bench.sh", "30s", 2);
    let values = [100.0, 112.5, 104.25];
    let shas: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            repo.commit(
                &[("kymo.toml", &toml), ("bench.sh", &bench_script(*v))],
                &format!("commit {i} <b>bold</b>"),
            )
        })
        .collect();

    let server = KymoServer::start(&[]);
    let path = repo.path().to_str().unwrap();
    let added = assert_ok(&server.kymo(&["repo", "add", "demo", path]));
    assert!(added.contains("added demo"), "{added}");
    for sha in &shas {
        assert_ok(&server.kymo(&["run", "demo", sha]));
    }
    let jobs = server.wait_for_jobs(3, Duration::from_secs(60));
    assert!(jobs.iter().all(|j| j["state"] == "succeeded"), "{jobs:#?}");

    // The trend graph has one linked point per commit.
    let (status, page) = server.get("/repos/demo/benchmarks/parse/small%7Bsize=16%7D");
    assert_eq!(status, 200, "{page}");
    for sha in &shas {
        assert!(
            page.contains(&format!("/repos/demo/commits/{sha}")),
            "{sha} not linked"
        );
    }
    assert_eq!(page.matches("<a ").count() - nav_links(&page), 3, "{page}");

    // Zooming to the last two commits re-renders the graph; htmx gets only the charts.
    let zoomed = "/repos/demo/benchmarks/parse/small%7Bsize=16%7D?last=2";
    let (_, page) = server.get(zoomed);
    assert_eq!(page.matches("<a ").count() - nav_links(&page), 2, "{page}");
    let mut fragment = ureq::get(format!("{}{zoomed}", server.url))
        .header("HX-Request", "true")
        .call()
        .unwrap();
    let fragment = fragment.body_mut().read_to_string().unwrap();
    assert!(
        fragment.contains("<svg") && !fragment.contains("<html"),
        "{fragment}"
    );

    // Every value is on its commit page, with the change against the parent.
    let (_, second) = server.get(&format!("/repos/demo/commits/{}", shas[1]));
    assert!(second.contains("112.5 ns"), "{second}");
    assert!(second.contains("100 ns"), "parent value missing: {second}");
    assert!(second.contains("+12.5 %"), "{second}");
    assert!(
        !second.contains("<b>bold</b>"),
        "commit message must be escaped"
    );

    // And in the API, in history order.
    let series =
        server.get_json("/api/v1/repos/demo/series?benchmark=parse/small%7Bsize=16%7D&metric=time");
    let points = series[0]["points"].as_array().unwrap();
    let got: Vec<f64> = points
        .iter()
        .map(|p| p["value"].as_f64().unwrap())
        .collect();
    assert_eq!(got, values);
    let commit = server.get_json(&format!("/api/v1/repos/demo/commits/{}", shas[2]));
    assert_eq!(commit["results"][0]["value"], 104.25);
    assert_eq!(
        commit["results"][0]["samples"],
        serde_json::json!([104.25, 104.25])
    );
    assert_eq!(commit["runs"].as_array().unwrap().len(), 1);

    // `kymo compare` prints the table; without history nothing is called a regression.
    let out = assert_ok(&server.kymo(&["compare", &shas[0], &shas[1], "--repo", "demo", "--all"]));
    assert!(
        out.contains("parse/small{size=16}") && out.contains("0 regressed"),
        "{out}"
    );
    let missing = server.kymo(&["compare", &shas[0], &shas[1], "--repo", "nope"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("not found"));

    // The home, repository, queue and machines pages show it all.
    let (_, home) = server.get("/");
    assert!(home.contains("/repos/demo"));
    let (_, history) = server.get("/repos/demo");
    assert_eq!(history.matches("badge succeeded").count(), 3, "{history}");
    let (_, machines) = server.get("/machines");
    let fingerprint = jobs[0]["machine"].as_str().unwrap();
    assert!(machines.contains(fingerprint));
    let (status, _) = server.get("/healthz");
    assert_eq!(status, 200);
}

/// Links of the page chrome (header, footer, breadcrumbs, series links) that are not points.
fn nav_links(page: &str) -> usize {
    let chart_start = page.find("<svg").unwrap_or(page.len());
    let chart_end = page.rfind("</svg>").unwrap_or(0);
    page[..chart_start].matches("<a ").count() + page[chart_end..].matches("<a ").count()
}

#[test]
fn results_from_ci_are_uploaded_under_this_machines_fingerprint() {
    let repo = TestRepo::new();
    let sha = repo.commit(&[("README", "hello")], "no suites here");
    let server = KymoServer::start(&["--no-worker"]);
    assert_ok(&server.kymo(&["repo", "add", "ci", repo.path().to_str().unwrap()]));

    let results = tempfile::tempdir().unwrap();
    let doc = |v: f64| {
        format!(
            r#"{{"benchmarks":[{{"name":"ci/bench","metrics":[{{"name":"time","unit":"ns","direction":"lower","samples":[{v},{v},{}]}}]}}]}}"#,
            v + 2.0
        )
    };
    std::fs::write(results.path().join("alpha.json"), doc(10.0)).unwrap();
    std::fs::write(
        results.path().join("beta.json"),
        doc(20.0).replace("ci/bench", "ci/other"),
    )
    .unwrap();
    let out = assert_ok(&server.kymo(&[
        "upload",
        "--repo",
        "ci",
        "--commit",
        &sha,
        results.path().to_str().unwrap(),
    ]));
    assert!(out.contains("stored 2 measurements"), "{out}");

    let commit = server.get_json(&format!("/api/v1/repos/ci/commits/{sha}"));
    let values: Vec<f64> = commit["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].as_f64().unwrap())
        .collect();
    assert_eq!(values, vec![10.0, 20.0]);
    assert_eq!(commit["runs"][0]["source"], "upload");

    // A broken file is refused with its name, and nothing is stored.
    let bad = results.path().join("broken.json");
    std::fs::write(&bad, r#"{"benchmarks":[{"name":"x","metrics":[]}]}"#).unwrap();
    let output = server.kymo(&[
        "upload",
        "--repo",
        "ci",
        "--commit",
        &sha,
        bad.to_str().unwrap(),
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("broken.json"), "{stderr}");
    let commit = server.get_json(&format!("/api/v1/repos/ci/commits/{sha}"));
    assert_eq!(commit["runs"].as_array().unwrap().len(), 1);

    let listed = assert_ok(&server.kymo(&["repo", "list", "--json"]));
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["name"], "ci");
}
