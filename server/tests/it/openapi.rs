//! The OpenAPI document against the router: every route the API serves is documented with
//! its methods, every documented operation is served, and every schema reference resolves.
//! A route added with a plain `.route(...)` instead of `.routes(routes!(handler))` fails here.

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode, header};
use serde_json::Value;

use crate::api::TestApp;
use crate::eco::send;

/// The path templates the API router holds. axum has no public listing; its `Debug` output
/// names each path as `RouteId(N): "/path"`, so a change there makes this find nothing and
/// the test fail loudly rather than pass.
fn routed_paths() -> BTreeSet<String> {
    let debug = format!("{:?}", kymo_server::api::router());
    let mut paths = BTreeSet::new();
    let mut rest = debug.as_str();
    while let Some(at) = rest.find("RouteId(") {
        rest = &rest[at..];
        let Some(open) = rest.find(": \"") else { break };
        let after = &rest[open + 3..];
        let close = after.find('"').unwrap();
        let path = &after[..close];
        // The fallback router's own entries (`/`, a catch-all) are not routes.
        if path.starts_with(kymo_server::api::PREFIX) {
            paths.insert(path.to_owned());
        }
        rest = &after[close..];
    }
    assert!(paths.len() > 10, "no routes found in {debug}");
    paths
}

/// The methods the router serves on `template`: an unknown method gets 405 with `Allow`.
async fn routed_methods(app: &TestApp, template: &str) -> BTreeSet<String> {
    let concrete: Vec<String> = template
        .split('/')
        .map(|seg| {
            if seg.starts_with('{') {
                "kymo-probe-1".to_owned()
            } else {
                seg.to_owned()
            }
        })
        .collect();
    let probe = Method::from_bytes(b"KYMOPROBE").unwrap();
    let response = send(app, probe, &concrete.join("/")).await;
    assert_eq!(
        response.status,
        StatusCode::METHOD_NOT_ALLOWED,
        "{template}"
    );
    let allow = response.headers[header::ALLOW].to_str().unwrap().to_owned();
    allow
        .split(',')
        .map(|m| m.trim().to_owned())
        .filter(|m| m != "HEAD")
        .collect()
}

#[tokio::test]
async fn every_route_is_documented_and_every_documented_operation_is_routed() {
    let app = TestApp::new().await;
    let mut routed = BTreeSet::new();
    for path in routed_paths() {
        for method in routed_methods(&app, &path).await {
            routed.insert(format!("{method} {path}"));
        }
    }
    let (status, document) = app.get("/api/v1/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    let mut documented = BTreeSet::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if !matches!(method.as_str(), "parameters" | "summary" | "description") {
                documented.insert(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    let undocumented: Vec<_> = routed.difference(&documented).collect();
    let unrouted: Vec<_> = documented.difference(&routed).collect();
    assert!(
        undocumented.is_empty(),
        "routes without OpenAPI documentation (give the handler #[utoipa::path] and register \
         it with .routes(routes!(handler))): {undocumented:?}"
    );
    assert!(
        unrouted.is_empty(),
        "documented but not routed: {unrouted:?}"
    );
    assert!(
        routed.contains("POST /api/v1/repos/{repo}/results"),
        "{routed:?}"
    );
    assert!(
        routed.contains("PUT /api/v1/repos/{repo}/sensitivity"),
        "{routed:?}"
    );
}

#[tokio::test]
async fn the_document_is_openapi_3_and_every_schema_reference_resolves() {
    let app = TestApp::new().await;
    let (_, document) = app.get("/api/v1/openapi.json").await;
    assert!(document["openapi"].as_str().unwrap().starts_with("3."));
    assert_eq!(document["info"]["title"], "kymo");
    let schemas = document["components"]["schemas"].as_object().unwrap();
    for name in [
        "UploadRequest",
        "SuiteResults",
        "CompareReport",
        "RegressionRow",
        "ApiErrorBody",
    ] {
        assert!(
            schemas.contains_key(name),
            "{name} missing: {:?}",
            schemas.keys()
        );
    }
    let mut refs = Vec::new();
    collect_refs(&document, &mut refs);
    assert!(refs.len() > 20, "{refs:?}");
    for reference in refs {
        let name = reference
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("unexpected reference {reference}"));
        assert!(schemas.contains_key(name), "dangling reference {reference}");
    }
    // OpenAPI requires a description on every response.
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            for (status, response) in operation["responses"].as_object().unwrap() {
                assert!(
                    response["description"].is_string(),
                    "{method} {path} {status} has no description"
                );
            }
        }
    }
    let claim = &document["paths"]["/api/v1/worker/claim"]["post"];
    assert_eq!(claim["security"][0]["worker_token"], Value::Array(vec![]));
    let series = &document["paths"]["/api/v1/repos/{repo}/series"]["get"]["parameters"];
    let names: Vec<&str> = series
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["repo", "benchmark", "metric", "machine", "limit", "format"]
    );
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => collect_refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}
