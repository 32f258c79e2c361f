//! `/healthz` and `/readyz`: open without credentials (as is the OpenAPI
//! document). They reveal nothing but whether the server (and its
//! database) answer; a refusal is a problem like every other error.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::problem::Problem;

/// How long `/readyz` waits for the database.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// The process answers.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "the server answers", body = String, content_type = "text/plain")))]
pub async fn healthz() -> (StatusCode, &'static str) {
    (StatusCode::OK, "ok")
}

/// The database answers and its migrations are current.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "ready", body = String, content_type = "text/plain"),
        (status = 503, description = "database unreachable or not migrated", body = Problem, content_type = "application/problem+json")))]
pub async fn readyz(State(state): State<AppState>) -> Response {
    let status = tokio::time::timeout(READY_TIMEOUT, state.queue.migration_status()).await;
    match status {
        Ok(Ok(s)) if s.is_current() => (StatusCode::OK, "ready").into_response(),
        Ok(Ok(_)) => Problem::unavailable("migrations pending").into_response(),
        _ => Problem::unavailable("the database does not answer").into_response(),
    }
}
