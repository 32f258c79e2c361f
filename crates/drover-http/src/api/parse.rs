//! Request parsing that answers RFC 9457 problems naming the field: JSON
//! bodies and query strings through `serde_path_to_error`, cursors, and
//! status names (the last two read by the shared item filter, `filter`).

use chrono::{DateTime, Utc};
use drover::Status;
use drover::store::ListCursor;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::problem::Problem;

/// Parses a JSON body; a problem names the member at fault.
///
/// # Errors
/// 400 naming the JSON path (`items[3].kind`) or `body`.
pub fn json<T: DeserializeOwned>(body: &[u8]) -> Result<T, Problem> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "body".to_owned() } else { path };
        Problem::invalid(field, e.inner().to_string())
    })
}

/// Parses a query string; a problem names the parameter at fault.
///
/// # Errors
/// 400 naming the parameter or `query`.
pub fn query<T: DeserializeOwned>(raw: Option<&str>) -> Result<T, Problem> {
    let de =
        serde_urlencoded::Deserializer::new(form_urlencoded::parse(raw.unwrap_or("").as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "query".to_owned()
        } else {
            path
        };
        Problem::invalid(field, e.inner().to_string())
    })
}

/// A status by name.
///
/// # Errors
/// 400 naming `field`.
pub fn status(field: &str, s: &str) -> Result<Status, Problem> {
    crate::filter::status(s).ok_or_else(|| {
        Problem::invalid(
            field,
            format!("{s:?} is not a status (pending, claimed, done, failed, cancelled)"),
        )
    })
}

/// The opaque cursor of a page: the last item's creation time in
/// microseconds and its id.
pub fn cursor_text(created_at: DateTime<Utc>, id: Uuid) -> String {
    crate::filter::cursor_text(created_at, id)
}

/// Reads a cursor made by [`cursor_text`].
///
/// # Errors
/// 400 naming `cursor`.
pub fn cursor(text: &str) -> Result<ListCursor, Problem> {
    crate::filter::cursor(text)
        .ok_or_else(|| Problem::invalid("cursor", "is not a cursor this API handed out"))
}
