//! The operator's API on the queue: what the HTTP API and the CLI read and
//! steer beside items (the store as a whole, schedules, events, the outbox,
//! projectors, reconcilers, vacuum, API tokens and idempotency markers), so
//! neither reaches the store directly.
//!
//! Each method is a thin, documented pass to the store's entity method of
//! the same name, with the name checks the queue makes elsewhere (a
//! reconciler's name and key are validated before the store is asked);
//! permission and tenant checks stay with the caller that knows the
//! principal (the HTTP API's token, the CLI's operator).

use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::Result;
use crate::queue::Queue;
use crate::store::{Backend, MigrationStatus};

impl Queue {
    /// The engine the queue's store runs on.
    pub fn backend(&self) -> Backend {
        self.store.backend()
    }

    /// The PostgreSQL schema of the queue's store (`None` off PostgreSQL).
    pub fn pg_schema(&self) -> Option<&str> {
        self.store.pg_schema()
    }

    /// Where the database's migrations stand against the ones this binary
    /// embeds (`/readyz` refuses while one is missing).
    ///
    /// # Errors
    /// [`Error::Unavailable`](crate::Error::Unavailable) when the database
    /// does not answer.
    pub async fn migration_status(&self) -> Result<MigrationStatus> {
        self.store.migration_status().await
    }

    /// The database's clock (PostgreSQL's `now()`; the store's clock on
    /// SQLite and memory).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn db_now(&self) -> Result<DateTime<Utc>> {
        self.store.db_now().await
    }

    /// Every schedule the scheduler has recorded, with its last tick.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn schedule_list(&self) -> Result<Vec<crate::store::schedule::ScheduleRow>> {
        self.store.schedule_list().await
    }

    /// Each table's dead rows as the database counts them (PostgreSQL; none
    /// elsewhere), for `drover vacuum status`.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn table_garbage(&self) -> Result<Vec<crate::store::vacuum::TableGarbage>> {
        self.store.table_garbage().await
    }

    /// The newest position of `tenant`'s event log and when it was appended.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn event_head(&self, tenant: Uuid) -> Result<crate::store::events::EventHead> {
        self.store.event_head(tenant).await
    }

    /// Events of `tenant` after `after` in position order, never skipping
    /// one that commits later; `topics` empty means every topic; at most
    /// `limit` events.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn event_read(
        &self,
        tenant: Uuid,
        after: i64,
        topics: &[String],
        limit: u32,
    ) -> Result<Vec<crate::store::events::Event>> {
        self.store.event_read(tenant, after, topics, limit).await
    }

    /// Outbox rows, as `filter` asks.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn outbox_list(
        &self,
        filter: &crate::store::outbox::OutboxFilter,
    ) -> Result<Vec<crate::store::outbox::OutboxRow>> {
        self.store.outbox_list(filter).await
    }

    /// The outbox's counts per status and its oldest pending row.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn outbox_stats(&self) -> Result<crate::store::outbox::OutboxStats> {
        self.store.outbox_stats().await
    }

    /// Every projector checkpoint row, of one projector or all (system
    /// operation).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn projector_checkpoints(
        &self,
        projector: Option<&str>,
    ) -> Result<Vec<crate::store::projector::CheckpointRow>> {
        self.store.projector_checkpoints(projector).await
    }

    /// Asks the runners of `projector` to rebuild, for `tenant` or every
    /// tenant with a checkpoint. Returns the rows flagged.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for a malformed
    /// projector name (nothing flagged); storage errors.
    pub async fn projector_request_rebuild(
        &self,
        projector: &str,
        tenant: Option<Uuid>,
    ) -> Result<u64> {
        // The name's one check: the store takes it as valid.
        crate::item::validate_kind(projector)?;
        self.store
            .projector_request_rebuild(projector, tenant)
            .await
    }

    /// Every reconciler checkpoint.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn reconcile_checkpoint_list(
        &self,
    ) -> Result<Vec<crate::store::reconcile::Checkpoint>> {
        self.store.reconcile_checkpoint_list().await
    }

    /// A reconciler's records, as `filter` asks.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for a malformed
    /// reconciler name; storage errors.
    pub async fn reconcile_record_list(
        &self,
        filter: &crate::store::reconcile::RecordFilter,
    ) -> Result<Vec<crate::store::reconcile::SyncRecord>> {
        crate::store::reconcile::validate_name(&filter.reconciler)?;
        self.store.reconcile_record_list(filter).await
    }

    /// Settles a record parked for review with `resolution`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) for a malformed
    /// name or key; [`Error::NotFound`](crate::Error::NotFound) for no such
    /// record; [`Error::Conflict`](crate::Error::Conflict) when it has no
    /// review pending.
    pub async fn reconcile_review_resolve(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
        resolution: crate::store::reconcile::Resolution,
    ) -> Result<crate::store::reconcile::SyncRecord> {
        crate::store::reconcile::validate_name(reconciler)?;
        crate::store::reconcile::validate_key(key)?;
        self.store
            .reconcile_review_resolve(tenant, reconciler, key, resolution)
            .await
    }

    /// Stores a new API token (its hash only).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn token_insert(
        &self,
        token: &crate::store::access::NewToken,
    ) -> Result<crate::store::access::TokenRow> {
        self.store.token_insert(token).await
    }

    /// The live or revoked token whose secret hashes to `hash` (hex).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn token_by_hash(
        &self,
        hash: &str,
    ) -> Result<Option<crate::store::access::TokenRow>> {
        self.store.token_by_hash(hash).await
    }

    /// Every API token, revoked ones included.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn token_list(&self) -> Result<Vec<crate::store::access::TokenRow>> {
        self.store.token_list().await
    }

    /// Revokes a live token; `false` when there is no live token `id`.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn token_revoke(&self, id: Uuid) -> Result<bool> {
        self.store.token_revoke(id).await
    }

    /// Claims the idempotency marker `key` for a request with
    /// `fingerprint`, expiring `retention` from now; a marker in flight for
    /// `stale_after` or more is taken over.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn marker_begin(
        &self,
        key: &crate::store::access::MarkerKey,
        fingerprint: &str,
        retention: Duration,
        stale_after: Duration,
    ) -> Result<crate::store::access::MarkerBegin> {
        self.store
            .marker_begin(key, fingerprint, retention, stale_after)
            .await
    }

    /// Stores the answer of the request holding the marker `key`.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn marker_finish(
        &self,
        key: &crate::store::access::MarkerKey,
        status: u16,
        body: &str,
    ) -> Result<()> {
        self.store.marker_finish(key, status, body).await
    }

    /// Gives up the marker `key` still in flight, so a retry runs again.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn marker_release(&self, key: &crate::store::access::MarkerKey) -> Result<()> {
        self.store.marker_release(key).await
    }
}
