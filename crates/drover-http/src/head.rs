//! The request head's limits: a request-target over [`MAX_URI_BYTES`]
//! answers 414 and a header section over [`MAX_HEADER_BYTES`] or
//! [`MAX_HEADER_FIELDS`] answers 431, each as an RFC 9457 problem.
//!
//! Why here and not in the HTTP server: hyper refuses heads past its own
//! limits (a request-target over 65,534 bytes, more than 100 header
//! fields, a head over its read buffer of about 400 KiB) with a bodiless
//! 414 or 431 before any service sees the request, and offers no hook to
//! give those answers a body. These limits sit well inside hyper's, so a
//! head that is too large is refused here, with a problem, unless it is
//! so large that hyper refuses it first (docs/http.md, "Errors").

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::problem::Problem;

/// The longest request-target (path and query) accepted, in bytes.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// The largest header section accepted: the bytes of every field's name
/// and value, each counted with its `: ` and line end.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// The most header fields accepted.
pub const MAX_HEADER_FIELDS: usize = 64;

/// Refuses a request whose head is over the limits; passes the rest on.
pub async fn limit(req: Request, next: Next) -> Response {
    let target = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if target > MAX_URI_BYTES {
        return Problem::new(StatusCode::URI_TOO_LONG, "uri-too-long", "URI too long")
            .detail(format!(
                "the request-target is {target} bytes; the limit is {MAX_URI_BYTES}"
            ))
            .field("uri")
            .into_response();
    }
    let headers = req.headers();
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if headers.len() > MAX_HEADER_FIELDS || bytes > MAX_HEADER_BYTES {
        return Problem::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "header-fields-too-large",
            "Request header fields too large",
        )
        .detail(format!(
            "the request has {} header fields in {bytes} bytes; the limits are \
             {MAX_HEADER_FIELDS} fields and {MAX_HEADER_BYTES} bytes",
            headers.len()
        ))
        .field("headers")
        .into_response();
    }
    next.run(req).await
}
