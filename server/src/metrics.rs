//! Prometheus metrics at `GET /metrics`: HTTP request latency by route template (recorded by a
//! middleware) and the server's state (jobs by state, queue depth, runs, measurements stored),
//! read from the database at scrape time so that they hold across restarts.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{LazyLock, Mutex};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use kymo_core::db::ServerCounts;

use crate::cache::CacheStats;
use crate::error::AppResult;
use crate::state::AppState;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// One latency histogram: counts per bucket (not cumulative), total count and sum.
#[derive(Debug, Default, Clone)]
struct Histogram {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if let Some(i) = BUCKETS.iter().position(|&le| seconds <= le) {
            self.buckets[i] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }
}

/// Histograms keyed by (route template, method, status code).
type Latencies = BTreeMap<(String, String, u16), Histogram>;

/// One set per process, like the process itself: every router built in it reports here.
static LATENCIES: LazyLock<Mutex<Latencies>> = LazyLock::new(Mutex::default);

/// Middleware (a `route_layer`, so the route is known) recording each request's latency under
/// its route template, never the concrete path, so that the label set stays bounded.
pub async fn record_latency(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |m| m.as_str().to_owned());
    // Clients choose the method: anything unusual shares one label, so that the label set
    // (and memory) stays bounded.
    let method = match request.method().as_str() {
        m @ ("GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS") => m,
        _ => "other",
    }
    .to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let seconds = started.elapsed().as_secs_f64();
    let key = (
        route.as_str().to_owned(),
        method,
        response.status().as_u16(),
    );
    let mut latencies = LATENCIES.lock().unwrap_or_else(|e| e.into_inner());
    latencies.entry(key).or_default().observe(seconds);
    response
}

/// `GET /metrics` in the Prometheus text exposition format.
pub async fn metrics(State(state): State<AppState>) -> AppResult<Response> {
    let counts = state.db.server_counts().await?;
    let latencies = LATENCIES.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let cache = state.responses.stats();
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        exposition(&counts, &latencies, &cache),
    )
        .into_response())
}

/// Renders every metric family with its HELP and TYPE lines.
fn exposition(counts: &ServerCounts, latencies: &Latencies, cache: &CacheStats) -> String {
    let mut out = String::new();
    family(&mut out, "kymo_jobs", "gauge", "Jobs by state.");
    for (state, n) in &counts.jobs {
        let _ = writeln!(out, "kymo_jobs{{state=\"{state}\"}} {n}");
    }
    let queued = counts
        .jobs
        .iter()
        .find(|(s, _)| *s == "queued")
        .map_or(0, |j| j.1);
    let simple = [
        (
            "kymo_queue_depth",
            "gauge",
            "Jobs waiting for a machine.",
            queued,
        ),
        (
            "kymo_runs_total",
            "counter",
            "Runs stored (jobs and uploads).",
            counts.rows.runs,
        ),
        (
            "kymo_measurements_stored_total",
            "counter",
            "Measurements ingested and stored.",
            counts.rows.measurements,
        ),
        (
            "kymo_repositories",
            "gauge",
            "Tracked repositories.",
            counts.rows.repositories,
        ),
        (
            "kymo_machines",
            "gauge",
            "Registered machines.",
            counts.rows.machines,
        ),
        (
            "kymo_open_regressions",
            "gauge",
            "Active regressions in the open triage state.",
            counts.open_regressions,
        ),
    ];
    for (name, kind, help, value) in simple {
        family(&mut out, name, kind, help);
        let _ = writeln!(out, "{name} {value}");
    }
    let name = "kymo_response_cache_served_total";
    family(
        &mut out,
        name,
        "counter",
        "Anonymous GET responses by how the response cache served them.",
    );
    for (how, n) in [
        ("hit", cache.hits),
        ("stale", cache.stale),
        ("miss", cache.misses),
    ] {
        let _ = writeln!(out, "{name}{{served=\"{how}\"}} {n}");
    }
    let name = "kymo_response_cache_bytes";
    family(
        &mut out,
        name,
        "gauge",
        "Bytes of responses kept by the response cache.",
    );
    let _ = writeln!(out, "{name} {}", cache.bytes);
    let name = "kymo_http_request_duration_seconds";
    family(
        &mut out,
        name,
        "histogram",
        "HTTP request latency by route template.",
    );
    for ((route, method, status), h) in latencies {
        let labels = format!(
            "route=\"{}\",method=\"{}\",status=\"{status}\"",
            label_value(route),
            label_value(method)
        );
        let mut cumulative = 0;
        for (le, n) in BUCKETS.iter().zip(h.buckets) {
            cumulative += n;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count);
    }
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Escapes a label value as the exposition format requires.
fn label_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kymo_core::db::RowCounts;

    #[test]
    fn observations_fall_in_the_first_bucket_that_holds_them() {
        let mut h = Histogram::default();
        for s in [0.0005, 0.003, 0.003, 99.0] {
            h.observe(s);
        }
        assert_eq!(h.buckets[0], 1);
        assert_eq!(h.buckets[2], 2);
        assert_eq!(h.buckets.iter().sum::<u64>(), 3, "99 s is only in +Inf");
        assert_eq!(h.count, 4);
    }

    #[test]
    fn the_exposition_has_cumulative_buckets_and_escaped_labels() {
        let counts = ServerCounts {
            jobs: vec![("queued", 3), ("running", 1)],
            rows: RowCounts {
                repositories: 1,
                commits: 4,
                machines: 2,
                jobs: 4,
                runs: 7,
                benchmarks: 10,
                series: 10,
                measurements: 70,
            },
            open_regressions: 0,
        };
        let mut latencies = Latencies::new();
        let mut h = Histogram::default();
        h.observe(0.002);
        h.observe(0.2);
        latencies.insert(("/a/\"{x}\"".into(), "GET".into(), 200), h);
        let cache = CacheStats {
            hits: 5,
            ..CacheStats::default()
        };
        let text = exposition(&counts, &latencies, &cache);
        assert!(text.contains("kymo_response_cache_served_total{served=\"hit\"} 5\n"));
        assert!(text.contains("kymo_queue_depth 3\n"));
        assert!(text.contains("kymo_jobs{state=\"running\"} 1\n"));
        let labels = r#"route="/a/\"{x}\"",method="GET",status="200""#;
        assert!(text.contains(&format!(
            "kymo_http_request_duration_seconds_bucket{{{labels},le=\"0.001\"}} 0\n"
        )));
        assert!(text.contains(&format!(
            "kymo_http_request_duration_seconds_bucket{{{labels},le=\"0.25\"}} 2\n"
        )));
        assert!(text.contains(&format!(
            "kymo_http_request_duration_seconds_count{{{labels}}} 2\n"
        )));
    }
}
