//! Bulk retry and cancel over a set of items, shared by the API's
//! `POST /v1/items/bulk` and the dashboard's "retry all in this group":
//! which items an action can change, and the writes, each one audited with
//! the token as actor exactly as a single retry or cancel is.
//!
//! Invariant: an action only ever matches items in a status it changes
//! ([`BulkAction::acts_on`]), so a repeated request ends.

use drover::store::ListFilter;
use drover::{Item, Status};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::ApiPrincipal;

/// How many single-item writes run at once.
pub const BULK_BATCH: usize = 100;

/// What to do in bulk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    /// Make done, failed or cancelled items pending again.
    Retry,
    /// Cancel pending or claimed items, or discard dead letters (failed).
    Cancel,
}

impl BulkAction {
    /// The statuses the action changes (the store's rule for a single
    /// retry or cancel): a retry makes a done, failed or cancelled item
    /// pending; a cancel ends a pending or claimed one or discards a dead
    /// letter. An item in another status would only be refused.
    pub fn acts_on(self) -> &'static [Status] {
        match self {
            BulkAction::Retry => &[Status::Done, Status::Failed, Status::Cancelled],
            BulkAction::Cancel => &[Status::Pending, Status::Claimed, Status::Failed],
        }
    }
}

/// Retries or cancels each of `matched` as `who`, [`BULK_BATCH`] at a time,
/// each audited with the token as actor exactly as a single retry or cancel
/// is; returns (applied, skipped), skipped being the items whose state
/// refused the change by the time it ran (or that are gone). The API's
/// bulk route and the dashboard's "retry all in this group" both write
/// through here.
///
/// # Errors
/// The first storage error: the items before it stay changed.
pub(crate) async fn apply(
    state: &AppState,
    who: &ApiPrincipal,
    matched: &[Item],
    action: BulkAction,
) -> drover::Result<(u64, u64)> {
    let (mut applied, mut skipped) = (0, 0);
    for chunk in matched.chunks(BULK_BATCH) {
        let writes = chunk.iter().map(|item| {
            let principal = who.queue_principal(item.tenant_id, None);
            let q = state.queue.clone();
            let (tenant, id) = (item.tenant_id, item.id);
            async move {
                match action {
                    BulkAction::Retry => q.retry(&principal, tenant, id).await.map(|_| ()),
                    BulkAction::Cancel => q.cancel(&principal, tenant, id).await.map(|_| ()),
                }
            }
        });
        for r in futures::future::join_all(writes).await {
            match r {
                Ok(()) => applied += 1,
                Err(e)
                    if matches!(
                        e.kind(),
                        drover::ErrorKind::Conflict | drover::ErrorKind::NotFound
                    ) =>
                {
                    skipped += 1
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok((applied, skipped))
}

/// The items `filter` names (at most its limit, newest first) that are in
/// a status `action` changes: the filter's own status when the action acts
/// on it (none when it does not), else one listing per status the action
/// acts on, merged in the listing's order (by id, descending), so
/// the first `limit` of the union are the first `limit` of all of them.
///
/// # Errors
/// Storage errors.
pub(crate) async fn actionable(
    state: &AppState,
    filter: &ListFilter,
    action: BulkAction,
) -> drover::Result<Vec<Item>> {
    let statuses: Vec<Status> = match filter.status {
        Some(s) if action.acts_on().contains(&s) => vec![s],
        Some(_) => return Ok(Vec::new()),
        None => action.acts_on().to_vec(),
    };
    let mut all = Vec::new();
    for status in statuses {
        let one = ListFilter {
            status: Some(status),
            ..filter.clone()
        };
        all.extend(state.queue.list(&one).await?);
    }
    all.sort_by_key(|i| std::cmp::Reverse(i.id));
    all.truncate(filter.limit as usize);
    Ok(all)
}
