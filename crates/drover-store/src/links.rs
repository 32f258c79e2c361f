//! Links between items: dependencies (an item waits for others) and
//! batches (a callback item once every member is final). The records, the
//! [`LinkStore`] trait and the pure rules every backend computes with.
//!
//! Invariants (docs/dependencies.md; the contract's `links` cases):
//! - A dependant is stored `pending` at [`waiting_at`] until its last
//!   dependency is done (or finished under [`AfterPolicy::Run`]); the
//!   transaction that finishes that dependency releases it (its
//!   `available_at` becomes that transaction's now, or the later time the
//!   producer asked for) and wakes its lane. The claim statement is not
//!   changed: it never reaches [`waiting_at`].
//! - Edges live in a tenant-scoped table; an item that has dependants or is
//!   a batch member carries `linked = true`, and only such an item's
//!   finishing write looks at the edges (a trigger on PostgreSQL and SQLite
//!   whose condition is that flag), so an unlinked item finishes as before.
//! - A dependency outside the tenant, unknown, or a cycle is refused with
//!   `InvalidInput` before anything is written (all or nothing per call).
//! - A batch's callback item is inserted exactly once: in the transaction
//!   that makes the sealed batch's last member final (or that seals a batch
//!   whose members are all final), guarded by the batch row's `fired` flag
//!   and by the callback's id, minted when the batch is created.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use drover_core::error::{Error, Result};
use drover_core::item::{Inserted, Item, NewItem, Status};
pub use drover_core::links::{AfterPolicy, is_waiting_at, waiting_at};

/// When a batch's callback is enqueued, once every member is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchWhen {
    /// Whatever the members ended as.
    #[default]
    Always,
    /// Only when every member is done.
    Success,
    /// Only when at least one member failed or was cancelled.
    Failure,
}

impl BatchWhen {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchWhen::Always => "always",
            BatchWhen::Success => "success",
            BatchWhen::Failure => "failure",
        }
    }

    /// Whether a batch that ended with these counts enqueues its callback.
    pub fn fires(self, counts: &BatchCounts) -> bool {
        let bad = counts.failed + counts.cancelled;
        match self {
            BatchWhen::Always => true,
            BatchWhen::Success => bad == 0,
            BatchWhen::Failure => bad > 0,
        }
    }
}

impl std::str::FromStr for BatchWhen {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "always" => Ok(BatchWhen::Always),
            "success" => Ok(BatchWhen::Success),
            "failure" => Ok(BatchWhen::Failure),
            _ => Err(Error::invalid(
                "when",
                "is not one of always, success, failure",
            )),
        }
    }
}

/// A batch as the producer creates it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewBatch {
    /// Identity, chosen by the caller (members name it).
    pub id: Uuid,
    /// The owning tenant.
    pub tenant_id: Uuid,
    /// The callback item's kind.
    pub callback_kind: String,
    /// The callback item's lane.
    pub callback_lane: String,
    /// Carried in the callback's payload under `payload`.
    pub callback_payload: serde_json::Value,
    /// When the callback is enqueued.
    pub when: BatchWhen,
    /// The callback's id, minted now so a second insert of it collides.
    pub callback_id: Uuid,
    /// Who creates it.
    pub created_by: Uuid,
}

impl NewBatch {
    /// A batch `id` whose callback is an item of `kind` on the default lane,
    /// enqueued always, with an empty payload.
    pub fn new(id: Uuid, kind: impl Into<String>) -> Self {
        NewBatch {
            id,
            tenant_id: Uuid::nil(),
            callback_kind: kind.into(),
            callback_lane: drover_core::item::DEFAULT_LANE.to_owned(),
            callback_payload: serde_json::json!({}),
            when: BatchWhen::Always,
            callback_id: Uuid::now_v7(),
            created_by: Uuid::nil(),
        }
    }

    /// Checks the callback's kind, lane and payload.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the field.
    pub fn validate(&self, max_payload_bytes: usize) -> Result<()> {
        drover_core::item::validate_kind(&self.callback_kind)?;
        drover_core::item::validate_lane(&self.callback_lane)?;
        drover_core::item::validate_payload(&self.callback_payload, max_payload_bytes)
    }
}

/// Members per final status, as counted when each became final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BatchCounts {
    /// Members done.
    pub done: i64,
    /// Members dead-lettered.
    pub failed: i64,
    /// Members cancelled.
    pub cancelled: i64,
}

