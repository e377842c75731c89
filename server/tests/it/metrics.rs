//! `/metrics` in the Prometheus text format, parsed as a scraper would: names, HELP and TYPE
//! lines, labels, cumulative histogram buckets, and route templates rather than paths.

use std::collections::{BTreeMap, HashMap, HashSet};

use axum::http::{StatusCode, header};

use crate::api::TestApp;
use crate::eco::{raw, send, stepped};

/// A parsed exposition: families with their TYPE, and samples by name.
struct Exposition {
    types: HashMap<String, String>,
    samples: Vec<Sample>,
}

/// One sample line: metric name, labels in order, value.
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// Parses the Prometheus text format strictly enough to catch what scrapers reject: names,
/// HELP and TYPE before a family's samples, quoted label values, numeric values.
fn parse_exposition(text: &str) -> Exposition {
    let valid_name = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut types = HashMap::new();
    let mut helped = HashSet::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(valid_name(name), "{line}");
            helped.insert(name.to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(helped.contains(name), "TYPE before HELP: {line}");
            assert!(matches!(kind, "counter" | "gauge" | "histogram"), "{line}");
            assert!(
                types.insert(name.to_owned(), kind.to_owned()).is_none(),
                "twice: {line}"
            );
        } else {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("value in {line}"));
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.strip_suffix('}').unwrap()),
                None => (series, ""),
            };
            assert!(valid_name(name), "{line}");
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
                })
                .unwrap_or(name);
            assert!(types.contains_key(family), "sample before its TYPE: {line}");
            let mut parsed = Vec::new();
            let mut rest = labels;
            while !rest.is_empty() {
                let (key, after) = rest.split_once("=\"").unwrap();
                assert!(valid_name(key), "{line}");
                let mut end = 0;
                let bytes = after.as_bytes();
                while bytes[end] != b'"' {
                    end += if bytes[end] == b'\\' { 2 } else { 1 };
                }
                parsed.push((key.to_owned(), after[..end].to_owned()));
                rest = after[end + 1..]
                    .strip_prefix(',')
                    .unwrap_or(&after[end + 1..]);
            }
            samples.push(Sample {
                name: name.to_owned(),
                labels: parsed,
                value,
            });
        }
    }
    Exposition { types, samples }
}

#[tokio::test]
async fn metrics_are_valid_prometheus_text_with_cumulative_latency_buckets() {
    let app = TestApp::new().await;
    stepped(&app).await;
    raw(&app, "/repos/r/benchmarks/steady").await;
    raw(&app, "/static/kymo.css").await;
    raw(&app, "/no/such/page").await;
    for method in ["BREW", "WHEN"] {
        let method = axum::http::Method::from_bytes(method.as_bytes()).unwrap();
        send(&app, method, "/api/v1/jobs").await;
    }
    let scrape = raw(&app, "/metrics").await;
    assert_eq!(scrape.status, StatusCode::OK);
    assert!(
        scrape.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let exposition = parse_exposition(&scrape.body);
    // The sum over the samples of `name` that carry all of `labels` (other tests in this
    // process add their own requests to the histograms).
    let value = |name: &str, labels: &[(&str, &str)]| {
        let matching: Vec<f64> = exposition
            .samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.iter().any(|l| l.0 == *k && l.1 == *v))
            })
            .map(|s| s.value)
            .collect();
        assert!(
            !matching.is_empty(),
            "no {name} {labels:?} in\n{}",
            scrape.body
        );
        matching.iter().sum::<f64>()
    };
    assert_eq!(value("kymo_runs_total", &[]), 24.0);
    assert_eq!(value("kymo_measurements_stored_total", &[]), 72.0);
    assert_eq!(value("kymo_queue_depth", &[]), 0.0);
    assert_eq!(value("kymo_jobs", &[("state", "failed")]), 0.0);
    assert_eq!(value("kymo_repositories", &[]), 1.0);
    assert_eq!(
        exposition.types["kymo_http_request_duration_seconds"],
        "histogram"
    );
    // Routes are labelled by template, never by the concrete path.
    let name = "kymo_http_request_duration_seconds_count";
    assert!(value(name, &[("route", "/api/v1/repos/{repo}/results")]) >= 24.0);
    assert!(value(name, &[("route", "/repos/{repo}/benchmarks/{*name}")]) >= 1.0);
    // Methods clients make up share one label.
    assert!(value(name, &[("route", "/api/v1/jobs"), ("method", "other")]) >= 2.0);
    assert!(!scrape.body.contains("BREW"), "{}", scrape.body);
    assert!(
        !scrape.body.contains("route=\"/repos/r/"),
        "{}",
        scrape.body
    );
    // Buckets rise with `le` and end at the count.
    let key_of = |s: &Sample| -> String {
        let key: Vec<String> = s
            .labels
            .iter()
            .filter(|l| l.0 != "le")
            .map(|l| format!("{}={}", l.0, l.1))
            .collect();
        key.join(",")
    };
    let counts: HashMap<String, f64> = exposition
        .samples
        .iter()
        .filter(|s| s.name == "kymo_http_request_duration_seconds_count")
        .map(|s| (key_of(s), s.value))
        .collect();
    let mut by_series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for s in &exposition.samples {
        if s.name == "kymo_http_request_duration_seconds_bucket" {
            let le = &s.labels.iter().find(|l| l.0 == "le").unwrap().1;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            by_series.entry(key_of(s)).or_default().push((le, s.value));
        }
    }
    assert!(!by_series.is_empty());
    for (key, buckets) in by_series {
        assert!(
            buckets
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
            "{key}: {buckets:?}"
        );
        let (le, last) = *buckets.last().unwrap();
        assert_eq!(le, f64::INFINITY, "{key}");
        assert_eq!(last, counts[&key], "{key}: +Inf bucket against _count");
    }
}
