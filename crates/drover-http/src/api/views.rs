//! The JSON shapes of requests and answers, with their OpenAPI schemas, and
//! the names values take in them.
//! Item fields that only the runtime needs (the claim token) are never
//! shown: the token is a fence, and a caller holding it could forge a
//! worker's write.

use chrono::{DateTime, Utc};
use drover::Item;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// An item as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ItemView {
    /// Its id.
    pub id: Uuid,
    /// Its tenant.
    pub tenant_id: Uuid,
    /// Its kind.
    pub kind: String,
    /// Its lane.
    pub lane: String,
    /// Its flow-control group.
    #[schema(nullable = true)]
    pub group: Option<String>,
    /// Its payload: any JSON value, as it was enqueued (`null` when the
    /// producer sent none).
    pub payload: serde_json::Value,
    /// Lower runs first.
    pub priority: i16,
    /// `pending`, `claimed`, `done`, `failed` or `cancelled`.
    #[schema(value_type = super::contract::ItemStatus)]
    pub status: String,
    /// Not claimable before this.
    pub available_at: DateTime<Utc>,
    /// Attempts spent.
    pub attempts: i32,
    /// The attempt budget.
    pub max_attempts: i32,
    /// The worker holding it, while claimed.
    #[schema(nullable = true)]
    pub claimed_by: Option<String>,
    /// The fencing number: grows with every claim.
    pub claim_seq: i64,
    /// When the current claim lapses.
    #[schema(nullable = true)]
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// The last failure's message.
    #[schema(nullable = true)]
    pub last_error: Option<String>,
    /// Its idempotency key.
    #[schema(nullable = true)]
    pub idempotency_key: Option<String>,
    /// Its key when it holds only while the item is active (enqueued with
    /// `unique_while_active`).
    #[serde(default)]
    #[schema(nullable = true)]
    pub active_key: Option<String>,
    /// What its handler returned, stored with its completion (`null`
    /// until then, or when it returned nothing).
    #[serde(default)]
    #[schema(nullable = true)]
    pub result: Option<serde_json::Value>,
    /// What its handler last reported, kept across retries.
    #[serde(default)]
    #[schema(nullable = true)]
    pub progress: Option<ProgressView>,
    /// Who enqueued it.
    pub created_by: Uuid,
    /// The causing request.
    #[schema(nullable = true)]
    pub request_id: Option<String>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

impl From<Item> for ItemView {
    fn from(i: Item) -> Self {
        ItemView {
            id: i.id,
            tenant_id: i.tenant_id,
            kind: i.kind,
            lane: i.lane,
            group: i.group,
            payload: i.payload,
            priority: i.priority,
            status: i.status.as_str().to_owned(),
            available_at: i.available_at,
            attempts: i.attempts,
            max_attempts: i.max_attempts,
            claimed_by: i.claimed_by,
            claim_seq: i.claim_seq,
            lease_expires_at: i.lease_expires_at,
            last_error: i.last_error,
            idempotency_key: i.idempotency_key,
            active_key: i.active_key,
            result: i.result,
            progress: i.progress.map(|p| ProgressView {
                value: p.value,
                data: p.data,
            }),
            created_by: i.created_by,
            request_id: i.request_id,
            created_at: i.created_at,
            updated_at: i.updated_at,
        }
    }
}

/// A running handler's progress report.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProgressView {
    /// How far, as a number (0 to 100 for a percentage, by convention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// A small JSON note (at most 8 KiB): the handler's checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Value>,
}