/// A stored batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRow {
    /// Identity.
    pub id: Uuid,
    /// Owning tenant.
    pub tenant_id: Uuid,
    /// The callback's kind.
    pub callback_kind: String,
    /// The callback's lane.
    pub callback_lane: String,
    /// The payload given at creation.
    pub callback_payload: serde_json::Value,
    /// When the callback is enqueued.
    pub when: BatchWhen,
    /// The callback item's id (it exists once `fired` and `when` held).
    pub callback_id: Uuid,
    /// No more members may join.
    pub sealed: bool,
    /// Every member is final and the batch is sealed: the callback
    /// decision was taken (once).
    pub fired: bool,
    /// Members enqueued.
    pub total: i64,
    /// Members final so far, per status.
    pub counts: BatchCounts,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

impl BatchRow {
    /// Where it stands: `open` (members may join), `sealed` (waiting for
    /// members) or `finished` (every member final; the callback decision
    /// taken).
    pub fn state(&self) -> &'static str {
        match (self.sealed, self.fired) {
            (_, true) => "finished",
            (true, false) => "sealed",
            (false, false) => "open",
        }
    }

    /// Members not final yet.
    pub fn open(&self) -> i64 {
        self.total - self.counts.done - self.counts.failed - self.counts.cancelled
    }
}

/// What ties one item to others, for `drover show` and a handler.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ItemLinks {
    /// The items it waits (or waited) for.
    pub after: Vec<Uuid>,
    /// Its policy for a failed or cancelled dependency (when it has any).
    pub after_policy: Option<AfterPolicy>,
    /// Dependencies not yet done (or finished under `run`).
    pub waiting_on: i64,
    /// Items that wait for it.
    pub dependants: Vec<Uuid>,
    /// The batch it is a member of.
    pub batch: Option<Uuid>,
}

/// The callback item's payload for a batch that ended with `counts`.
pub fn callback_payload(batch: &BatchRow) -> serde_json::Value {
    serde_json::json!({
        "batch": batch.id,
        "done": batch.counts.done,
        "failed": batch.counts.failed,
        "cancelled": batch.counts.cancelled,
        "payload": batch.callback_payload,
    })
}

/// The answer to creating batch `b` again: the stored row when it was
/// created with the same callback, else a conflict.
///
/// # Errors
/// [`Error::Conflict`] when the stored batch has another callback.
pub fn same_batch(b: &NewBatch, row: BatchRow) -> Result<BatchRow> {
    if row.callback_kind == b.callback_kind
        && row.callback_lane == b.callback_lane
        && row.when == b.when
    {
        Ok(row)
    } else {
        Err(Error::Conflict(format!(
            "batch id {} is in use with another callback",
            b.id
        )))
    }
}

/// How a dependency's status at the time an edge is written (or when the
/// dependency becomes final) bears on its dependant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeState {
    /// Not finished yet: the dependant waits for it.
    Open,
    /// Finished in a way that lets the dependant run.
    Resolved,
    /// Finished in a way that dead-letters the dependant (policy `fail`).
    FailsDependant,
}

/// The rule of every backend: a dependency in `status` under `policy`.
/// (PostgreSQL's and SQLite's finishing triggers spell the same rule in
/// SQL; the contract cases hold them to it.)
pub fn edge_state(status: Status, policy: AfterPolicy) -> EdgeState {
    match (status, policy) {
        (Status::Done, _) => EdgeState::Resolved,
        (Status::Failed | Status::Cancelled, AfterPolicy::Run) => EdgeState::Resolved,
        (Status::Failed | Status::Cancelled, AfterPolicy::Fail) => EdgeState::FailsDependant,
        _ => EdgeState::Open,
    }
}

/// The `last_error` of a dependant dead-lettered by its dependency.
pub fn dependency_error(dep: Uuid, status: Status) -> String {
    format!("dependency {dep} ended {status}")
}

/// One linked enqueue, checked: every item of one tenant, each `after`
/// valid, no id twice, no cycle among the call's own items.
#[derive(Debug, Clone)]
pub struct LinkPlan {
    /// The tenant of every item.
    pub tenant: Uuid,
    /// Every distinct dependency named, in first-named order.
    pub deps: Vec<Uuid>,
    /// The batches named, in first-named order.
    pub batches: Vec<Uuid>,
}

/// Checks a linked enqueue (see [`LinkPlan`]).
///
/// # Errors
/// [`Error::InvalidInput`] on `tenant_id` (items of several tenants), `id`
/// (an id twice) or `after` (a cycle, a bad list).
pub fn plan(items: &[NewItem]) -> Result<LinkPlan> {
    let tenant = items.first().map(|i| i.tenant_id).unwrap_or_default();
    let mut ids = HashSet::with_capacity(items.len());
    let mut deps = Vec::new();
    let mut seen_deps = HashSet::new();
    let mut batches = Vec::new();
    for it in items {
        if it.tenant_id != tenant {
            return Err(Error::invalid(
                "tenant_id",
                "a linked enqueue writes items of one tenant",
            ));
        }
        if !ids.insert(it.id) {
            return Err(Error::invalid("id", format!("{} is given twice", it.id)));
        }
        drover_core::links::validate_after(it.id, &it.after)?;
        for d in &it.after {
            if seen_deps.insert(*d) {
                deps.push(*d);
            }
        }
        if let Some(b) = it.batch
            && !batches.contains(&b)
        {
            batches.push(b);
        }
    }
    refuse_cycle(items)?;
    Ok(LinkPlan {
        tenant,
        deps,
        batches,
    })
}

