//! Exports, feeds and embeds: series as CSV and JSON, the Atom feed of regressions (valid XML
//! whatever the benchmark names and commit messages hold), the embeddable trend image, and the
//! benchmark page's links to them. Bad parameters get a 422 with a JSON error body.

use std::io::Read;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::api::{TestApp, specs};
use crate::support::TestRepo;
use crate::verdicts::jittered;

/// A benchmark name a hostile uploader might pick.
const HOSTILE: &str = "<script>alert(\"x\")</script>&amp;]]>";

/// A raw answer: status, headers and body text (decompressed when it came gzipped).
pub struct Raw {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: String,
    /// The body's size as sent.
    pub sent: usize,
}

pub async fn raw(app: &TestApp, path: &str) -> Raw {
    send(app, Method::GET, path).await
}

/// Sends `method path` (with a `Host`, as browsers do) through the router.
pub async fn send(app: &TestApp, method: Method, path: &str) -> Raw {
    send_with(app, method, path, &[]).await
}

/// [`send`] with more request headers.
pub async fn send_with(app: &TestApp, method: Method, path: &str, headers: &[(&str, &str)]) -> Raw {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "bench.example");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Body::empty()).unwrap();
    let response = kymo_server::app(app.state())
        .oneshot(request)
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let mut body = String::new();
    if headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|e| e == "gzip")
    {
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut body)
            .unwrap();
    } else {
        body = String::from_utf8(bytes.to_vec()).unwrap();
    }
    Raw {
        status,
        headers,
        body,
        sent: bytes.len(),
    }
}

fn upload(sha: &str, level: f64, i: usize) -> Value {
    let samples = jittered(level, i);
    json!({
        "commit": sha,
        "specs": specs(),
        "suites": [{ "suite": "s", "results": { "benchmarks": [
            { "name": HOSTILE, "metrics": [{ "name": "time", "unit": "ns", "direction": "lower",
                                             "value": level, "samples": samples }] },
            { "name": "steady", "metrics": [
                { "name": "time", "unit": "ns", "direction": "lower", "value": 50.0 },
                { "name": "rate", "unit": "op/s", "direction": "higher", "value": 9.0 }] }
        ]}}]
    })
}

/// Repository `r` with 24 measured commits whose hostile benchmark steps up by 20 % at the
/// 16th; commit messages carry markup and a control character.
pub async fn stepped(app: &TestApp) -> (TestRepo, Vec<String>) {
    let repo = TestRepo::new();
    let shas: Vec<String> = (0..24)
        .map(|i| {
            repo.commit(
                &[("f", &format!("{i}"))],
                &format!("<b>change</b> {i} \u{1}&"),
            )
        })
        .collect();
    let body = json!({ "name": "r", "url": repo.path().to_str().unwrap(), "branch": "main" });
    assert_eq!(
        app.post("/api/v1/repos", &body).await.0,
        StatusCode::CREATED
    );
    for (i, sha) in shas.iter().enumerate() {
        let level = if i < 16 { 100.0 } else { 120.0 };
        let (status, answer) = app
            .post("/api/v1/repos/r/results", &upload(sha, level, i))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    (repo, shas)
}

fn enc(s: &str) -> String {
    kymo_core::protocol::query_value(s)
}

#[tokio::test]
async fn a_series_exports_as_json_and_as_csv_with_the_same_points() {
    let app = TestApp::new().await;
    let (_repo, shas) = stepped(&app).await;
    let query = format!(
        "/api/v1/repos/r/series?benchmark={}&metric=time",
        enc(HOSTILE)
    );
    let (status, json) = app.get(&query).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json[0]["benchmark"], HOSTILE);
    assert_eq!(json[0]["points"].as_array().unwrap().len(), 24);

    let csv = raw(&app, &format!("{query}&format=csv")).await;
    assert_eq!(csv.status, StatusCode::OK);
    assert_eq!(csv.headers[header::CONTENT_TYPE], "text/csv; charset=utf-8");
    assert!(
        csv.headers[header::CONTENT_DISPOSITION]
            .to_str()
            .unwrap()
            .starts_with("attachment")
    );
    let lines: Vec<&str> = csv.body.lines().collect();
    assert_eq!(lines.len(), 25, "{}", csv.body);
    assert_eq!(
        lines[0],
        "benchmark,metric,unit,direction,machine,position,commit,value,samples"
    );
    // The name holds a quote: the field is quoted and the quote doubled.
    assert!(lines[1].starts_with("\"<script>alert(\"\"x\"\")</script>&amp;]]>\",time,ns,lower,"));
    assert!(
        lines[24].contains(&format!(",{},120,", shas[23])),
        "{}",
        lines[24]
    );
    assert_eq!(lines[24].rsplit(',').next().unwrap().split(';').count(), 5);
}

