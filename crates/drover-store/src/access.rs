//! API access in the storage seam: the tokens HTTP callers present and the
//! idempotency markers that make a retried request safe (`crate::access`
//! re-exports these under their old paths).
//!
//! **Tokens** (`api_tokens`) are **not tenant-scoped**: a token is looked
//! up by its hash *before* any tenant is known (the lookup is what tells
//! the tenant), and an unscoped admin token spans every tenant. The tenant
//! a token is confined to is a column (`scope_tenant`), not an owner. So
//! the table is a system table: on PostgreSQL row-level security is
//! enabled and forced with a policy for the system role only, and the
//! runtime role holds no grant on it. Only the SHA-256 of a token is ever
//! stored; the token itself is shown to its owner once and never kept.
//!
//! **Idempotency markers** (`idempotency_markers`) are tenant data: each
//! one is scoped by tenant, principal (the token's id) and route, and is
//! read and written under the runtime role with the tenant set, so RLS
//! bounds it. A marker outlives the item it produced (it has its own
//! retention, default [`MARKER_RETENTION_DEFAULT`]), so a retry after the
//! item was purged still meets its stored answer. The sweep deletes
//! expired markers ([`AccessStore::marker_purge`]).
//!
//! Invariants every backend keeps (contract cases in
//! `store/contract/access.rs`):
//! - [`AccessStore::marker_begin`] is a claim: of many concurrent begins on
//!   one key, exactly one gets [`MarkerBegin::Started`]; the others see the
//!   marker in flight, or its stored answer once finished, or a mismatch
//!   when their fingerprint differs.
//! - An expired marker, or one left in flight longer than the stale limit
//!   (its request died), is taken over by the next begin.
//! - [`AccessStore::token_by_hash`] never answers a revoked token.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use drover_core::error::Result;

/// How long a marker keeps its answer by default: 24 hours, the
/// retention the HTTP API publishes.
pub const MARKER_RETENTION_DEFAULT: Duration = Duration::from_secs(24 * 3600);
/// How long a marker may stay in flight before the next request with its
/// key takes it over (the first request died between begin and finish).
pub const MARKER_STALE_DEFAULT: Duration = Duration::from_secs(60);
/// How many expired markers one purge statement deletes by default.
pub const MARKER_PURGE_BATCH_DEFAULT: u32 = 5000;

/// A token to store: its hash and grants. The token itself never reaches
/// the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    /// The token's id (shown in lists, stamped as the actor).
    pub id: Uuid,
    /// The SHA-256 of the token, lowercase hex.
    pub hash: String,
    /// `viewer`, `operator`, `admin` or `worker`.
    pub role: String,
    /// The one tenant it sees; `None` sees every tenant.
    pub scope_tenant: Option<Uuid>,
    /// The kinds it may enqueue (names or `prefix.*`, `*` for all).
    pub enqueue: Vec<String>,
    /// A free label for people.
    pub label: String,
    /// What a `worker` token may claim: `<lane>:<kind>` grants (lane a
    /// name or `*`; kind a name, `prefix.*` or `*`). Empty for every other
    /// role (a CHECK in both schemas).
    pub work: Vec<String>,
}

/// A stored token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRow {
    /// Its id.
    pub id: Uuid,
    /// Its hash (never the token).
    pub hash: String,
    /// Its role.
    pub role: String,
    /// Its tenant, if scoped.
    pub scope_tenant: Option<Uuid>,
    /// Its enqueue grants.
    pub enqueue: Vec<String>,
    /// Its label.
    pub label: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<DateTime<Utc>>,
    /// Its work grants (a `worker` token's; see [`NewToken::work`]).
    #[serde(default)]
    pub work: Vec<String>,
}

/// What identifies an idempotency marker: the key and its scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MarkerKey {
    /// The tenant the request runs under.
    pub tenant_id: Uuid,
    /// The principal (token id) that sent it.
    pub principal: Uuid,
    /// The route (`POST /v1/items`).
    pub route: String,
    /// The `Idempotency-Key` header's value.
    pub key: String,
}

/// One request's claim in [`AccessStore::marker_begin_many`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerClaim {
    /// The marker.
    pub key: MarkerKey,
    /// A hash of what the request asks.
    pub fingerprint: String,
}

