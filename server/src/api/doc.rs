//! The OpenAPI document, generated from the handlers' `#[utoipa::path]` attributes and the
//! wire types' `ToSchema` derives as the router is built, and served at
//! `/api/v1/openapi.json`.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::Modify;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

/// The document's fixed parts; paths and schemas come from the routes.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "kymo",
        description = "Continuous benchmarking: repositories, runs, series, verdicts and the \
                       worker protocol. Errors are `{\"error\": \"...\"}` with a 4xx status."
    ),
    modifiers(&WorkerToken)
)]
pub(super) struct ApiDoc;

/// The bearer token workers (and the routes that need one) send.
struct WorkerToken;

impl Modify for WorkerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An admin token (`kymo token create --admin NAME`, or the one `kymo serve` \
                         writes beside its database); changes need it",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "upload_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`kymo token create --upload NAME [--repo R]` (a CI secret; with \
                         `--repo`, good for that repository only), or an admin token",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "worker_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("`kymo token create --worker NAME`"))
                    .build(),
            ),
        );
    }
}

/// The rendered document, built once.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    super::openapi()
        .to_pretty_json()
        .expect("an OpenAPI document serializes")
});

/// The OpenAPI document of this API.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "meta",
    responses((status = 200, description = "OpenAPI 3 document", content_type = "application/json"))
)]
pub(super) async fn openapi_json() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        DOCUMENT.as_str(),
    )
}

/// The `{repo}` path parameter, for `params(RepoPath, ...)` in `#[utoipa::path]`.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[expect(dead_code, reason = "only its documentation is used")]
pub(super) struct RepoPath {
    /// The repository's name.
    repo: String,
}