#[tokio::test]
async fn bad_export_parameters_are_refused_with_a_clear_message() {
    let app = TestApp::new().await;
    stepped(&app).await;
    for (path, expect) in [
        ("/api/v1/repos/r/series?format=xml", "json or csv"),
        (
            "/api/v1/repos/r/series?limit=0",
            "limit must be between 1 and 10000",
        ),
        (
            "/api/v1/repos/r/series?limit=99999999",
            "limit must be between",
        ),
        ("/api/v1/repos/r/series?limit=many", "limit"),
        ("/api/v1/repos/r/series?colour=red", "unknown field"),
        (
            "/api/v1/repos/r/compare?head=HEAD&format=pdf",
            "json or csv",
        ),
        ("/api/v1/repos/r/regressions?min_change=lots", "min_change"),
    ] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {body}");
        let message = body["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{path}: {body}"));
        assert!(message.contains(expect), "{path}: {message}");
    }
    let (status, body) = app.get("/api/v1/repos/nope/series?format=csv").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

#[tokio::test]
async fn the_atom_feed_is_valid_xml_with_hostile_names_escaped() {
    let app = TestApp::new().await;
    let (_repo, shas) = stepped(&app).await;
    let feed = raw(&app, "/repos/r/regressions.atom").await;
    assert_eq!(feed.status, StatusCode::OK, "{}", feed.body);
    assert_eq!(
        feed.headers[header::CONTENT_TYPE],
        "application/atom+xml; charset=utf-8"
    );
    assert!(!feed.body.contains("<script>"), "{}", feed.body);
    assert!(!feed.body.contains('\u{1}'));
    let doc = roxmltree::Document::parse(&feed.body).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "feed");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2005/Atom")
    );
    let child = |node: roxmltree::Node<'_, '_>, name: &str| {
        node.children()
            .find(|c| c.tag_name().name() == name)
            .unwrap_or_else(|| panic!("no <{name}>"))
            .text()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        child(root, "id"),
        "http://bench.example/repos/r/regressions"
    );
    let entries: Vec<_> = root
        .children()
        .filter(|c| c.tag_name().name() == "entry")
        .collect();
    assert_eq!(entries.len(), 1, "{}", feed.body);
    let entry = entries[0];
    // The parser undoes the escaping: the text is the hostile name as it was uploaded.
    assert!(child(entry, "title").starts_with(&format!("{HOSTILE} time: +")));
    assert!(child(entry, "summary").contains(&shas[16][..10]));
    assert!(child(entry, "summary").contains("<b>change</b> 16 &"));
    assert!(child(entry, "updated").ends_with('Z'));

    let (status, _) = app.get("/repos/nope/regressions.atom").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let page = raw(&app, "/repos/r/regressions").await;
    assert!(page.body.contains(
        r#"<link rel="alternate" type="application/atom+xml" title="Regressions in r" href="/repos/r/regressions.atom">"#
    ));
}

