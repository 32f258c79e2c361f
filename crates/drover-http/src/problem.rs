//! RFC 9457 problem details: every error the API answers is one
//! `application/problem+json` body with a `type`, a `title`, the HTTP
//! `status`, a `detail`, and, for bad input, the `field` it is about.
//!
//! Invariant: no problem ever carries a token, a hash or a database
//! message verbatim: storage errors are reported by kind only (the detail
//! goes to the log at `warn`, never the credential).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An RFC 9457 problem: what went wrong, for a program and for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Problem {
    /// A URI naming the problem type (`about:blank` style tags under
    /// `urn:drover:problem:`).
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the type.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What happened this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub detail: Option<String>,
    /// The request field (body member, header or query parameter) at fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub field: Option<String>,
}

impl Problem {
    /// A problem of `status` whose type tag is `tag`.
    pub fn new(status: StatusCode, tag: &str, title: &str) -> Self {
        Problem {
            kind: format!("urn:drover:problem:{tag}"),
            title: title.to_owned(),
            status: status.as_u16(),
            detail: None,
            field: None,
        }
    }

    /// Sets the detail.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Names the field at fault.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// 400: the input is malformed; `field` names where.
    pub fn invalid(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::BAD_REQUEST, "invalid-input", "Invalid input")
            .field(field)
            .detail(detail)
    }

    /// 401: no or unknown credentials.
    pub fn unauthorized() -> Self {
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Credentials required",
        )
        .detail("send Authorization: Bearer <token>")
    }

    /// 403: the principal may not do this.
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::FORBIDDEN, "forbidden", "Forbidden").detail(detail)
    }

    /// 404: no such resource (for this principal).
    pub fn not_found(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found").detail(detail)
    }

    /// 409: the resource's state refuses the request.
    pub fn conflict(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::CONFLICT, "conflict", "Conflict").detail(detail)
    }

    /// 503: the database does not answer.
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable",
        )
        .detail(detail)
    }

    /// 500: something the caller cannot fix.
    pub fn internal() -> Self {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal error",
        )
    }

    /// The HTTP status.
    pub fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl From<drover::Error> for Problem {
    fn from(e: drover::Error) -> Self {
        Problem::from(&e)
    }
}

impl From<&drover::Error> for Problem {
    fn from(e: &drover::Error) -> Self {
        use drover::Error as E;
        match e {
            E::InvalidInput { field, reason } => Problem::invalid(*field, reason.clone()),
            E::NotFound(what) => Problem::not_found(format!("{what} not found")),
            E::Conflict(what) => Problem::conflict(what.clone()),
            E::Forbidden(what) => Problem::forbidden(what.clone()),
            E::Unavailable(_) => {
                tracing::warn!(error = %e, "database unavailable");
                Problem::unavailable("the database does not answer; retry later")
            }
            other => {
                tracing::warn!(error = %other, "request failed in storage");
                Problem::internal()
            }
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = self.status_code();
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut res = (status, body).into_response();
        res.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        res
    }
}

/// Turns an error answer that is not a problem yet (axum's own 413 for an
/// oversized body, 405 for a method a route lacks) into one, so every
/// error the API gives is `application/problem+json`.
pub async fn problemize(res: Response) -> Response {
    let status = res.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return res;
    }
    let is_problem = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == PROBLEM_JSON.as_bytes());
    if is_problem {
        return res;
    }
    let (tag, title, detail) = match status {
        StatusCode::PAYLOAD_TOO_LARGE => (
            "payload-too-large",
            "Payload too large",
            "the request body exceeds the server's limit",
        ),
        StatusCode::METHOD_NOT_ALLOWED => (
            "method-not-allowed",
            "Method not allowed",
            "the route does not take this method",
        ),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            "unsupported-media-type",
            "Unsupported media type",
            "send application/json",
        ),
        _ => ("error", "Error", "the request was refused"),
    };
    let mut p = Problem::new(status, tag, title).detail(detail);
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        p = p.field("body");
    }
    let mut out = p.into_response();
    // Keep what the original said about the resource (Allow on a 405).
    for (name, value) in res.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// The result type of every handler.
pub type ApiResult<T> = std::result::Result<T, Problem>;