/// Refuses a cycle among the call's items (a stored item never gains a
/// dependency, so a cycle can only be closed inside one call).
fn refuse_cycle(items: &[NewItem]) -> Result<()> {
    let index: HashMap<Uuid, usize> = items.iter().enumerate().map(|(i, x)| (x.id, i)).collect();
    // Kahn's algorithm over the call's own edges.
    let mut indegree = vec![0usize; items.len()];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    for (i, it) in items.iter().enumerate() {
        for d in &it.after {
            if let Some(&j) = index.get(d) {
                indegree[i] += 1;
                out[j].push(i);
            }
        }
    }
    let mut ready: Vec<usize> = (0..items.len()).filter(|&i| indegree[i] == 0).collect();
    let mut seen = 0;
    while let Some(j) = ready.pop() {
        seen += 1;
        for &i in &out[j] {
            indegree[i] -= 1;
            if indegree[i] == 0 {
                ready.push(i);
            }
        }
    }
    if seen != items.len() {
        return Err(Error::invalid("after", "the dependencies form a cycle"));
    }
    Ok(())
}

/// What a linked enqueue writes once its items are inserted and the
/// statuses of the items it names are read (under lock): computed once
/// here, executed by each backend.
#[derive(Debug, Clone, Default)]
pub struct LinkWrite {
    /// Edges: (dependency, dependant, policy, resolved already).
    pub edges: Vec<(Uuid, Uuid, AfterPolicy, bool)>,
    /// Each dependant's open count and the time it asked to run at.
    pub waits: Vec<(Uuid, i32, Option<DateTime<Utc>>)>,
    /// Dependants with nothing open: available at once.
    pub release: Vec<Uuid>,
    /// Dependants a dependency already failed under policy `fail`, with
    /// their `last_error`.
    pub fail: Vec<(Uuid, String)>,
    /// New members per batch.
    pub members: Vec<(Uuid, Vec<Uuid>)>,
}

/// The items a linked enqueue must mark `linked` (and lock): every
/// dependency, and every inserted batch member. `inserted[i]` tells
/// whether `items[i]` was written (not a collision).
pub fn to_mark(items: &[NewItem], inserted: &[bool], plan: &LinkPlan) -> Vec<Uuid> {
    let mut ids = plan.deps.clone();
    for (it, ins) in items.iter().zip(inserted) {
        if *ins && it.batch.is_some() && !ids.contains(&it.id) {
            ids.push(it.id);
        }
    }
    ids
}

/// Computes a linked enqueue's writes from the statuses of the marked
/// items (`status`: what the mark returned).
///
/// # Errors
/// [`Error::InvalidInput`] on `after` naming an item the mark did not find
/// (unknown, or of another tenant: the two are told apart nowhere).
pub fn write_plan(
    items: &[NewItem],
    inserted: &[bool],
    plan: &LinkPlan,
    status: &HashMap<Uuid, Status>,
) -> Result<LinkWrite> {
    if let Some(d) = plan.deps.iter().find(|d| !status.contains_key(d)) {
        return Err(Error::invalid(
            "after",
            format!("{d} is not an item of this tenant"),
        ));
    }
    let mut w = LinkWrite::default();
    for (it, ins) in items.iter().zip(inserted) {
        if !*ins {
            continue;
        }
        if let Some(b) = it.batch {
            match w.members.iter_mut().find(|(id, _)| *id == b) {
                Some((_, m)) => m.push(it.id),
                None => w.members.push((b, vec![it.id])),
            }
        }
        if it.after.is_empty() {
            continue;
        }
        let mut open = 0;
        let mut failed_by = None;
        for d in &it.after {
            let st = status.get(d).copied().unwrap_or(Status::Pending);
            let state = edge_state(st, it.after_policy);
            match state {
                EdgeState::Open => open += 1,
                EdgeState::FailsDependant => {
                    failed_by.get_or_insert((*d, st));
                }
                EdgeState::Resolved => {}
            }
            w.edges
                .push((*d, it.id, it.after_policy, state != EdgeState::Open));
        }
        w.waits.push((it.id, open, it.available_at));
        if let Some((d, st)) = failed_by {
            w.fail.push((it.id, dependency_error(d, st)));
        } else if open == 0 {
            w.release.push(it.id);
        }
    }
    Ok(w)
}