#[tokio::test]
async fn the_trend_image_is_a_standalone_cached_svg_of_one_series() {
    let app = TestApp::new().await;
    stepped(&app).await;
    let path = format!(
        "/repos/r/trend.svg?benchmark={}&last=10&width=400&height=180",
        enc(HOSTILE)
    );
    let image = raw(&app, &path).await;
    assert_eq!(image.status, StatusCode::OK, "{}", image.body);
    assert_eq!(image.headers[header::CONTENT_TYPE], "image/svg+xml");
    assert_eq!(image.headers[header::CACHE_CONTROL], "public, max-age=300");
    let doc = roxmltree::Document::parse(&image.body).expect("well-formed SVG");
    let svg = doc.root_element();
    assert_eq!(svg.attribute("width"), Some("400"));
    assert_eq!(svg.attribute("height"), Some("180"));
    let points = svg
        .descendants()
        .filter(|n| n.tag_name().name() == "circle")
        .count();
    assert_eq!(points, 10, "the last 10 commits");
    // Self-contained: no stylesheet, script or outside resource.
    for tag in ["script", "style", "image", "foreignObject"] {
        assert!(
            svg.descendants().all(|n| n.tag_name().name() != tag),
            "{tag}"
        );
    }
    assert!(!image.body.contains("<script>alert"));
}

#[tokio::test]
async fn the_trend_image_refuses_ambiguous_unknown_and_oversized_requests() {
    let app = TestApp::new().await;
    stepped(&app).await;
    for (path, status, expect) in [
        // Without a metric, a benchmark of one machine shows its time.
        ("/repos/r/trend.svg?benchmark=steady", 200, ""),
        ("/repos/r/trend.svg?benchmark=steady&metric=rate", 200, ""),
        ("/repos/r/trend.svg?benchmark=nope", 404, "not found"),
        (
            "/repos/r/trend.svg?benchmark=steady&metric=nope",
            404,
            "no series",
        ),
        ("/repos/nope/trend.svg?benchmark=steady", 404, "not found"),
        ("/repos/r/trend.svg", 422, "benchmark"),
        (
            "/repos/r/trend.svg?benchmark=steady&metric=rate&last=100000",
            422,
            "last must be between 2 and 1000",
        ),
        (
            "/repos/r/trend.svg?benchmark=steady&metric=rate&last=1",
            422,
            "last must be",
        ),
        (
            "/repos/r/trend.svg?benchmark=steady&metric=rate&width=99999",
            422,
            "width must be",
        ),
        (
            "/repos/r/trend.svg?benchmark=steady&metric=rate&height=-1",
            422,
            "height",
        ),
    ] {
        if status == 200 {
            let image = raw(&app, path).await;
            assert_eq!(image.status, StatusCode::OK, "{path}: {}", image.body);
            let metric = if path.contains("metric=rate") {
                "rate"
            } else {
                "time"
            };
            assert!(image.body.contains(&format!("steady · {metric}")), "{path}");
            continue;
        }
        let (got, body) = app.get(path).await;
        assert_eq!(got.as_u16(), status, "{path}: {body}");
        {
            assert!(
                body["error"].as_str().unwrap().contains(expect),
                "{path}: {body}"
            );
        }
    }
}

/// The target of the link labelled `label` in a page.
pub fn link(body: &str, label: &str) -> String {
    let end = body
        .find(&format!("\">{label}</a>"))
        .unwrap_or_else(|| panic!("{label}: {body}"));
    let start = body[..end].rfind("href=\"").unwrap() + 6;
    let href = &body[start..];
    href[..href.find('"').unwrap()]
        .replace("&#38;", "&")
        .replace("&amp;", "&")
}

#[tokio::test]
async fn the_benchmark_page_moves_through_history_with_plain_links() {
    let app = TestApp::new().await;
    let (_repo, shas) = stepped(&app).await;
    let newest = raw(&app, "/repos/r/benchmarks/steady?last=5").await;
    assert_eq!(newest.status, StatusCode::OK);
    let head = shas.last().unwrap();
    assert!(newest.body.contains(&format!("/commits/{head}")));
    assert!(
        newest.body.contains(&format!("to {} (", &head[..7])),
        "the span names the head"
    );
    let older = link(&newest.body, "← older");
    assert!(older.starts_with("?last=5&to="), "{older}");
    let page = raw(&app, &format!("/repos/r/benchmarks/steady{older}")).await;
    assert_eq!(page.status, StatusCode::OK);
    let before = &shas[shas.len() - 6];
    assert!(
        page.body.contains(&format!("/commits/{before}")),
        "the window before"
    );
    assert!(
        !page.body.contains(&format!("/commits/{head}\"")),
        "without the head"
    );
    let back = link(&page.body, "newest");
    assert_eq!(back, "?last=5");
    let zoomed = raw(
        &app,
        &format!(
            "/repos/r/benchmarks/steady{}",
            link(&newest.body, "zoom out")
        ),
    )
    .await;
    assert!(
        zoomed.body.contains("the newest 10 commits"),
        "{}",
        zoomed.body
    );
}

