//! The JSON routes under `/v1` and the open health probes.
//!
//! Each route is a handler annotated with `#[utoipa::path]` and registered
//! through [`utoipa_axum`], so the OpenAPI document served at
//! `/v1/openapi.json` (open: it describes the API and holds no data) is
//! generated from the very handlers that answer, with the parts every
//! operation shares applied by [`contract::Contract`] (and `openapi.json`
//! at the crate root is checked against it by a test).

pub mod batches;
pub mod bulk;
pub mod closures;
pub mod contract;
pub mod fairness;
pub mod gather;
mod health;
pub mod idempotency;
pub mod items;
pub mod limits;
pub mod ops;
mod parse;
pub mod rates;
pub mod views;
pub mod work;

use axum::Json;
use axum::extract::OriginalUri;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::problem::Problem;

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The OpenAPI document's fixed parts; the paths come from the handlers.
#[derive(OpenApi)]
#[openapi(
    info(title = "drover", description = "drover's HTTP API: enqueue, inspect, retry and cancel durable work. Every route but /healthz and /readyz needs a bearer token."),
    components(schemas(Problem)),
    modifiers(&Bearer)
)]
pub struct ApiDoc;

/// Every route with its OpenAPI paths, state applied.
pub fn routes(state: AppState) -> OpenApiRouter {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(items::enqueue_one, items::list_items))
        .routes(routes!(items::enqueue_batch))
        .routes(routes!(bulk::bulk))
        .routes(routes!(batches::create_batch, batches::list_batches))
        .routes(routes!(batches::get_batch))
        .routes(routes!(batches::seal_batch))
        .routes(routes!(items::get_item))
        .routes(routes!(batches::get_dependencies))
        .routes(routes!(items::retry_item))
        .routes(routes!(items::cancel_item))
        .routes(routes!(ops::lanes))
        .routes(routes!(ops::lane_pause))
        .routes(routes!(ops::lane_resume))
        .routes(routes!(limits::list_limits))
        .routes(routes!(limits::set_limit, limits::clear_limit))
        .routes(routes!(rates::list_rates))
        .routes(routes!(rates::set_rate, rates::clear_rate))
        .routes(routes!(fairness::list_fairness))
        .routes(routes!(fairness::set_weight, fairness::clear_weight))
        .routes(routes!(fairness::set_lane))
        .routes(routes!(closures::list_closures))
        .routes(routes!(closures::close))
        .routes(routes!(closures::reopen))
        .routes(routes!(ops::workers))
        .routes(routes!(ops::stats))
        .routes(routes!(ops::schedules))
        .routes(routes!(ops::schedule_trigger))
        .routes(routes!(ops::orchestrations))
        .routes(routes!(work::claim::claim))
        .routes(routes!(work::claim::stop))
        .routes(routes!(work::settle::renew))
        .routes(routes!(work::settle::complete))
        .routes(routes!(work::settle::complete_batch))
        .routes(routes!(work::settle::fail))
        .routes(routes!(work::settle::defer))
        .routes(routes!(work::settle::release))
        .routes(routes!(work::progress::progress))
        .routes(routes!(openapi_json))
        .with_state(state)
}

/// The OpenAPI document as generated from the handlers.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let queue = drover::Queue::memory();
    let state = AppState {
        gather: std::sync::Arc::new(gather::Gatherer::new(
            queue.clone(),
            gather::GatherConfig::default(),
        )),
        live: crate::dashboard::live::Live::new(
            queue.clone(),
            crate::dashboard::live::LIVE_INTERVAL_DEFAULT,
        ),
        queue,
        auth: crate::Auth::deny_all(),
        config: std::sync::Arc::new(crate::HttpConfig::default()),
        work: std::sync::Arc::default(),
    };
    let mut doc = routes(state).split_for_parts().1;
    // After the routes are merged: the shared parts apply to every path.
    contract::Contract.modify(&mut doc);
    doc
}

/// This API's OpenAPI 3.1 document, served without credentials: it
/// describes the API and holds no data. Its `servers` entry names the
/// prefix the router is mounted under.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "the OpenAPI document", body = Object)))]
pub async fn openapi_json(OriginalUri(uri): OriginalUri) -> Response {
    static SPEC: std::sync::OnceLock<utoipa::openapi::OpenApi> = std::sync::OnceLock::new();
    let spec = SPEC.get_or_init(openapi);
    let prefix = uri
        .path()
        .strip_suffix("/v1/openapi.json")
        .unwrap_or_default();
    if prefix.is_empty() {
        return Json(spec).into_response();
    }
    let mut mounted = spec.clone();
    mounted.servers = Some(vec![utoipa::openapi::server::Server::new(prefix)]);
    Json(mounted).into_response()
}

/// 404 for an authenticated request to no route.
pub async fn not_found(uri: Uri) -> Problem {
    Problem::not_found(format!("no route {}", uri.path()))
}
