//! Decoding rows into drover's types, and the time encoding.
//!
//! Instants are stored as INTEGER microseconds since the Unix epoch; every
//! conversion goes through [`to_micros`] / [`from_micros`] so the encoding
//! is written once. A value that does not decode is a storage error, never a
//! panic.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use crate::{AuditEntry, WorkerRow};
use drover_core::error::{Error, Opaque, Result};
use drover_core::item::{Item, Status};
use drover_core::rules::to_chrono;

/// The stored form of an instant.
pub(super) fn to_micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// An instant from its stored form.
pub(super) fn from_micros(us: i64) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(us)
        .ok_or_else(|| Error::Storage(Opaque::msg(format!("timestamp {us} µs is out of range"))))
}

/// `now + d`, saturating instead of panicking on absurd durations.
pub(super) fn after(now: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    now.checked_add_signed(to_chrono(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// A stored status name.
pub(super) fn status(s: &str) -> Result<Status> {
    s.parse()
        .map_err(|_| Error::Storage(Opaque::msg(format!("unknown status {s:?} in items"))))
}

fn json_err(what: &str, e: serde_json::Error) -> Error {
    Error::Storage(Opaque::msg(format!("stored {what} is not valid JSON: {e}")))
}

/// An item from a `SELECT *` / `RETURNING *` row.
pub(super) fn item(row: &SqliteRow) -> Result<Item> {
    let payload: String = row.try_get("payload")?;
    let lease: Option<i64> = row.try_get("lease_expires_at")?;
    Ok(Item {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        kind: row.try_get("kind")?,
        lane: row.try_get("lane")?,
        group: row.try_get("group_key")?,
        payload: serde_json::from_str(&payload).map_err(|e| json_err("payload", e))?,
        priority: row.try_get("priority")?,
        status: status(row.try_get("status")?)?,
        // A parked item shows the time it was due (crate::parking).
        available_at: crate::parking::shown(from_micros(row.try_get("available_at")?)?),
        attempts: row.try_get("attempts")?,
        max_attempts: row.try_get("max_attempts")?,
        claimed_by: row.try_get("claimed_by")?,
        claim_token: row.try_get::<Option<Uuid>, _>("claim_token")?,
        claim_seq: row.try_get("claim_seq")?,
        lease_expires_at: lease.map(from_micros).transpose()?,
        last_error: row.try_get("last_error")?,
        idempotency_key: row.try_get("idempotency_key")?,
        created_by: row.try_get("created_by")?,
        request_id: row.try_get("request_id")?,
        traceparent: row.try_get("traceparent")?,
        created_at: from_micros(row.try_get("created_at")?)?,
        updated_at: from_micros(row.try_get("updated_at")?)?,
        updated_by: row.try_get("updated_by")?,
        result: opt_json(row, "result")?,
        progress: opt_json(row, "progress")?,
        active_key: row.try_get("active_key")?,
    })
}

/// A nullable JSON text column, decoded.
fn opt_json<T: serde::de::DeserializeOwned>(row: &SqliteRow, col: &str) -> Result<Option<T>> {
    let text: Option<String> = row.try_get(col)?;
    text.map(|t| serde_json::from_str(&t).map_err(|e| json_err(col, e)))
        .transpose()
}

/// An audit entry from `audit_list.sql`.
pub(super) fn audit(row: &SqliteRow) -> Result<AuditEntry> {
    Ok(AuditEntry {
        tenant_id: row.try_get("tenant_id")?,
        item_id: row.try_get("item_id")?,
        action: row.try_get("action")?,
        actor: row.try_get("actor")?,
        detail: row.try_get("detail")?,
        at: from_micros(row.try_get("at")?)?,
    })
}

/// A worker row from `worker_list.sql`.
pub(super) fn worker(row: &SqliteRow) -> Result<WorkerRow> {
    let lanes: String = row.try_get("lanes")?;
    let kinds: String = row.try_get("kinds")?;
    Ok(WorkerRow {
        id: row.try_get("id")?,
        host: row.try_get("host")?,
        pid: row.try_get("pid")?,
        lanes: serde_json::from_str(&lanes).map_err(|e| json_err("lanes", e))?,
        capacity: row.try_get("capacity")?,
        started_at: from_micros(row.try_get("started_at")?)?,
        last_beat_at: from_micros(row.try_get("last_beat_at")?)?,
        state: row.try_get("state")?,
        beat_interval_ms: row.try_get("beat_interval_ms")?,
        kinds: serde_json::from_str(&kinds).map_err(|e| json_err("kinds", e))?,
        version: row.try_get("version")?,
    })
}