#[tokio::test]
async fn the_benchmark_page_links_its_exports_and_shows_the_embed_snippet() {
    let app = TestApp::new().await;
    stepped(&app).await;
    let page = raw(&app, "/repos/r/benchmarks/steady").await;
    assert_eq!(page.status, StatusCode::OK);
    let csv = "/api/v1/repos/r/series?benchmark=steady&amp;metric=rate&amp;machine=";
    assert!(page.body.contains(csv), "{}", page.body);
    assert!(page.body.contains("&amp;format=csv\">CSV</a>"));
    assert!(
        page.body.contains(
            "![steady rate](http://bench.example/repos/r/trend.svg?benchmark=steady&#38;metric=rate&#38;machine="
        ),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn the_repository_page_leads_with_what_changed_and_compares_any_two_commits() {
    let app = TestApp::new().await;
    let (_repo, shas) = stepped(&app).await;
    let page = raw(&app, "/repos/r").await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    let summary = &body[body.find("<section class=\"summary\">").expect("a summary")..];
    let rows = &summary[summary.find("<tbody>").unwrap()..];
    let first_row = &rows[..rows.find("</tr>").unwrap()];
    assert!(
        first_row.contains("worse"),
        "the 20 % step leads: {first_row}"
    );
    assert!(first_row.contains("class=\"spark\""), "with its sparkline");
    assert!(summary.contains("3 series"), "{summary}");
    let open = body
        .find("Open regressions")
        .expect("open regressions are listed");
    assert!(
        open < body.find("<section class=\"summary\">").unwrap(),
        "and come first"
    );
    // The home page and the API count them.
    let home = raw(&app, "/").await;
    assert!(
        home.body
            .contains("href=\"/repos/r/regressions?kind=regression&amp;state=open\">1</a>"),
        "{}",
        home.body
    );
    let (_, repos) = app.get("/api/v1/repos").await;
    assert_eq!(repos[0]["open_regressions"], 1, "{repos}");
    // Uploaded results are the commit's state, not a failed or missing job.
    assert!(body.contains("badge uploaded"), "{body}");
    assert!(!body.contains("badge failed"));

    let by_name = raw(&app, "/repos/r?sort=name").await;
    let names = &by_name.body[by_name.body.find("<section class=\"summary\">").unwrap()..];
    assert!(names.find("steady").unwrap() > names.find("&lt;").unwrap_or(0));

    // The compare form answers with the compare page's address.
    let (base, head) = (&shas[3][..10], &shas[20][..10]);
    let form = raw(&app, &format!("/repos/r/compare?base={base}&head={head}")).await;
    assert_eq!(form.status, StatusCode::SEE_OTHER);
    let target = form.headers[header::LOCATION].to_str().unwrap().to_owned();
    assert_eq!(target, format!("/repos/r/compare/{base}...{head}"));
    assert_eq!(raw(&app, &target).await.status, StatusCode::OK);
    let parent = raw(&app, &format!("/repos/r/compare?head={head}")).await;
    assert_eq!(
        parent.headers[header::LOCATION],
        format!("/repos/r/compare/{head}").as_str()
    );
    let hostile = raw(&app, "/repos/r/compare?base=a%2F..%2Fb%3Fx&head=%3Cb%3E").await;
    assert_eq!(
        hostile.headers[header::LOCATION],
        "/repos/r/compare/a%2F..%2Fb%3Fx...%3Cb%3E",
        "form fields stay inside the compare address"
    );
}
