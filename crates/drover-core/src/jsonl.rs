//! JSON Lines import: one line of text to one checked [`NewItem`].
//!
//! Each line is one item object with the fields of the item model: `kind` is
//! required; `lane`, `group`, `payload`, `priority`, `available_at`, `max_attempts`,
//! `idempotency_key`, `unique_while_active` (a boolean: the key holds only
//! while the item is active), `id`, `tenant_id`, `request_id` and
//! `traceparent` are optional; any other field (status, attempts, claim fields, timestamps) is
//! ignored because the store stamps it.
//!
//! Invariant: a line either becomes an item that passed
//! [`NewItem::validate`] at the default payload limit, or an
//! [`Error::InvalidInput`] naming the field it breaks; input text is never
//! echoed back in the error, so a hostile line cannot smuggle text into logs.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::Error;
use crate::item::{DEFAULT_MAX_PAYLOAD_BYTES, NewItem};

/// One line of JSON Lines to a checked item, its tenant `default_tenant`
/// unless the line names one.
///
/// # Errors
/// [`Error::InvalidInput`] naming the field the line breaks.
pub fn parse_line(text: &str, default_tenant: Uuid) -> Result<NewItem, Error> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::invalid("input", format!("is not JSON (column {})", e.column())))?;
    let Value::Object(obj) = value else {
        return Err(Error::invalid("input", "must be a JSON object"));
    };
    let kind = string(&obj, "kind")?.ok_or_else(|| Error::invalid("kind", "is required"))?;
    let payload = match obj.get("payload") {
        Some(v) => v.clone(),
        None => serde_json::json!({}),
    };
    let mut item = NewItem::new(kind, payload).with_tenant(default_tenant);
    if let Some(v) = uuid(&obj, "id")? {
        item = item.with_id(v);
    }
    if let Some(v) = uuid(&obj, "tenant_id")? {
        item = item.with_tenant(v);
    }
    if let Some(v) = string(&obj, "lane")? {
        item = item.with_lane(v);
    }
    if let Some(v) = int(&obj, "priority", i16::MIN.into(), i16::MAX.into())? {
        item = item.with_priority(i16::try_from(v).unwrap_or_default());
    }
    if let Some(v) = int(&obj, "max_attempts", 1, i32::MAX.into())? {
        item = item.with_max_attempts(i32::try_from(v).unwrap_or(1));
    }
    if let Some(v) = string(&obj, "available_at")? {
        let at = DateTime::parse_from_rfc3339(&v)
            .map_err(|_| Error::invalid("available_at", "is not an RFC 3339 time"))?;
        item = item.with_available_at(at.with_timezone(&Utc));
    }
    if let Some(v) = string(&obj, "idempotency_key")? {
        item = item.with_key(v);
    }
    match obj.get("unique_while_active") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => item.unique_while_active = true,
        Some(_) => return Err(Error::invalid("unique_while_active", "must be a boolean")),
    }
    item.group = string(&obj, "group")?;
    item.request_id = string(&obj, "request_id")?;
    item.traceparent = string(&obj, "traceparent")?;
    item.validate(DEFAULT_MAX_PAYLOAD_BYTES)?;
    Ok(item)
}

/// A string field; absent or `null` is `None`.
fn string(obj: &Map<String, Value>, field: &'static str) -> Result<Option<String>, Error> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::invalid(field, "must be a string")),
    }
}

fn uuid(obj: &Map<String, Value>, field: &'static str) -> Result<Option<Uuid>, Error> {
    string(obj, field)?
        .map(|s| Uuid::parse_str(&s).map_err(|_| Error::invalid(field, "is not a UUID")))
        .transpose()
}

fn int(
    obj: &Map<String, Value>,
    field: &'static str,
    min: i64,
    max: i64,
) -> Result<Option<i64>, Error> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_i64() {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(Error::invalid(
                field,
                format!("must be an integer from {min} to {max}"),
            )),
        },
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_the_field_it_breaks() {
        let t = Uuid::nil();
        let cases = [
            (r#"{"lane":"x"}"#, "invalid kind:"),
            (r#"{"kind":"Bad Kind"}"#, "invalid kind:"),
            (r#"{"kind":"k","lane":"A"}"#, "invalid lane:"),
            (r#"{"kind":"k","group":"Customer 42"}"#, "invalid group:"),
            (r#"{"kind":"k","group":7}"#, "invalid group:"),
            (r#"{"kind":"k","priority":40000}"#, "invalid priority:"),
            (r#"{"kind":"k","max_attempts":0}"#, "invalid max_attempts:"),
            (r#"{"kind":"k","id":"nope"}"#, "invalid id:"),
            (r#"{"kind":"k","tenant_id":7}"#, "invalid tenant_id:"),
            (
                r#"{"kind":"k","available_at":"soon"}"#,
                "invalid available_at:",
            ),
            (r#"[1]"#, "invalid input:"),
            (r#"{"kind":"#, "invalid input:"),
        ];
        for (line, want) in cases {
            let e = parse_line(line, t).expect_err(line);
            assert!(e.to_string().starts_with(want), "{line}: {e}");
        }
    }

    #[test]
    fn status_and_claim_fields_are_ignored() {
        let item = parse_line(
            r#"{"kind":"k","status":"done","attempts":9,"claim_token":"x","lease_expires_at":1}"#,
            Uuid::nil(),
        )
        .expect("valid");
        assert_eq!(item.kind, "k");
        assert_eq!(item.lane, "default");
        assert_eq!(item.group, None);
    }

    #[test]
    fn a_group_is_read() {
        let item = parse_line(r#"{"kind":"k","group":"customer:42"}"#, Uuid::nil()).expect("valid");
        assert_eq!(item.group.as_deref(), Some("customer:42"));
        let long = format!(r#"{{"kind":"k","group":"{}"}}"#, "g".repeat(129));
        assert!(parse_line(&long, Uuid::nil()).is_err());
    }
}
