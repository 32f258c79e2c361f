//! Decoding rows of the PostgreSQL backend into drover's types, by column
//! name, so a query may return its columns in any order.

use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::{AuditEntry, WorkerRow};
use drover_core::error::{Error, Opaque, Result};
use drover_core::item::{Item, Status};

/// A status column; an unknown value means the schema and the code disagree.
pub(super) fn status(text: &str) -> Result<Status> {
    text.parse().map_err(|_| {
        Error::Storage(Opaque::msg(format!(
            "unknown item status {text:?} in the database"
        )))
    })
}

/// An `items` row (`SELECT *` / `RETURNING *`).
pub(super) fn item(r: &PgRow) -> Result<Item> {
    Ok(Item {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        kind: r.try_get("kind")?,
        lane: r.try_get("lane")?,
        group: r.try_get("group_key")?,
        payload: r.try_get("payload")?,
        priority: r.try_get("priority")?,
        status: status(r.try_get("status")?)?,
        // A parked item shows the time it was due (crate::parking).
        available_at: crate::parking::shown(r.try_get("available_at")?),
        attempts: r.try_get("attempts")?,
        max_attempts: r.try_get("max_attempts")?,
        claimed_by: r.try_get("claimed_by")?,
        claim_token: r.try_get("claim_token")?,
        claim_seq: r.try_get("claim_seq")?,
        lease_expires_at: r.try_get("lease_expires_at")?,
        last_error: r.try_get("last_error")?,
        idempotency_key: r.try_get("idempotency_key")?,
        created_by: r.try_get("created_by")?,
        request_id: r.try_get("request_id")?,
        traceparent: r.try_get("traceparent")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
        updated_by: r.try_get("updated_by")?,
        result: r.try_get("result")?,
        progress: r
            .try_get::<Option<serde_json::Value>, _>("progress")?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| Error::Storage(Opaque::msg(format!("stored progress: {e}"))))?,
        active_key: r.try_get("active_key")?,
    })
}

/// An `audit` row.
pub(super) fn audit(r: &PgRow) -> Result<AuditEntry> {
    Ok(AuditEntry {
        tenant_id: r.try_get("tenant_id")?,
        item_id: r.try_get("item_id")?,
        action: r.try_get("action")?,
        actor: r.try_get("actor")?,
        detail: r.try_get("detail")?,
        at: r.try_get("at")?,
    })
}

/// A `workers` row.
pub(super) fn worker(r: &PgRow) -> Result<WorkerRow> {
    Ok(WorkerRow {
        id: r.try_get("id")?,
        host: r.try_get("host")?,
        pid: r.try_get("pid")?,
        lanes: r.try_get("lanes")?,
        capacity: r.try_get("capacity")?,
        started_at: r.try_get("started_at")?,
        last_beat_at: r.try_get("last_beat_at")?,
        state: r.try_get("state")?,
        beat_interval_ms: r.try_get("beat_interval_ms")?,
        kinds: r.try_get("kinds")?,
        version: r.try_get("version")?,
    })
}
