//! The item's hot path on PostgreSQL: enqueue (single, bulk, inside the
//! caller's transaction), claim, and the fenced writes after a claim.
//!
//! Every fenced write carries its fence in the statement itself and maps zero
//! rows to [`Error::Conflict`], or to [`Error::NotFound`] when a follow-up read
//! (on the error path only) finds no such item for the tenant.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{Connection, PgConnection, Row};
use uuid::Uuid;

use super::{PgStore, row, secs, sql, switch_tenant, validate_schema};
use crate::{ClaimParams, ClaimRef, Completion, FailOutcome, FailParams};
use drover_core::error::{Error, Result};
use drover_core::item::{InsertResult, Inserted, Item, NewItem, Progress, bound_error};

/// Enqueues `item` inside the caller's transaction on `conn`, into the
/// drover tables of `schema`.
///
/// The item exists if and only if the caller's transaction commits, and its
/// wake-up is delivered by PostgreSQL at that commit. The call switches to
/// the runtime role, the item's tenant and `schema` only for its own
/// statements (inside a savepoint; the role's name comes from the schema's
/// `drover_roles()`, so the caller's login must hold it) and puts the caller's role, `search_path`
/// and tenant setting back before it returns, so the caller's next statement
/// runs exactly as before. Called outside a transaction, it runs in one of its
/// own.
///
/// `item` must already be validated ([`NewItem::validate`]).
///
/// # Errors
/// [`Error::InvalidInput`] for a bad schema name; [`Error::Conflict`] when the
/// id is taken by another tenant's item; database errors as
/// [`Error::Storage`] / [`Error::Unavailable`]. On an error the savepoint is
/// rolled back, so the caller's transaction stays usable.
///
/// # Cancel safety
/// Not cancel safe in the caller's transaction: dropping the future may leave
/// the savepoint's rollback queued on the connection, which sqlx sends before
/// the connection's next statement.
pub async fn insert_in(conn: &mut PgConnection, schema: &str, item: &NewItem) -> Result<Inserted> {
    // The item is the caller's to validate (the queue does); the schema is
    // a PostgreSQL-only argument, spliced into SQL text, so it is checked
    // here.
    validate_schema(schema)?;
    if item.is_linked() {
        let out = super::links_insert_in(conn, schema, std::slice::from_ref(item)).await?;
        return crate::links::one(out);
    }
    // A savepoint inside the caller's transaction (a transaction of its own
    // otherwise), so a failure here leaves the caller's transaction usable.
    let mut sp = conn.begin().await?;
    let saved = enter_caller_tx(&mut sp, schema, item.tenant_id).await?;
    let inserted = insert_one(&mut sp, item, false).await?;
    leave_caller_tx(&mut sp, saved).await?;
    sp.commit().await?;
    Ok(inserted)
}

/// The caller's role, search_path and tenant, as they were before
/// [`enter_caller_tx`] switched them.
pub(super) struct CallerSettings {
    role: String,
    search_path: String,
    tenant: String,
}

/// Switches a savepoint in the caller's transaction to the installation's
/// runtime role, the store's schema and `tenant` (for that savepoint only),
/// returning what to restore. `schema` must be validated.
pub(super) async fn enter_caller_tx(
    conn: &mut PgConnection,
    schema: &str,
    tenant: Uuid,
) -> Result<CallerSettings> {
    let enter = sql::INSERT_IN_ENTER.replace("{schema}", schema);
    // Unnamed: the caller's connection may go through a transaction pooler.
    let saved = sqlx::query(&enter)
        .persistent(false)
        .bind(schema)
        .bind(tenant.to_string())
        .fetch_one(&mut *conn)
        .await?;
    Ok(CallerSettings {
        role: saved.try_get("prev_role")?,
        search_path: saved.try_get("prev_search_path")?,
        tenant: saved.try_get("prev_tenant")?,
    })
}