/// One item to enqueue. A kind is a name: a kind no worker handles is
/// accepted and waits (flagged in `/v1/stats`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnqueueRequest {
    /// What to do: `[a-z0-9_.:-]{1,128}`.
    #[schema(pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)]
    pub kind: String,
    /// The arguments: any JSON value, `null` when omitted (at most the
    /// queue's payload limit, 256 KiB of JSON text by default, and no
    /// U+0000 in a string or a member name).
    #[serde(default)]
    pub payload: serde_json::Value,
    /// The lane (`[a-z0-9_-]{1,64}`; omitted or `null`: `default`).
    #[serde(default)]
    #[schema(pattern = "^[a-z0-9_-]{1,64}$", min_length = 1, max_length = 64)]
    pub lane: Option<String>,
    /// The flow-control group (`[a-z0-9_.:-]{1,128}`; default none):
    /// per-group limits and ordered groups count items by kind and group.
    #[serde(default)]
    #[schema(pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)]
    pub group: Option<String>,
    /// Lower runs first (default 0).
    #[serde(default, deserialize_with = "super::parse::whole_opt")]
    #[schema(minimum = -32768, maximum = 32767)]
    pub priority: Option<i16>,
    /// The attempt budget (default 5).
    #[serde(default, deserialize_with = "super::parse::whole_opt")]
    #[schema(minimum = 1, maximum = 2147483647)]
    pub max_attempts: Option<i32>,
    /// Not before this time (default now).
    #[serde(default)]
    pub run_at: Option<DateTime<Utc>>,
    /// The item's own deduplication key, unique per tenant while it
    /// exists: 1 to 512 bytes (of UTF-8), no control characters.
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 512,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    pub key: Option<String>,
    /// The key holds only while the item is pending or claimed: an
    /// enqueue of the same tenant, kind and key is answered with the
    /// active item (`key_exists`) only while one is active; once it is
    /// final a new item is created. Needs `key`. Default false.
    #[serde(default)]
    pub unique_while_active: bool,
    /// The item's id (default minted, UUID v7).
    #[serde(default)]
    pub id: Option<Uuid>,
    /// The tenant (default the token's, else the nil tenant).
    #[serde(default)]
    pub tenant: Option<Uuid>,
    /// Items of the same tenant this one waits for (enqueued before, or in
    /// the same batch request in any order): it becomes claimable only
    /// once all of them are done (docs/dependencies.md). At most 1000.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub after: Vec<Uuid>,
    /// What a failed or cancelled dependency does: `fail` (default: this
    /// item is dead-lettered), `run` (it runs anyway), `wait` (it waits for
    /// an operator).
    #[serde(default)]
    pub after_policy: Option<AfterPolicyName>,
    /// An open batch (`POST /v1/batches`) this item joins.
    #[serde(default)]
    pub batch: Option<Uuid>,
}

/// What a failed or cancelled dependency does to its dependant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AfterPolicyName {
    /// The dependant is dead-lettered.
    Fail,
    /// The dependant runs anyway.
    Run,
    /// The dependant waits for an operator.
    Wait,
}

impl From<AfterPolicyName> for drover::store::links::AfterPolicy {
    fn from(p: AfterPolicyName) -> Self {
        match p {
            AfterPolicyName::Fail => drover::store::links::AfterPolicy::Fail,
            AfterPolicyName::Run => drover::store::links::AfterPolicy::Run,
            AfterPolicyName::Wait => drover::store::links::AfterPolicy::Wait,
        }
    }
}

/// The name of an insert's result in an answer (`result` of
/// [`EnqueueResponse`] and [`BatchRow`]).
pub(crate) fn result_name(r: drover::InsertResult) -> &'static str {
    match r {
        drover::InsertResult::Inserted => "inserted",
        drover::InsertResult::IdExists => "id_exists",
        drover::InsertResult::KeyExists => "key_exists",
        drover::InsertResult::IdTaken => "id_taken",
        #[allow(unreachable_patterns)]
        _ => "other",
    }
}

/// What an enqueue did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EnqueueResponse {
    /// The item's id (the existing one's on a collision).
    pub id: Uuid,
    /// `inserted`, `id_exists` or `key_exists`.
    #[schema(value_type = super::contract::InsertOutcome)]
    pub result: String,
    /// False when no registration on this server knows the kind: it is
    /// accepted and waits for a worker that handles it.
    pub known_kind: bool,
    /// The item as stored.
    pub item: ItemView,
}

/// A batch to enqueue: one statement, all or nothing on bad input.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// The items (1 to 10,000, all of one tenant).
    #[schema(min_items = 1, max_items = 10000)]
    pub items: Vec<EnqueueRequest>,
}

/// One row of a batch's answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BatchRow {
    /// The item's id.
    pub id: Uuid,
    /// `inserted`, `id_exists`, `key_exists` or `id_taken`.
    #[schema(value_type = super::contract::InsertOutcome)]
    pub result: String,
}

/// What a batch did, in input order.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BatchResponse {
    /// How many were inserted.
    pub inserted: usize,
    /// One row per input item.
    pub results: Vec<BatchRow>,
}

/// A page of items.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ItemPage {
    /// The items, newest first.
    pub items: Vec<ItemView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub next_cursor: Option<String>,
}

/// An audit entry.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditView {
    /// `dead_letter`, `cancel`, `retry`.
    pub action: String,
    /// Who did it (the nil UUID: the system; else a token id).
    pub actor: Uuid,
    /// Who did it in words: `system`, the token's label, or `token` and
    /// the id's last 8 hex digits when no stored token carries a label.
    pub actor_label: String,
    /// Free text.
    #[schema(nullable = true)]
    pub detail: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
}