/// What became of one input of
/// [`Store::item_insert_each_claimed`](crate::Store::item_insert_each_claimed).
// One per request of a batch and short-lived: boxing the larger variant
// would cost an allocation per request for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Claimed {
    /// Its marker was not started (in flight, another payload, or answered
    /// before): that settles the request; nothing was written for it.
    Settled(MarkerBegin),
    /// It went to the insert (its marker started, or it holds none): the
    /// row it landed or met, or its own error.
    Written(drover_core::Result<drover_core::item::Inserted>),
}

/// One request's answer in [`AccessStore::marker_finish_many`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerAnswer {
    /// The marker the request holds.
    pub key: MarkerKey,
    /// The HTTP status.
    pub status: u16,
    /// The response body.
    pub body: String,
}

/// What [`AccessStore::marker_begin`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkerBegin {
    /// No live marker: this request now holds it and must finish or
    /// release it.
    Started,
    /// Another request with this key is in flight.
    InFlight,
    /// A marker with this key was made for a different request payload.
    Mismatch,
    /// The request already completed: its stored answer.
    Completed {
        /// The HTTP status.
        status: u16,
        /// The response body.
        body: String,
    },
}

/// The access entity of the storage seam; see the module docs.
#[async_trait]
pub trait AccessStore: Send + Sync {
    /// Stores a token (system operation).
    ///
    /// # Errors
    /// [`Error::Conflict`](drover_core::Error::Conflict) when its id or hash exists.
    async fn token_insert(&self, token: &NewToken) -> Result<TokenRow>;

    /// The live (unrevoked) token with this hash (system operation).
    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>>;

    /// Every token, revoked ones included, oldest first (system operation).
    async fn token_list(&self) -> Result<Vec<TokenRow>>;

    /// Revokes a token; false when there is no live token with that id.
    async fn token_revoke(&self, id: Uuid) -> Result<bool>;

    /// Claims the marker for a request with `fingerprint` (a hash of what
    /// the request asks), expiring `retention` from now; a marker in flight
    /// for `stale_after` or more is taken over. See [`MarkerBegin`].
    async fn marker_begin(
        &self,
        key: &MarkerKey,
        fingerprint: &str,
        retention: Duration,
        stale_after: Duration,
    ) -> Result<MarkerBegin>;

    /// Stores the answer of the request holding the marker.
    async fn marker_finish(&self, key: &MarkerKey, status: u16, body: &str) -> Result<()>;

    /// Gives up a marker still in flight (its request failed in a way a
    /// retry may not meet again, such as the database being down).
    async fn marker_release(&self, key: &MarkerKey) -> Result<()>;

    /// [`AccessStore::marker_begin`] for many requests in one short
    /// transaction, committed before any of them runs (so another request
    /// with one of the keys sees it in flight at once): one answer per
    /// claim, in order. A key that appears twice is claimed once; the
    /// later copy sees the first in flight (or a mismatch).
    ///
    /// The default calls [`AccessStore::marker_begin`] per claim; the SQL
    /// backends override it with one transaction.
    async fn marker_begin_many(
        &self,
        claims: &[MarkerClaim],
        retention: Duration,
        stale_after: Duration,
    ) -> Result<Vec<MarkerBegin>> {
        let mut out = Vec::with_capacity(claims.len());
        for c in claims {
            out.push(
                self.marker_begin(&c.key, &c.fingerprint, retention, stale_after)
                    .await?,
            );
        }
        Ok(out)
    }

    /// [`AccessStore::marker_finish`] for many markers in one transaction.
    /// The default calls it per answer.
    async fn marker_finish_many(&self, answers: &[MarkerAnswer]) -> Result<()> {
        for a in answers {
            self.marker_finish(&a.key, a.status, &a.body).await?;
        }
        Ok(())
    }

    /// Deletes up to `batch` expired markers (system operation).
    async fn marker_purge(&self, batch: u32) -> Result<u64>;
}

/// What a begin that did not take the marker reports, from the marker's
/// row: the one rule every backend applies (a different fingerprint is a
/// mismatch whatever the state; a finished marker replays its answer).
pub fn classify(
    stored_fingerprint: &str,
    fingerprint: &str,
    state: &str,
    status: Option<u16>,
    body: Option<String>,
) -> MarkerBegin {
    if stored_fingerprint != fingerprint {
        return MarkerBegin::Mismatch;
    }
    match (state, status, body) {
        ("done", Some(status), Some(body)) => MarkerBegin::Completed { status, body },
        _ => MarkerBegin::InFlight,
    }
}
