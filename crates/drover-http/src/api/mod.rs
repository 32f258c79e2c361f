//! The JSON routes under `/v1` and the open health probes.
//!
//! Each route is a handler annotated with `#[utoipa::path]` and registered
//! through [`utoipa_axum`], so the OpenAPI document served at
//! `/v1/openapi.json` is generated from the very handlers that answer.

mod health;

use axum::http::Uri;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::problem::Problem;

/// The OpenAPI document's fixed parts; the paths come from the handlers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "drover",
        description = "drover's HTTP API: enqueue, inspect, retry and cancel durable work."
    ),
    components(schemas(Problem))
)]
pub struct ApiDoc;

/// Every route with its OpenAPI paths, state applied.
pub fn routes(state: AppState) -> OpenApiRouter {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .with_state(state)
}

/// The OpenAPI document as generated from the handlers.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let state = AppState {
        queue: drover::Queue::memory(),
        auth: crate::Auth::deny_all(),
        config: std::sync::Arc::new(crate::HttpConfig::default()),
    };
    routes(state).split_for_parts().1
}

/// 404 for an authenticated request to no route.
pub async fn not_found(uri: Uri) -> Problem {
    Problem::not_found(format!("no route {}", uri.path()))
}