/// One item with its history.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ItemDetail {
    /// The item.
    pub item: ItemView,
    /// Attempts spent and the budget.
    pub attempts: AttemptsView,
    /// Its audit entries, oldest first.
    pub audit: Vec<AuditView>,
    /// Its last runs (claims that ended), newest first: at most 20, the
    /// latest (an item keeps no more). A claim in flight is not here yet;
    /// `attempts.claimed_by` names its worker.
    pub runs: Vec<RunView>,
    /// While it is pending, why it has not started (empty: nothing holds
    /// it back; it waits for the next claim).
    pub waiting: Vec<WaitView>,
    /// Its dependencies, dependants and batch (docs/dependencies.md).
    pub links: LinksView,
}

/// An item's links: what it waits for, what waits for it, its batch.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LinksView {
    /// The items it waits (or waited) for.
    pub after: Vec<Uuid>,
    /// What a failed or cancelled dependency does to it: `fail`, `run` or
    /// `wait` (null when it has no dependencies).
    #[schema(nullable = true)]
    pub after_policy: Option<String>,
    /// Of `after`, how many are not done yet (nor finished under `run`).
    pub waiting_on: i64,
    /// The items that wait for it.
    pub dependants: Vec<Uuid>,
    /// The batch it is a member of.
    #[schema(nullable = true)]
    pub batch: Option<Uuid>,
}

impl From<drover::store::links::ItemLinks> for LinksView {
    fn from(l: drover::store::links::ItemLinks) -> Self {
        LinksView {
            after: l.after,
            after_policy: l.after_policy.map(|p| p.to_string()),
            waiting_on: l.waiting_on,
            dependants: l.dependants,
            batch: l.batch,
        }
    }
}

/// One reason a pending item has not started.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WaitView {
    /// `run_at`, `dependencies`, `lane_paused`, `limit_full`,
    /// `earlier_in_group`, `group_closed`, `rate_limited`, `no_worker` (or
    /// `not_pending`).
    #[schema(value_type = super::contract::WaitCode)]
    pub reason: String,
    /// The reason in words: which limit, held by which item since when;
    /// for `no_worker`, the lane with no live worker, or the kind no live
    /// worker of the lane handles; and so on. A tenant-scoped caller sees
    /// only its own tenant's holders.
    pub detail: String,
}

impl WaitView {
    /// The view of `w` for a caller confined to `tenant` (`None`: every
    /// tenant).
    pub(crate) fn of(w: drover::queue::WaitReason, tenant: Option<Uuid>) -> WaitView {
        WaitView {
            reason: w.code().to_owned(),
            detail: w.for_tenant(tenant).to_string(),
        }
    }
}

/// An item's attempts as the store keeps them: the count, the budget, the
/// last error, and the current (or last) claim's fencing number.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AttemptsView {
    /// Attempts spent.
    pub spent: i32,
    /// The budget.
    pub budget: i32,
    /// Claims so far (the fencing number).
    pub claims: i64,
    /// The last failure's message.
    #[schema(nullable = true)]
    pub last_error: Option<String>,
    /// The worker of the current claim.
    #[schema(nullable = true)]
    pub claimed_by: Option<String>,
}

/// One run of an item: a claim, from its start to the write that ended it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunView {
    /// The claim's fencing number: 1 for the first run.
    pub claim_seq: i64,
    /// The worker that held it.
    #[schema(nullable = true)]
    pub worker: Option<String>,
    /// When the claim started.
    pub started_at: DateTime<Utc>,
    /// When the write that ended it landed.
    pub finished_at: DateTime<Utc>,
    /// How long it ran, in milliseconds.
    pub duration_ms: i64,
    /// `done`, `retry` (failed, tried again), `failed` (dead-lettered),
    /// `cancelled`, `snoozed` (deferred), `released` (handed back at once)
    /// or `lease_lost` (the lease passed before the worker wrote).
    #[schema(value_type = super::contract::RunOutcomeCode)]
    pub outcome: String,
    /// The error it left, if any.
    #[schema(nullable = true)]
    pub error: Option<String>,
}

impl From<drover::store::runs::ItemRun> for RunView {
    fn from(r: drover::store::runs::ItemRun) -> Self {
        RunView {
            claim_seq: r.claim_seq,
            duration_ms: r.duration().num_milliseconds(),
            worker: r.worker,
            started_at: r.started_at,
            finished_at: r.finished_at,
            outcome: r.outcome.as_str().to_owned(),
            error: r.error,
        }
    }
}
