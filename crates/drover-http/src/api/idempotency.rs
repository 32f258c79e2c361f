//! The `Idempotency-Key` header, as the IETF httpapi draft specifies it.
//!
//! A request that carries the header claims a marker scoped by tenant,
//! principal and route ([`drover::access::MarkerKey`]) whose fingerprint is
//! the SHA-256 of the request body's canonical JSON ([`fingerprint`]): the
//! same JSON with its members in another order, or spaced otherwise, is
//! the same request. Then:
//! - the first request runs and its answer (status and body) is stored;
//! - a retry after completion gets that stored answer again, marked
//!   `Idempotent-Replayed: true`;
//! - the same key with a different body answers 422;
//! - the same key while the first request is in flight answers 409;
//! - an answer of 5xx (the database down) is not stored: the marker is
//!   released so a retry runs again.
//!
//! Markers keep their answer for [`MARKER_RETENTION_DEFAULT`] (published
//! in docs/http.md) and the sweep purges them after; a retry within it
//! meets its marker even when the item itself was purged.

use std::future::Future;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drover::access::{
    MARKER_RETENTION_DEFAULT, MARKER_STALE_DEFAULT, MarkerBegin, MarkerClaim, MarkerKey,
};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::AppState;
use crate::problem::{PROBLEM_JSON, Problem};

/// The request header.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The header a replayed answer carries.
pub const REPLAYED: &str = "idempotent-replayed";
/// The longest key accepted, in bytes.
pub const KEY_MAX_BYTES: usize = 255;

/// An answer as it is stored and replayed: a status and a JSON body.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The body (JSON, or problem+json when `problem`).
    pub body: String,
    /// True for a problem body.
    pub problem: bool,
}

impl Answer {
    /// A JSON answer.
    pub fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Answer {
        match serde_json::to_string(value) {
            Ok(body) => Answer {
                status,
                body,
                problem: false,
            },
            Err(e) => {
                tracing::warn!(error = %e, "answer did not serialise");
                Answer::from(Problem::internal())
            }
        }
    }
}

impl From<Problem> for Answer {
    fn from(p: Problem) -> Self {
        Answer {
            status: p.status_code(),
            body: serde_json::to_string(&p).unwrap_or_default(),
            problem: true,
        }
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let ct = if self.problem || self.status.as_u16() >= 400 {
            PROBLEM_JSON
        } else {
            "application/json"
        };
        let mut res = (self.status, self.body).into_response();
        res.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
        res
    }
}

/// The request's `Idempotency-Key`, if it sent one: 1 to [`KEY_MAX_BYTES`]
/// bytes of visible ASCII or space, as the document's schema says
/// ([`super::contract::idempotency_key_schema`]). The draft makes the value
/// a structured-field string, so quotes around a non-empty key are
/// dropped (`"k"` and `k` are one key).
///
/// # Errors
/// 400 naming the header for any other value.
pub fn key_of(headers: &HeaderMap) -> Result<Option<String>, Problem> {
    let Some(v) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    let raw = v.as_bytes();
    if raw.is_empty() || raw.len() > KEY_MAX_BYTES {
        return Err(Problem::invalid(
            "Idempotency-Key",
            format!("must be 1 to {KEY_MAX_BYTES} bytes"),
        ));
    }
    let text = std::str::from_utf8(raw)
        .ok()
        .filter(|t| t.bytes().all(|b| (0x20..=0x7e).contains(&b)))
        .ok_or_else(|| Problem::invalid("Idempotency-Key", "must be visible ASCII or space"))?;
    let text = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .filter(|t| !t.is_empty())
        .unwrap_or(text);
    Ok(Some(text.to_owned()))
}

