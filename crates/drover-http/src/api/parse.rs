//! Request parsing that answers RFC 9457 problems naming the field: JSON
//! bodies and query strings through `serde_path_to_error`, cursors, and
//! status names (the last two read by the shared item filter, `filter`).

use chrono::{DateTime, Utc};
use drover::Status;
use drover::store::ListCursor;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::problem::Problem;

/// Parses a JSON body strictly: one JSON object, then nothing but
/// whitespace. A problem names the member at fault.
///
/// # Errors
/// 400 naming the JSON path (`items[3].kind`) or `body` (also for
/// anything after the value: a body a client and the server could read
/// differently is refused, not half-read).
pub fn json<T: DeserializeOwned>(body: &[u8]) -> Result<T, Problem> {
    // Every request body of this API is one JSON object; serde would read
    // an array into a struct field by field (`[null, null]` as a body of
    // two optional fields), so anything else is refused here.
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(Problem::invalid("body", "must be a JSON object"));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "body".to_owned() } else { path };
        Problem::invalid(field, e.inner().to_string())
    })?;
    de.end().map_err(|e| {
        Problem::invalid(
            "body",
            format!("must hold one JSON value and nothing after it: {e}"),
        )
    })?;
    Ok(value)
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
    Some(text)
        .filter(|t| cursor_shaped(t))
        .and_then(crate::filter::cursor)
        .ok_or_else(|| Problem::invalid("cursor", "is not a cursor this API handed out"))
}

/// True when `text` has the shape the document's pattern for `cursor`
/// gives: up to 18 digits of microseconds (optionally negative), `_`, and
/// a UUID in its simple or hyphenated form. Every such text is a cursor
/// (18 digits stay inside the time range), so the document and the
/// server agree on which are.
fn cursor_shaped(text: &str) -> bool {
    let Some((us, id)) = text.split_once('_') else {
        return false;
    };
    let digits = us.strip_prefix('-').unwrap_or(us);
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    let id_ok = match id.len() {
        32 => hex(id),
        36 => {
            let parts: Vec<&str> = id.split('-').collect();
            parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12]) && parts.iter().all(|p| hex(p))
        }
        _ => false,
    };
    (1..=18).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) && id_ok
}

/// Reads a JSON integer as JSON Schema defines one: any number with no
/// fractional part, so `3.0` is 3 (the document types these members
/// `integer`, and a schema-valid body must be accepted).
fn whole_number<E: serde::de::Error, T: TryFrom<i64>>(n: &serde_json::Number) -> Result<T, E> {
    let int = n.as_i64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= i64::MIN as f64 && *f < i64::MAX as f64)
            // The filter bounds it to i64's range and no fraction.
            .map(|f| f as i64)
    });
    int.and_then(|i| T::try_from(i).ok())
        .ok_or_else(|| E::custom(format!("{n} is not an integer in range")))
}

/// `deserialize_with` for an integer member ([`whole_number`]).
pub fn whole<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<i64>,
{
    let n = <serde_json::Number as serde::Deserialize>::deserialize(d)?;
    whole_number(&n)
}

/// `deserialize_with` for an optional (or `null`) integer member
/// ([`whole_number`]).
pub fn whole_opt<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<i64>,
{
    let n = <Option<serde_json::Number> as serde::Deserialize>::deserialize(d)?;
    n.map(|n| whole_number(&n)).transpose()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Optional {
        #[serde(default)]
        group: Option<String>,
        #[serde(default)]
        tenant_id: Option<Uuid>,
    }

    /// A body of optional members read from an array (serde's sequence
    /// form of a struct) was accepted as "nothing given".
    #[test]
    fn a_body_must_be_an_object() {
        for body in [&b"[null, null]"[..], b"null", b"\"x\"", b"  [ ]", b""] {
            let e = json::<Optional>(body).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("body"), "{body:?}");
        }
        let ok = json::<Optional>(b" {\"group\": \"g\"}").unwrap();
        assert_eq!((ok.group.as_deref(), ok.tenant_id), (Some("g"), None));
    }
}
