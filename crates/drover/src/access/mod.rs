//! API access: the tokens HTTP callers present and the idempotency markers
//! that make a retried request safe.
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
//!
//! The vocabulary (records, [`AccessStore`], [`classify`]) is the store's
//! (`crate::store::access`); this module keeps its public paths.

pub use crate::store::access::{
    AccessStore, Claimed, MARKER_PURGE_BATCH_DEFAULT, MARKER_RETENTION_DEFAULT,
    MARKER_STALE_DEFAULT, MarkerAnswer, MarkerBegin, MarkerClaim, MarkerKey, NewToken, TokenRow,
    classify,
};