/// Restores what [`enter_caller_tx`] switched.
pub(super) async fn leave_caller_tx(conn: &mut PgConnection, saved: CallerSettings) -> Result<()> {
    sqlx::query(sql::INSERT_IN_LEAVE)
        .persistent(false)
        .bind(saved.role)
        .bind(saved.search_path)
        .bind(saved.tenant)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Inserts one item on a connection already under the item's tenant and the
/// runtime role; resolves a collision to the existing row. `persistent`:
/// whether sqlx may name (prepare and cache) the statements.
pub(super) async fn insert_one(
    conn: &mut PgConnection,
    item: &NewItem,
    persistent: bool,
) -> Result<Inserted> {
    let inserted = sqlx::query(sql::ITEM_INSERT)
        .persistent(persistent)
        .bind(item.id)
        .bind(item.tenant_id)
        .bind(&item.kind)
        .bind(&item.lane)
        .bind(&item.payload)
        .bind(item.priority)
        .bind(item.available_at)
        .bind(item.max_attempts)
        .bind(item.stored_key())
        .bind(item.created_by)
        .bind(item.request_id.as_deref())
        .bind(item.traceparent.as_deref())
        .bind(item.created_at)
        .bind(item.group.as_deref())
        .bind(item.active_key())
        .fetch_optional(&mut *conn)
        .await?;
    if let Some(r) = inserted {
        return Ok(Inserted {
            result: InsertResult::Inserted,
            item: row::item(&r)?,
        });
    }
    let mut existing = sqlx::query(sql::ITEM_FIND_COLLISION)
        .persistent(persistent)
        .bind(item.id)
        .bind(item.stored_key())
        .fetch_optional(&mut *conn)
        .await?;
    if existing.is_none()
        && let Some(key) = item.active_key()
    {
        existing = sqlx::query(sql::ITEM_GET_ACTIVE)
            .persistent(persistent)
            .bind(&item.kind)
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?;
    }
    match existing {
        Some(r) => {
            let existing = row::item(&r)?;
            let result = if existing.id == item.id {
                InsertResult::IdExists
            } else {
                InsertResult::KeyExists
            };
            Ok(Inserted {
                result,
                item: existing,
            })
        }
        // Neither the tenant's own id nor its key: the id is taken by an
        // item of another tenant, which this tenant must not see. Refuse
        // without revealing it (the rule of every backend, store docs).
        None => Err(Error::Conflict(format!(
            "item id {} is already in use",
            item.id
        ))),
    }
}

/// Inputs grouped by tenant, each group's indices in input order, the groups
/// in order of first appearance.
fn group_by_tenant<T>(inputs: &[T], tenant: impl Fn(&T) -> Uuid) -> Vec<(Uuid, Vec<usize>)> {
    let mut groups: Vec<(Uuid, Vec<usize>)> = Vec::new();
    let mut at: HashMap<Uuid, usize> = HashMap::new();
    for (i, x) in inputs.iter().enumerate() {
        let t = tenant(x);
        let g = *at.entry(t).or_insert_with(|| {
            groups.push((t, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(i);
    }
    groups
}

/// One tenant group of a bulk insert, column by column (the `unnest` arrays).
struct Columns {
    id: Vec<Uuid>,
    kind: Vec<String>,
    lane: Vec<String>,
    payload: Vec<String>,
    priority: Vec<i16>,
    available_at: Vec<Option<DateTime<Utc>>>,
    max_attempts: Vec<i32>,
    idempotency_key: Vec<Option<String>>,
    created_by: Vec<Uuid>,
    request_id: Vec<Option<String>>,
    traceparent: Vec<Option<String>>,
    created_at: Vec<DateTime<Utc>>,
    group: Vec<Option<String>>,
    active_key: Vec<Option<String>>,
}

impl Columns {
    fn of(items: &[NewItem], idx: &[usize]) -> Columns {
        let n = idx.len();
        let mut c = Columns {
            id: Vec::with_capacity(n),
            kind: Vec::with_capacity(n),
            lane: Vec::with_capacity(n),
            payload: Vec::with_capacity(n),
            priority: Vec::with_capacity(n),
            available_at: Vec::with_capacity(n),
            max_attempts: Vec::with_capacity(n),
            idempotency_key: Vec::with_capacity(n),
            created_by: Vec::with_capacity(n),
            request_id: Vec::with_capacity(n),
            traceparent: Vec::with_capacity(n),
            created_at: Vec::with_capacity(n),
            group: Vec::with_capacity(n),
            active_key: Vec::with_capacity(n),
        };
        for &i in idx {
            let it = &items[i];
            c.id.push(it.id);
            c.kind.push(it.kind.clone());
            c.lane.push(it.lane.clone());
            // Sent as text and cast in SQL: the same bytes jsonb's binary
            // form would carry, without a jsonb[] encoder.
            c.payload.push(it.payload.to_string());
            c.priority.push(it.priority);
            c.available_at.push(it.available_at);
            c.max_attempts.push(it.max_attempts);
            c.idempotency_key.push(it.stored_key().map(str::to_owned));
            c.active_key.push(it.active_key().map(str::to_owned));
            c.created_by.push(it.created_by);
            c.request_id.push(it.request_id.clone());
            c.traceparent.push(it.traceparent.clone());
            c.created_at.push(it.created_at);
            c.group.push(it.group.clone());
        }
        c
    }
}

/// Bulk enqueue: one `INSERT … SELECT FROM unnest(…)` per tenant, all in one
/// transaction; a follow-up read only when some input collided.
pub(super) async fn insert_many(store: &PgStore, items: &[NewItem]) -> Result<Vec<InsertResult>> {
    let Some(first) = items.first() else {
        return Ok(Vec::new());
    };
    let mut tx = store
        .begin_tenant_with(first.tenant_id, super::notifier::WAKE_AFTER_COMMIT)
        .await?;
    let results = match insert_groups(&mut tx, items, store.persistent, true, Taken::Refuse).await {
        Ok(results) => results,
        Err(e) if e.is_conflict() => {
            // An id was taken (a retried enqueue, or an id given twice):
            // again, with each input answered.
            tx.rollback().await?;
            tx = store
                .begin_tenant_with(first.tenant_id, super::notifier::WAKE_AFTER_COMMIT)
                .await?;
            insert_groups(&mut tx, items, store.persistent, true, Taken::Resolve).await?
        }
        Err(e) => return Err(e),
    };
    tx.commit().await?;
    let mut woken = HashSet::new();
    for (it, r) in items.iter().zip(&results) {
        if *r == InsertResult::Inserted && woken.insert(it.lane.as_str()) {
            store.wake_after_commit(&it.lane);
        }
    }
    Ok(results)
}

/// Wakes this process's workers for each lane that got an item (the
/// trigger's `NOTIFY` reaches the others at the commit).
pub(super) fn wake_inserted(store: &PgStore, items: &[NewItem], results: &[InsertResult]) {
    wake_lanes(
        store,
        items
            .iter()
            .zip(results)
            .filter(|(_, r)| **r == InsertResult::Inserted)
            .map(|(it, _)| it.lane.as_str()),
    );
}

/// Wakes each of `lanes` once.
fn wake_lanes<'a>(store: &PgStore, lanes: impl IntoIterator<Item = &'a str>) {
    let mut woken = HashSet::new();
    for lane in lanes {
        if woken.insert(lane) {
            store.wake_local(lane);
        }
    }
}

/// What the bulk insert does with an input whose id is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Taken {
    /// `ON CONFLICT DO NOTHING`, then a read of the collisions: every
    /// input is answered.
    Resolve,
    /// A plain `INSERT`: a taken id fails the statement with `Conflict`,
    /// and the caller, owning the transaction, rolls it back and inserts
    /// again with [`Taken::Resolve`]. An arbiter index makes PostgreSQL
    /// insert each row speculatively (a probe of the primary key, then one
    /// more WAL record to confirm the row), which fresh ids never need. A
    /// key already held still only skips its row (the key triggers answer
    /// it, not the primary key), and the collision read resolves it.
    Refuse,
}

/// The bulk insert's statements on an open transaction: one `INSERT …
/// unnest` per tenant, a collision read (scoped to the tenant in the
/// statement) only when an input was refused. `switch`: the transaction
/// runs under the runtime role, so each tenant after the first is set for
/// it; under the system role (the relay's batch) every statement names its
/// tenant itself.
pub(super) async fn insert_groups(
    tx: &mut PgConnection,
    items: &[NewItem],
    persistent: bool,
    switch: bool,
    taken: Taken,
) -> Result<Vec<InsertResult>> {
    let mut results = vec![InsertResult::IdExists; items.len()];
    for (n, (tenant, idx)) in group_by_tenant(items, |i| i.tenant_id)
        .into_iter()
        .enumerate()
    {
        if n > 0 && switch {
            switch_tenant(&mut *tx, tenant).await?;
        }
        // Owned columns: sqlx's array encoders over borrowed elements trip
        // the higher-ranked Send bound of the async trait.
        let g = Columns::of(items, &idx);
        let statement = match taken {
            Taken::Resolve => sql::ITEM_INSERT_MANY,
            Taken::Refuse => sql::ITEM_INSERT_MANY_PLAIN.as_str(),
        };
        let inserted: Vec<Uuid> = sqlx::query_scalar(statement)
            .persistent(persistent)
            .bind(tenant)
            .bind(g.id)
            .bind(g.kind)
            .bind(g.lane)
            .bind(g.payload)
            .bind(g.priority)
            .bind(g.available_at)
            .bind(g.max_attempts)
            .bind(g.idempotency_key)
            .bind(g.created_by)
            .bind(g.request_id)
            .bind(g.traceparent)
            .bind(g.created_at)
            .bind(g.group)
            .bind(g.active_key)
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| match e.as_database_error().and_then(|d| d.code()) {
                Some(code) if code == "23505" && taken == Taken::Refuse => {
                    Error::Conflict("an item id is taken".into())
                }
                _ => Error::from(e),
            })?;
        // An id appears once in RETURNING even when several inputs share it:
        // the first such input (in statement order) is the one inserted.
        let mut fresh: HashSet<Uuid> = inserted.into_iter().collect();
        let mut refused = Vec::new();
        for &i in &idx {
            if fresh.remove(&items[i].id) {
                results[i] = InsertResult::Inserted;
            } else {
                refused.push(i);
            }
        }
        if refused.is_empty() {
            continue;
        }
        let ids: Vec<Uuid> = refused.iter().map(|&i| items[i].id).collect();
        let keys: Vec<String> = refused
            .iter()
            .filter_map(|&i| items[i].stored_key().map(str::to_owned))
            .collect();
        let active_keys: Vec<String> = refused
            .iter()
            .filter_map(|&i| items[i].active_key().map(str::to_owned))
            .collect();
        let rows = sqlx::query(sql::ITEM_FIND_COLLISIONS)
            .persistent(persistent)
            .bind(ids)
            .bind(keys)
            .bind(tenant)
            .bind(active_keys)
            .fetch_all(&mut *tx)
            .await?;
        let mut have_ids = HashSet::new();
        let mut have_keys = HashSet::new();
        let mut have_active = HashSet::new();
        for r in &rows {
            have_ids.insert(r.try_get::<Uuid, _>("id")?);
            if let Some(k) = r.try_get::<Option<String>, _>("idempotency_key")? {
                have_keys.insert(k);
            }
            if let Some(k) = r.try_get::<Option<String>, _>("active_key")?
                && r.try_get::<bool, _>("active")?
            {
                have_active.insert((r.try_get::<String, _>("kind")?, k));
            }
        }
        for i in refused {
            let it = &items[i];
            results[i] = if have_ids.contains(&it.id) {
                InsertResult::IdExists
            } else if it.stored_key().is_some_and(|k| have_keys.contains(k))
                || it
                    .active_key()
                    .is_some_and(|k| have_active.contains(&(it.kind.clone(), k.to_owned())))
            {
                InsertResult::KeyExists
            } else {
                // Neither visible: the id belongs to another tenant's item,
                // which this tenant must not see.
                InsertResult::IdTaken
            };
        }
    }
    Ok(results)
}

/// Independent inserts in one transaction: per tenant one
/// `INSERT … SELECT FROM unnest(…) RETURNING *`; an input that did not land
/// is resolved alone on the same transaction (the tenant's own row, or
/// `Conflict` for another tenant's id), as [`insert_one`] answers it.
pub(super) async fn insert_each(
    store: &PgStore,
    items: &[NewItem],
) -> Result<Vec<Result<Inserted>>> {
    let Some(first) = items.first() else {
        return Ok(Vec::new());
    };
    let mut tx = store.begin_tenant(first.tenant_id).await?;
    let out = insert_each_on(store, &mut tx, items).await?;
    tx.commit().await?;
    wake_landed(store, &out);
    Ok(out)
}

/// Wakes each lane an insert of `out` landed in, once (after the commit).
pub(super) fn wake_landed(store: &PgStore, out: &[Result<Inserted>]) {
    wake_written(store, out.iter().flatten());
}

/// Wakes each lane one of `inserted` landed in, once (after the commit).
pub(super) fn wake_written<'a>(store: &PgStore, inserted: impl Iterator<Item = &'a Inserted>) {
    wake_lanes(
        store,
        inserted
            .filter(|ins| ins.result == InsertResult::Inserted)
            .map(|ins| ins.item.lane.as_str()),
    );
}

/// [`insert_each`] on an open transaction begun for `items[0]`'s tenant
/// (left on the last group's tenant).
pub(super) async fn insert_each_on(
    store: &PgStore,
    tx: &mut PgConnection,
    items: &[NewItem],
) -> Result<Vec<Result<Inserted>>> {
    let mut out: Vec<Option<Result<Inserted>>> = (0..items.len()).map(|_| None).collect();
    for (n, (tenant, idx)) in group_by_tenant(items, |i| i.tenant_id)
        .into_iter()
        .enumerate()
    {
        if n > 0 {
            switch_tenant(&mut *tx, tenant).await?;
        }
        let g = Columns::of(items, &idx);
        let rows = sqlx::query(sql::ITEM_INSERT_EACH)
            .persistent(store.persistent)
            .bind(tenant)
            .bind(g.id)
            .bind(g.kind)
            .bind(g.lane)
            .bind(g.payload)
            .bind(g.priority)
            .bind(g.available_at)
            .bind(g.max_attempts)
            .bind(g.idempotency_key)
            .bind(g.created_by)
            .bind(g.request_id)
            .bind(g.traceparent)
            .bind(g.created_at)
            .bind(g.group)
            .bind(g.active_key)
            .fetch_all(&mut *tx)
            .await?;
        let mut fresh: HashMap<Uuid, Item> = HashMap::with_capacity(rows.len());
        for r in &rows {
            let it = row::item(r)?;
            fresh.insert(it.id, it);
        }
        for &i in &idx {
            // The first input with an id takes the row; a later one with
            // the same id is resolved alone and meets it.
            out[i] = match fresh.remove(&items[i].id) {
                Some(item) => Some(Ok(Inserted {
                    result: InsertResult::Inserted,
                    item,
                })),
                None => match insert_one(&mut *tx, &items[i], store.persistent).await {
                    Err(e) if !e.is_conflict() => return Err(e),
                    other => Some(other),
                },
            };
        }
    }
    out.into_iter()
        .map(|o| {
            o.ok_or_else(|| {
                Error::Storage(drover_core::error::Opaque::msg("an input was not resolved"))
            })
        })
        .collect()
}

/// Claims available items across tenants (system role), in priority then
/// `available_at` order ([`super::claim_gen::claim`]).
pub(super) async fn claim(store: &PgStore, p: &ClaimParams) -> Result<Vec<Item>> {
    super::claim_gen::claim(store, p).await
}

/// The error for a fenced write that changed nothing: `NotFound` when the
/// tenant has no such item, `Conflict` otherwise.
pub(super) async fn miss(conn: &mut PgConnection, id: Uuid, what: &str) -> Error {
    match sqlx::query_scalar::<_, String>(sql::ITEM_STATUS)
        .persistent(false)
        .bind(id)
        .fetch_optional(conn)
        .await
    {
        Ok(Some(status)) => Error::Conflict(format!(
            "{what} of item {id} refused: it is {status}, or the claim token or lease no longer holds"
        )),
        Ok(None) => Error::NotFound(format!("item {id}")),
        Err(e) => e.into(),
    }
}

/// Marks a claimed item done. Fenced.
pub(super) async fn complete(
    store: &PgStore,
    c: &ClaimRef,
    result: Option<&serde_json::Value>,
) -> Result<()> {
    let mut tx = store.begin_tenant(c.tenant_id).await?;
    let n = sqlx::query(sql::ITEM_COMPLETE)
        .persistent(store.persistent)
        .bind(c.id)
        .bind(c.token)
        .bind(result)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if n == 0 {
        return Err(miss(&mut tx, c.id, "completion").await);
    }
    tx.commit().await?;
    Ok(())
}

/// Marks many claimed items done: one statement per tenant (each in its own
/// runtime-role transaction), each row fenced on its own token. Returns the
/// ids that landed, in input order.
pub(super) async fn complete_many(store: &PgStore, done: &[Completion]) -> Result<Vec<Uuid>> {
    let mut landed = HashSet::new();
    for (tenant, idx) in group_by_tenant(done, |c| c.claim.tenant_id) {
        // One autocommit statement: the function runs as the runtime role
        // with the tenant set for its run only. A group without results
        // runs the three-argument function, exactly as before results
        // existed; one with any takes the four-argument form.
        let with_results = idx.iter().any(|&i| done[i].result.is_some());
        let statement = if with_results {
            &store.complete_many_results_sql
        } else {
            &store.complete_many_sql
        };
        let mut query = sqlx::query_scalar(statement)
            .persistent(store.persistent)
            .bind(tenant)
            .bind(idx.iter().map(|&i| done[i].claim.id).collect::<Vec<_>>())
            .bind(idx.iter().map(|&i| done[i].claim.token).collect::<Vec<_>>());
        if with_results {
            query = query.bind(
                idx.iter()
                    .map(|&i| done[i].result.clone())
                    .collect::<Vec<_>>(),
            );
        }
        let ids: Vec<Uuid> = if store.persistent {
            query.fetch_all(&store.pool).await?
        } else {
            let mut tx = super::super::begin::begin(&store.pool, "BEGIN").await?;
            let ids = query.fetch_all(&mut *tx).await?;
            tx.commit().await?;
            ids
        };
        landed.extend(ids);
    }
    let mut out = Vec::with_capacity(landed.len());
    for c in done {
        if landed.remove(&c.claim.id) {
            out.push(c.claim.id);
        }
    }
    Ok(out)
}

/// A running handler's progress (latest wins). Fenced.
pub(super) async fn progress(store: &PgStore, c: &ClaimRef, progress: &Progress) -> Result<()> {
    let value =
        serde_json::to_value(progress).map_err(|e| Error::invalid("progress", e.to_string()))?;
    let mut tx = store.begin_tenant(c.tenant_id).await?;
    let n = sqlx::query(sql::ITEM_PROGRESS)
        .persistent(store.persistent)
        .bind(c.id)
        .bind(c.token)
        .bind(value)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if n == 0 {
        return Err(miss(&mut tx, c.id, "progress").await);
    }
    tx.commit().await?;
    Ok(())
}

/// Records a failure: requeue or dead-letter (with its audit entry), in one
/// statement. Fenced.
pub(super) async fn fail(store: &PgStore, c: &ClaimRef, p: &FailParams) -> Result<FailOutcome> {
    let mut tx = store.begin_tenant(c.tenant_id).await?;
    let r = sqlx::query(sql::ITEM_FAIL)
        .persistent(store.persistent)
        .bind(c.id)
        .bind(c.token)
        .bind(bound_error(&p.error))
        .bind(secs(p.retry_delay))
        .bind(p.fatal)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(r) = r else {
        return Err(miss(&mut tx, c.id, "failure").await);
    };
    tx.commit().await?;
    let status: String = r.try_get("status")?;
    let woken: Option<i64> = r.try_get("woken")?;
    if woken.unwrap_or(0) > 0 {
        store.wake_local(&r.try_get::<String, _>("lane")?);
    }
    if status == "failed" {
        tracing::info!(item = %c.id, tenant = %c.tenant_id, "item dead-lettered");
        Ok(FailOutcome::DeadLettered)
    } else {
        Ok(FailOutcome::Requeued {
            available_at: r.try_get("available_at")?,
        })
    }
}

/// Pending again after `delay`, no attempt spent. Fenced.
pub(super) async fn defer(store: &PgStore, c: &ClaimRef, delay: Duration) -> Result<DateTime<Utc>> {
    let mut tx = store.begin_tenant(c.tenant_id).await?;
    let r = sqlx::query(sql::ITEM_DEFER)
        .persistent(store.persistent)
        .bind(c.id)
        .bind(c.token)
        .bind(secs(delay))
        .fetch_optional(&mut *tx)
        .await?;
    let Some(r) = r else {
        return Err(miss(&mut tx, c.id, "deferral").await);
    };
    tx.commit().await?;
    // The NOTIFY (sent at the commit) reaches other processes; this wakes
    // this one's workers without the round trip through the listener.
    let woken: Option<i64> = r.try_get("woken")?;
    if woken.unwrap_or(0) > 0 {
        store.wake_local(&r.try_get::<String, _>("lane")?);
    }
    Ok(r.try_get("available_at")?)
}

/// Pending again now, no attempt spent. Fenced.
pub(super) async fn release(store: &PgStore, c: &ClaimRef, note: Option<&str>) -> Result<()> {
    let mut tx = store.begin_tenant(c.tenant_id).await?;
    let lane: Option<String> = sqlx::query_scalar(sql::ITEM_RELEASE)
        .persistent(store.persistent)
        .bind(c.id)
        .bind(c.token)
        .bind(note.map(bound_error))
        .fetch_optional(&mut *tx)
        .await?;
    let Some(lane) = lane else {
        return Err(miss(&mut tx, c.id, "release").await);
    };
    tx.commit().await?;
    // The NOTIFY (sent at the commit) reaches other processes; this wakes
    // this one's workers without the round trip through the listener.
    store.wake_local(&lane);
    Ok(())
}

/// The lease runs `lease` from now (database clock). Fenced.
pub(super) async fn extend_lease(
    store: &PgStore,
    c: &ClaimRef,
    lease: Duration,
) -> Result<DateTime<Utc>> {
    let mut tx = store.begin_tenant(c.tenant_id).await?;
    let at: Option<DateTime<Utc>> = sqlx::query_scalar(sql::ITEM_EXTEND_LEASE)
        .persistent(store.persistent)
        .bind(c.id)
        .bind(c.token)
        .bind(secs(lease))
        .fetch_optional(&mut *tx)
        .await?;
    let Some(at) = at else {
        return Err(miss(&mut tx, c.id, "lease renewal").await);
    };
    tx.commit().await?;
    Ok(at)
}

/// Cancelled at the handler's request: final, no attempt spent, `note` kept
/// as `last_error`. Fenced.
pub(super) async fn cancel_claimed(store: &PgStore, c: &ClaimRef, note: &str) -> Result<()> {
    let mut tx = store.begin_tenant(c.tenant_id).await?;
    let n = sqlx::query(sql::ITEM_CANCEL_CLAIMED)
        .persistent(store.persistent)
        .bind(c.id)
        .bind(c.token)
        .bind(bound_error(note))
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if n == 0 {
        return Err(miss(&mut tx, c.id, "cancellation").await);
    }
    tx.commit().await?;
    Ok(())
}