/// The one answer of a one-item linked enqueue.
///
/// # Errors
/// A storage error when the backend answered no item.
pub fn one(out: Vec<Inserted>) -> Result<Inserted> {
    out.into_iter().next().ok_or_else(|| {
        Error::Storage(drover_core::error::Opaque::msg(
            "a linked enqueue of one item answered none",
        ))
    })
}

/// The item as a linked enqueue inserts it: a dependant waits at
/// [`waiting_at`] (the time it asked for is kept with its count).
pub fn as_inserted(item: &NewItem) -> NewItem {
    let mut it = item.clone();
    if !it.after.is_empty() {
        it.available_at = Some(waiting_at());
    }
    it
}

/// How many rows the link tables hold, across tenants: what retention
/// leaves of them is read here (the contract's purge case).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkCensus {
    /// Edges (`item_deps`), one per dependency of a stored dependant.
    pub edges: i64,
    /// Open-dependency counts (`item_waits`), one per stored dependant.
    pub waits: i64,
    /// Batch memberships (`batch_members`), one per stored member.
    pub members: i64,
    /// Batches.
    pub batches: i64,
}

/// Dependencies, batches and their reads.
#[async_trait]
pub trait LinkStore: Send + Sync {
    /// Enqueues `items` (of one tenant) with their links, all or nothing:
    /// each item's `after` may name items stored before or items of this
    /// call (in any order); a `batch` must exist and be open. Answers per
    /// item in input order; a collision (id or key) answers the existing
    /// row and writes no link for it.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an unknown, other tenant's or cyclic
    /// dependency, or an unknown or sealed batch (nothing written);
    /// [`Error::Conflict`] for an id held by another tenant.
    async fn links_insert(&self, items: &[NewItem]) -> Result<Vec<Inserted>>;

    /// What ties item `id` to others.
    ///
    /// # Errors
    /// Database errors.
    async fn links_of(&self, tenant: Uuid, id: Uuid) -> Result<ItemLinks>;

    /// The rows (status and result included) of the items item `id` of
    /// `tenant` waits or waited for, ordered by id; empty for an item
    /// without dependencies or of another tenant. One read.
    ///
    /// # Errors
    /// Database errors.
    async fn links_dependencies(&self, tenant: Uuid, id: Uuid) -> Result<Vec<Item>>;

    /// Creates a batch (open, empty). Creating the same id again with the
    /// same callback answers the stored row.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the id is taken by a different batch.
    async fn batch_create(&self, batch: &NewBatch) -> Result<BatchRow>;

    /// Seals a batch: no more members; once every member is final the
    /// callback decision is taken (in this call when they all already are).
    /// Sealing twice is a no-op.
    ///
    /// # Errors
    /// [`Error::NotFound`] for no such batch of the tenant.
    async fn batch_seal(&self, tenant: Uuid, id: Uuid) -> Result<BatchRow>;

    /// One batch.
    ///
    /// # Errors
    /// Database errors.
    async fn batch_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<BatchRow>>;

    /// The tenant's batches, newest first, at most `limit`.
    ///
    /// # Errors
    /// Database errors.
    async fn batch_list(&self, tenant: Uuid, limit: u32) -> Result<Vec<BatchRow>>;

    /// A batch's members per status (their current status).
    ///
    /// # Errors
    /// Database errors.
    async fn batch_members(&self, tenant: Uuid, id: Uuid) -> Result<Vec<(Status, i64)>>;

    /// The rows of the link tables across tenants (system operation).
    ///
    /// # Errors
    /// Database errors.
    async fn links_census(&self) -> Result<LinkCensus>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_in_one_call_is_refused_forward_references_are_not() {
        let a = NewItem::new("a", serde_json::json!({}));
        let b = NewItem::new("b", serde_json::json!({})).with_after([a.id]);
        // Forward reference: a waits for c, given after it.
        let c = NewItem::new("c", serde_json::json!({}));
        let a2 = a.clone().with_after([c.id]);
        assert!(plan(&[a2.clone(), b.clone(), c.clone()]).is_ok());
        let c2 = c.with_after([b.id]);
        let e = plan(&[a2, b, c2]).expect_err("cycle");
        assert!(e.to_string().contains("cycle"), "{e}");
    }

    #[test]
    fn edge_rule() {
        assert_eq!(
            edge_state(Status::Done, AfterPolicy::Fail),
            EdgeState::Resolved
        );
        assert_eq!(
            edge_state(Status::Failed, AfterPolicy::Run),
            EdgeState::Resolved
        );
        assert_eq!(
            edge_state(Status::Cancelled, AfterPolicy::Fail),
            EdgeState::FailsDependant
        );
        assert_eq!(
            edge_state(Status::Failed, AfterPolicy::Wait),
            EdgeState::Open
        );
        assert_eq!(
            edge_state(Status::Claimed, AfterPolicy::Run),
            EdgeState::Open
        );
    }
}