/// Runs `work` at most once per key: see the module docs. Without a key it
/// just runs.
pub async fn once<F, Fut>(
    state: &AppState,
    key: Option<String>,
    tenant: Uuid,
    principal: Uuid,
    route: &str,
    body: &[u8],
    work: F,
) -> Response
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Answer>,
{
    let Some(key) = key else {
        return work().await.into_response();
    };
    let claim = claim_of(key, tenant, principal, route, body);
    let queue = &state.queue;
    let begun = queue
        .marker_begin(
            &claim.key,
            &claim.fingerprint,
            MARKER_RETENTION_DEFAULT,
            MARKER_STALE_DEFAULT,
        )
        .await;
    let marker = claim.key;
    match begun {
        Err(e) => Problem::from(e).into_response(),
        Ok(MarkerBegin::Started) => {
            let answer = work().await;
            let stored = if answer.status.is_server_error() {
                queue.marker_release(&marker).await
            } else {
                queue
                    .marker_finish(&marker, answer.status.as_u16(), &answer.body)
                    .await
            };
            if let Err(e) = stored {
                // The answer stands; the marker stays in flight until its
                // stale limit, when a retry takes it over.
                tracing::warn!(error = %e, "idempotency marker not settled");
            }
            answer.into_response()
        }
        Ok(other) => settled(other),
    }
}

/// The marker claim of a request: the key scoped by tenant, principal and
/// route, the fingerprint that of the body ([`fingerprint`]).
pub fn claim_of(
    key: String,
    tenant: Uuid,
    principal: Uuid,
    route: &str,
    body: &[u8],
) -> MarkerClaim {
    MarkerClaim {
        key: MarkerKey {
            tenant_id: tenant,
            principal,
            route: route.to_owned(),
            key,
        },
        fingerprint: fingerprint(body),
    }
}

/// The fingerprint of a request body: the SHA-256 of its canonical JSON
/// (members of every object sorted by name, no insignificant whitespace,
/// numbers and strings as serde_json writes them), so two bodies a JSON
/// reader cannot tell apart are one request. A body that is not JSON (the
/// id of a retry or cancel) is hashed as it is.
pub fn fingerprint(body: &[u8]) -> String {
    let mut hash = Sha256::new();
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v) => canonical(&v, &mut hash),
        Err(_) => hash.update(body),
    }
    hex::encode(hash.finalize())
}

/// Writes `v` as canonical JSON into `out`. Object members are sorted here
/// rather than trusting the map's order, which a dependency's
/// `preserve_order` feature would change.
fn canonical(v: &serde_json::Value, out: &mut Sha256) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            out.update(b"{");
            for (i, (name, value)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.update(b",");
                }
                out.update(Value::String(name.clone()).to_string().as_bytes());
                out.update(b":");
                canonical(value, out);
            }
            out.update(b"}");
        }
        Value::Array(items) => {
            out.update(b"[");
            for (i, value) in items.iter().enumerate() {
                if i > 0 {
                    out.update(b",");
                }
                canonical(value, out);
            }
            out.update(b"]");
        }
        scalar => out.update(scalar.to_string().as_bytes()),
    }
}

/// The answer to a request whose marker another request holds or
/// finished: 409 in flight, 422 for another body, the replay when done.
/// (`Started` is not such an answer: the request runs; it answers 500.)
pub fn settled(begun: MarkerBegin) -> Response {
    match begun {
        MarkerBegin::InFlight => {
            Problem::conflict("a request with this Idempotency-Key is still in flight; retry later")
                .field("Idempotency-Key")
                .into_response()
        }
        MarkerBegin::Mismatch => Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency-key-reused",
            "Idempotency-Key reused",
        )
        .detail("this Idempotency-Key was used with a different request body")
        .field("Idempotency-Key")
        .into_response(),
        MarkerBegin::Completed { status, body } => {
            let mut res = Answer {
                status: StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
                body,
                problem: status >= 400,
            }
            .into_response();
            res.headers_mut()
                .insert(REPLAYED, HeaderValue::from_static("true"));
            res
        }
        MarkerBegin::Started => {
            tracing::warn!("a started marker was answered as settled");
            Problem::internal().into_response()
        }
    }
}
