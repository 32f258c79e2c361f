//! Concurrency limits on PostgreSQL: the settings (system role, nil
//! tenant, migration 0033) and the limited claim.
//!
//! A claim of a lane no limit applies to is `claim_items` as before; the
//! limits in force are read at most once per [`LIMITS_CACHE_TTL`] per
//! process, so it costs no extra statement. A claim a limit may apply to
//! is one call into `claim_limited` (migration 0036), which runs the steps
//! below inside the server (and, when no per-group limit applies, locks
//! the lane and kind keys first and is `claim_items` itself while they
//! have room for the whole claim). On a schema before 0036 (a binary ahead
//! of its database until `drover migrate`), the same steps run from here
//! as one system-role transaction, under the same keys:
//!
//! 1. the candidates, in claim order, locked `SKIP LOCKED` (never a wait
//!    on a row), leaving out scopes that were full as the claim began;
//! 2. a transaction lock on each scope key the candidates count against,
//!    in hash order (no cycle of waits);
//! 3. the claims holding slots, read in a statement of its own after the
//!    locks: every claimer of a key holds its lock to its commit, so this
//!    count includes every claim a claimer before made;
//! 4. admission in claim order ([`Admission`], the rule every backend
//!    shares), and one `UPDATE` of the admitted.
//!
//! So two claimers never admit past a limit between them, and the count
//! is the claimed rows themselves: nothing to drift.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::claim_gen::{Attempt, checked_items};
use super::{PgStore, row, secs};
use crate::ClaimParams;
use crate::limits::{
    Admission, LimitScope, LimitSetting, LimitSource, LimitSpec, LimitStore, LimitUsage,
    OnDeadLetter, OrderBlocker, UsageRow, applies, effective, full_scopes, keys_of, limits_broken,
    ordered_kinds, usage,
};
use crate::rates::{Cells, HeldBack, InForce, Rate, RateSetting, rate_keys_of};
use drover_core::error::Result;
use drover_core::item::Item;

const LIMIT_SET: &str = include_str!("../../sql/postgres/limit_set.sql");
const LIMIT_CLEAR: &str = include_str!("../../sql/postgres/limit_clear.sql");
const LIMIT_LIST: &str = include_str!("../../sql/postgres/limit_list.sql");
pub(super) const LIMIT_CANDIDATES: &str = include_str!("../../sql/postgres/limit_candidates.sql");
/// The candidates with the head probe of ordered groups at their mark.
static LIMIT_CANDIDATES_ORDERED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    LIMIT_CANDIDATES.replace(
        "/*{ordered}*/",
        include_str!("../../sql/postgres/limit_candidates_head.sql"),
    )
});
pub(super) const LIMIT_LOCK: &str = include_str!("../../sql/postgres/limit_lock.sql");
const LIMIT_HELD: &str = include_str!("../../sql/postgres/limit_held.sql");
pub(super) const LIMIT_CLAIM: &str = include_str!("../../sql/postgres/limit_claim.sql");
const LIMIT_USAGE: &str = include_str!("../../sql/postgres/limit_usage.sql");
const LIMIT_ORDER_BLOCKER: &str = include_str!("../../sql/postgres/limit_order_blocker.sql");

/// How many candidates a limited claim reads per slot it asks for (plus a
/// few): room for items a full scope holds back.
pub(super) const CANDIDATES_PER_SLOT: u32 = 4;
pub(super) const CANDIDATES_EXTRA: u32 = 32;

fn setting(r: &PgRow) -> Result<LimitSetting> {
    let scope: String = r.try_get("scope")?;
    let name: String = r.try_get("name")?;
    let source: String = r.try_get("source")?;
    let concurrency: i32 = r.try_get("concurrency")?;
    Ok(LimitSetting {
        scope: LimitScope::from_parts(&scope, &name)?,
        source: LimitSource::from_name(&source)?,
        concurrency: u32::try_from(concurrency).unwrap_or(0),
        // NULL on a schema before migration 0034: not ordered.
        ordered: r.try_get::<Option<String>, _>("ordered")?.as_deref() == Some("true"),
        on_dead_letter: match r.try_get::<Option<String>, _>("on_dead_letter")? {
            Some(name) => OnDeadLetter::from_name(&name)?,
            None => OnDeadLetter::Continue,
        },
        set_at: r.try_get("set_at")?,
        set_by: r.try_get("set_by")?,
    })
}

/// One claimed or candidate row's scope parts.
pub(super) struct Parts {
    pub(super) id: Uuid,
    pub(super) tenant: Uuid,
    pub(super) lane: String,
    pub(super) kind: String,
    pub(super) group: Option<String>,
}

pub(super) fn parts(r: &PgRow, with_id: bool) -> Result<Parts> {
    Ok(Parts {
        id: if with_id {
            r.try_get("id")?
        } else {
            Uuid::nil()
        },
        tenant: r.try_get("tenant_id")?,
        lane: r.try_get("lane")?,
        kind: r.try_get("kind")?,
        group: r.try_get("group_key")?,
    })
}

impl PgStore {
    /// The limits in force, from the cache while it is fresh.
    pub(super) async fn limits_in_force(&self) -> Result<Arc<Vec<LimitSetting>>> {
        if let Some(v) = self.limits.fresh() {
            return Ok(v);
        }
        let settings = self.limit_settings().await?;
        Ok(self.limits.put(effective(&settings)))
    }

    /// The claimed rows of `lane` or of `kinds` (their scope parts).
    pub(super) async fn held_rows(
        &self,
        tx: &mut sqlx::PgConnection,
        lane: &str,
        kinds: &[String],
    ) -> Result<Vec<PgRow>> {
        Ok(sqlx::query(LIMIT_HELD)
            .persistent(self.persistent)
            .bind(lane)
            .bind(kinds)
            .fetch_all(tx)
            .await?)
    }

    /// The claim of `p`, limited when a limit or a rate of `in_force`
    /// applies to it (see the module docs), checked against the flow
    /// settings' generation `in_force` was read at (`claim_gen.rs`);
    /// `None` when none applies (the caller claims as before).
    pub(super) async fn claim_limited(
        &self,
        p: &ClaimParams,
        in_force: &InForce,
    ) -> Result<Option<Attempt>> {
        let limits = self.limits_in_force().await?;
        let (rates, fgen) = (&in_force.rates, in_force.flow_gen);
        let rated = crate::rates::applies(rates, &p.lane, &p.kinds);
        if !rated && !applies(&limits, &p.lane, &p.kinds) {
            return Ok(None);
        }
        if let Some(attempt) = self.claim_limited_fair(p, &limits, in_force).await? {
            return Ok(Some(attempt));
        }
        if rated {
            // A rate may hold a start back: the steps, with the cells.
            return self
                .claim_limited_steps(p, &limits, rates, fgen)
                .await
                .map(Some);
        }
        if !self.limits.steps_only() {
            if let Some(attempt) = self.claim_limited_call(p, &limits, fgen).await? {
                return Ok(Some(attempt));
            }
            // The schema predates migration 0036 (a binary ahead of its
            // database in an online upgrade): the steps below, until the
            // limits are read again.
            self.limits.set_steps_only();
        }
        self.claim_limited_steps(p, &limits, &[], fgen)
            .await
            .map(Some)
    }

    /// Runs one call into a server-side function on the system pool: a
    /// statement of its own when statements are prepared, else in an
    /// explicit transaction (a transaction pooler's unnamed statements). The
    /// outer error is the transaction's; the inner one the call's, for the
    /// caller to read (an undefined function means an older schema).
    pub(super) async fn system_call<'q>(
        &self,
        query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<std::result::Result<Vec<PgRow>, sqlx::Error>> {
        if self.persistent {
            return Ok(query.fetch_all(&self.system_pool).await);
        }
        let mut tx = super::super::begin::begin(&self.system_pool, "BEGIN").await?;
        let rows = query.fetch_all(&mut *tx).await;
        if rows.is_ok() {
            tx.commit().await?;
        }
        Ok(rows)
    }

    /// The limited claim in one call into `claim_limited` (migration 0036),
    /// which runs the steps of [`PgStore::claim_limited_steps`] inside the
    /// server under the same scope keys and locks, behind the generation's
    /// gate when `fgen` is known. `None` when the database has no such
    /// function.
    async fn claim_limited_call(
        &self,
        p: &ClaimParams,
        limits: &[LimitSetting],
        fgen: Option<i64>,
    ) -> Result<Option<Attempt>> {
        let args = CallArgs::of(limits, &p.lane);
        let want = p
            .limit
            .saturating_mul(CANDIDATES_PER_SLOT)
            .saturating_add(CANDIDATES_EXTRA);
        let statement = match fgen {
            Some(_) => &self.claim_sql.limited_checked,
            None => &self.claim_sql.limited,
        };
        let mut query = self.bind_limited(
            sqlx::query(statement).persistent(self.persistent),
            p,
            &args,
            want,
        );
        if let Some(g) = fgen {
            query = query.bind(g);
        }
        let fetched = self.system_call(query).await?;
        let rows = match fetched {
            Ok(rows) => rows,
            // undefined_function
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42883") => {
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        match fgen {
            Some(g) => checked_items(&rows, g).map(Some),
            None => Ok(Some(Attempt::Items(
                rows.iter().map(row::item).collect::<Result<Vec<_>>>()?,
            ))),
        }
    }

    /// Binds `claim_limited`'s fourteen arguments for the claim `p` under
    /// the limits `args`, reading at most `want` candidates (the handover
    /// of migration 0045 passes them on after its own four).
    pub(super) fn bind_limited<'q>(
        &self,
        query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
        p: &'q ClaimParams,
        args: &'q CallArgs,
        want: u32,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        query
            .bind(&p.lane)
            .bind(&p.kinds)
            .bind(&p.worker_id)
            .bind(secs(p.lease))
            .bind(i64::from(p.limit))
            .bind(i64::from(want))
            .bind(format!("drover.limit:{}:", self.schema))
            .bind(args.lane)
            .bind(&args.kinds)
            .bind(&args.kind_limits)
            .bind(&args.group_kinds)
            .bind(&args.group_limits)
            .bind(&args.ordered)
            .bind(&args.hold)
    }

    /// The limited claim as a transaction of statements from here: on a
    /// schema before migration 0036.
    ///
    /// With `rates` in force, the same steps also start against their
    /// cells: the scopes the cells hold back as the claim begins are left
    /// out of the candidates; after the scope locks, the cells the
    /// candidates start against are locked in key order and read with the
    /// transaction's `now()` (the clock every admission of the claim
    /// uses); a candidate is admitted when its cells and its slots both
    /// have room; the moved cells are written back before the claim's
    /// `UPDATE`, in the same transaction.
    ///
    /// With `fgen` known, the transaction first reads the flow settings'
    /// generation and claims nothing ([`Attempt::Stale`]) when it moved.
    async fn claim_limited_steps(
        &self,
        p: &ClaimParams,
        limits: &[LimitSetting],
        rates: &[RateSetting],
        fgen: Option<i64>,
    ) -> Result<Attempt> {
        let (mut tx, full) = match self.limited_open(p, limits, rates, fgen).await? {
            Opened::Ready(tx, full) => (tx, full),
            Opened::Done(attempt) => return Ok(attempt),
        };
        let candidates = self.candidates(&mut tx, p, limits, &full).await?;
        let keyed: Vec<(Uuid, Vec<(String, u32)>)> = candidates
            .iter()
            .map(|c| {
                let keys = keys_of(limits, &c.lane, &c.kind, c.tenant, c.group.as_deref());
                (c.id, keys)
            })
            .collect();
        let admission = self
            .lock_and_count(&mut tx, p, limits, keyed.iter().map(|(_, k)| k))
            .await?;
        let admitted = self
            .admit_rated(
                &mut tx,
                &candidates,
                keyed,
                rates,
                admission,
                p.limit as usize,
            )
            .await?;
        let rows = if admitted.is_empty() {
            Vec::new()
        } else {
            self.claim_ids(&mut tx, &admitted, p).await?
        };
        tx.commit().await?;
        let items = rows.iter().map(row::item).collect::<Result<Vec<_>>>()?;
        Ok(Attempt::Items(items))
    }

    /// Claims the chosen `ids` for the claim `p` (`limit_claim.sql`: each
    /// still pending, through the primary key).
    pub(super) async fn claim_ids(
        &self,
        tx: &mut sqlx::PgConnection,
        ids: &[Uuid],
        p: &ClaimParams,
    ) -> Result<Vec<PgRow>> {
        Ok(sqlx::query(LIMIT_CLAIM)
            .persistent(self.persistent)
            .bind(ids)
            .bind(&p.worker_id)
            .bind(secs(p.lease))
            .fetch_all(tx)
            .await?)
    }

    /// Opens a limited claim's system-role transaction: the flow settings'
    /// generation checked against `fgen` (a moved one ends the claim as
    /// [`Attempt::Stale`]), and what is full as the claim begins (the
    /// claimed rows' scopes and the scopes `rates` hold back: left out of
    /// the candidates; a full lane ends the claim with nothing).
    pub(super) async fn limited_open(
        &self,
        p: &ClaimParams,
        limits: &[LimitSetting],
        rates: &[RateSetting],
        fgen: Option<i64>,
    ) -> Result<Opened> {
        let mut tx = self.begin_system().await?;
        if fgen.is_some() && super::flow_gen::flow_gen_on(&mut tx, self.persistent).await? != fgen {
            tx.commit().await?;
            return Ok(Opened::Done(Attempt::Stale));
        }
        let rows = if limits.is_empty() {
            Vec::new()
        } else {
            self.held_rows(&mut tx, &p.lane, &limit_kinds(limits))
                .await?
        };
        let claimed = rows
            .iter()
            .map(|r| parts(r, false))
            .collect::<Result<Vec<_>>>()?;
        let mut full = Full::of(limits, &p.lane, &claimed);
        let held_back = self.held_back_now(&mut tx, rates, &p.lane).await?;
        held_back.note_rate_limited(&p.kinds);
        full.add(held_back);
        if full.lane {
            tx.commit().await?;
            return Ok(Opened::Done(Attempt::Items(Vec::new())));
        }
        Ok(Opened::Ready(tx, full))
    }

    /// Locks the scope keys of every candidate (`keyed`: each one's keys)
    /// in hash order, then counts the claims holding slots in a statement
    /// of its own after the locks (every claimer of a key holds its lock to
    /// its commit, so the count includes every claim made before): the
    /// admission of the claim.
    pub(super) async fn lock_and_count<'k>(
        &self,
        tx: &mut sqlx::PgConnection,
        p: &ClaimParams,
        limits: &[LimitSetting],
        keyed: impl Iterator<Item = &'k Vec<(String, u32)>>,
    ) -> Result<Admission> {
        let locks: BTreeSet<String> = keyed
            .flat_map(|keys| {
                keys.iter()
                    .map(|(k, _)| format!("drover.limit:{}:{k}", self.schema))
            })
            .collect();
        if !locks.is_empty() {
            sqlx::query(LIMIT_LOCK)
                .persistent(self.persistent)
                .bind(locks.into_iter().collect::<Vec<_>>())
                .execute(&mut *tx)
                .await?;
        }
        let rows = if limits.is_empty() {
            Vec::new()
        } else {
            self.held_rows(&mut *tx, &p.lane, &limit_kinds(limits))
                .await?
        };
        Ok(Admission::new(held_counts(limits, &rows)?))
    }

    /// The limited claim's candidates in claim order, locked `SKIP
    /// LOCKED`, leaving out the scopes `full` names.
    async fn candidates(
        &self,
        tx: &mut sqlx::PgConnection,
        p: &ClaimParams,
        limits: &[LimitSetting],
        full: &Full,
    ) -> Result<Vec<Parts>> {
        let ordered = ordered_kinds(limits);
        let hold: Vec<&str> = ordered
            .iter()
            .filter(|(_, r)| *r == OnDeadLetter::Hold)
            .map(|(k, _)| k.as_str())
            .collect();
        let ordered: Vec<&str> = ordered.iter().map(|(k, _)| k.as_str()).collect();
        let want = p
            .limit
            .saturating_mul(CANDIDATES_PER_SLOT)
            .saturating_add(CANDIDATES_EXTRA);
        // Without an ordered limit in force, the statement without the
        // head probe: it also runs on a schema before migration 0034 (a
        // binary ahead of its database until `drover migrate`).
        let statement = if ordered.is_empty() {
            LIMIT_CANDIDATES
        } else {
            LIMIT_CANDIDATES_ORDERED.as_str()
        };
        // Planned on every call (an unnamed statement): a plan kept for the
        // session turns generic after five calls, and with a backlog the
        // statistics have not seen yet the generic plan sorts every pending
        // item of the lane (measured by `drover bench --limits`: 376 ms
        // against 14 ms for the claim index walk at 100k items). Planning
        // costs about a millisecond over the partitions.
        let mut q = sqlx::query(statement)
            .persistent(false)
            .bind(&p.lane)
            .bind(&p.kinds)
            .bind(i64::from(want))
            .bind(&full.kinds)
            .bind(&full.group_kinds)
            .bind(&full.group_tenants)
            .bind(&full.groups);
        if !ordered.is_empty() {
            q = q.bind(&ordered).bind(&hold);
        }
        let rows = q.fetch_all(&mut *tx).await?;
        rows.iter().map(|r| parts(r, true)).collect()
    }

    /// Admission in claim order of the `keyed` candidates (each with its
    /// concurrency keys) under their slots (`admission`, counted after the
    /// scope locks) and the `rates`: the cells the candidates start against
    /// are locked and read with the transaction's clock, and the cells the
    /// admitted moved are written back on `tx`. At most `limit`.
    async fn admit_rated(
        &self,
        tx: &mut sqlx::PgConnection,
        candidates: &[Parts],
        keyed: Vec<(Uuid, Vec<(String, u32)>)>,
        rates: &[RateSetting],
        mut admission: Admission,
        limit: usize,
    ) -> Result<Vec<Uuid>> {
        let (mut cells, rate_keys) = self.cells_for(&mut *tx, candidates, rates).await?;
        let mut admitted: Vec<Uuid> = Vec::new();
        for ((id, keys), rated) in keyed.into_iter().zip(&rate_keys) {
            if admitted.len() == limit {
                break;
            }
            // Rates first: a start the rate holds back takes no slot.
            if !cells.would_admit(rated) {
                continue;
            }
            if admission.admit(&keys) {
                cells.admit(rated);
                admitted.push(id);
            }
        }
        cells.note_rate_limited();
        if !admitted.is_empty() {
            self.write_cells(tx, cells.changed()).await?;
        }
        Ok(admitted)
    }

    /// The rate cells `candidates` start against, locked and read with the
    /// transaction's clock (the clock every admission of the claim uses),
    /// and each candidate's rate keys, in the order of `candidates`.
    pub(super) async fn cells_for(
        &self,
        tx: &mut sqlx::PgConnection,
        candidates: &[Parts],
        rates: &[RateSetting],
    ) -> Result<(Cells, Vec<Vec<(String, Rate)>>)> {
        let rate_keys: Vec<Vec<(String, Rate)>> = candidates
            .iter()
            .map(|c| rate_keys_of(rates, &c.lane, &c.kind, c.tenant, c.group.as_deref()))
            .collect();
        let cell_keys: BTreeSet<String> = rate_keys
            .iter()
            .flat_map(|keys| keys.iter().map(|(k, _)| k.clone()))
            .collect();
        let cells = if cell_keys.is_empty() {
            Cells::default()
        } else {
            let read = self
                .lock_cells(&mut *tx, cell_keys.into_iter().collect())
                .await?;
            read.into_cells()
        };
        Ok((cells, rate_keys))
    }
}

/// The limits in force as `claim_limited` takes them: arrays, not rows.
/// Under [`limits_broken`] (tests only) every limit is unbounded.
pub(super) struct CallArgs {
    lane: Option<i32>,
    kinds: Vec<String>,
    kind_limits: Vec<i32>,
    group_kinds: Vec<String>,
    group_limits: Vec<i32>,
    ordered: Vec<String>,
    hold: Vec<String>,
}

impl CallArgs {
    pub(super) fn of(limits: &[LimitSetting], lane: &str) -> CallArgs {
        let n = |c: u32| {
            if limits_broken() {
                i32::MAX
            } else {
                i32::try_from(c).unwrap_or(i32::MAX)
            }
        };
        let mut out = CallArgs {
            lane: None,
            kinds: Vec::new(),
            kind_limits: Vec::new(),
            group_kinds: Vec::new(),
            group_limits: Vec::new(),
            ordered: Vec::new(),
            hold: Vec::new(),
        };
        for l in limits {
            match &l.scope {
                LimitScope::Lane(name) if name == lane => out.lane = Some(n(l.concurrency)),
                LimitScope::Lane(_) => {}
                LimitScope::Kind(k) => {
                    out.kinds.push(k.clone());
                    out.kind_limits.push(n(l.concurrency));
                }
                LimitScope::KindPerGroup(k) => {
                    out.group_kinds.push(k.clone());
                    out.group_limits.push(n(l.concurrency));
                }
            }
        }
        for (k, rule) in ordered_kinds(limits) {
            // A broken limit also lets groups run out of order.
            if limits_broken() {
                continue;
            }
            if rule == OnDeadLetter::Hold {
                out.hold.push(k.clone());
            }
            out.ordered.push(k);
        }
        out
    }
}

/// One row of `limit_usage.sql`.
fn usage_row(r: &PgRow) -> Result<UsageRow> {
    let c = parts(r, false)?;
    Ok(UsageRow {
        claimed: r.try_get::<String, _>("status")? == "claimed",
        lane: c.lane,
        kind: c.kind,
        tenant: c.tenant,
        group: c.group,
        n: u64::try_from(r.try_get::<i64, _>("n")?).unwrap_or(0),
    })
}

/// Slots held per scope key, from the claimed rows.
pub(super) fn held_counts(limits: &[LimitSetting], rows: &[PgRow]) -> Result<HashMap<String, u64>> {
    let mut held: HashMap<String, u64> = HashMap::new();
    for r in rows {
        let c = parts(r, false)?;
        for (k, _) in keys_of(limits, &c.lane, &c.kind, c.tenant, c.group.as_deref()) {
            *held.entry(k).or_default() += 1;
        }
    }
    Ok(held)
}

/// What opening a limited claim came to ([`PgStore::limited_open`]).
pub(super) enum Opened {
    /// The transaction, open, and the scopes full as the claim began.
    Ready(sqlx::Transaction<'static, sqlx::Postgres>, Full),
    /// The claim ended before its candidates: stale, or the lane full.
    Done(Attempt),
}

/// The kinds the limits in force name (the lane's own limit aside): whose
/// claimed rows the held slots are read from.
fn limit_kinds(limits: &[LimitSetting]) -> Vec<String> {
    limits
        .iter()
        .filter(|l| !matches!(l.scope, LimitScope::Lane(_)))
        .map(|l| l.scope.name().to_owned())
        .collect()
}

/// The scopes already full, as the candidates' filter binds them.
#[derive(Default)]
pub(super) struct Full {
    pub(super) lane: bool,
    pub(super) kinds: Vec<String>,
    pub(super) group_kinds: Vec<String>,
    pub(super) group_tenants: Vec<Uuid>,
    pub(super) groups: Vec<String>,
}

impl Full {
    /// Adds the scopes the rates hold back as the claim begins.
    pub(super) fn add(&mut self, h: HeldBack) {
        self.lane |= h.lane;
        self.kinds.extend(h.kinds);
        for (kind, tenant, group) in h.groups {
            self.group_kinds.push(kind);
            self.group_tenants.push(tenant);
            self.groups.push(group);
        }
    }

    /// From the claimed rows `claimed` of the claim of `lane`.
    pub(super) fn of(limits: &[LimitSetting], lane: &str, claimed: &[Parts]) -> Full {
        let f = full_scopes(
            limits,
            claimed.iter().map(|c| {
                (
                    c.lane.as_str(),
                    c.kind.as_str(),
                    c.tenant,
                    c.group.as_deref(),
                )
            }),
        );
        let mut out = Full {
            lane: f.lanes.iter().any(|l| l == lane),
            kinds: f.kinds,
            ..Full::default()
        };
        for (kind, tenant, group) in f.groups {
            out.group_kinds.push(kind);
            out.group_tenants.push(tenant);
            out.groups.push(group);
        }
        out
    }
}

#[async_trait]
impl LimitStore for PgStore {
    async fn limit_set(
        &self,
        scope: &LimitScope,
        source: LimitSource,
        spec: LimitSpec,
        actor: Uuid,
    ) -> Result<LimitSetting> {
        let mut tx = self.begin_system().await?;
        let r = sqlx::query(LIMIT_SET)
            .persistent(self.persistent)
            .bind(scope.kind_name())
            .bind(scope.name())
            .bind(source.as_str())
            .bind(i32::try_from(spec.concurrency).unwrap_or(i32::MAX))
            .bind(actor)
            .bind(spec.ordered)
            .bind(spec.on_dead_letter.as_str())
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        self.limits.clear();
        setting(&r)
    }

    async fn limit_clear(&self, scope: &LimitScope, source: LimitSource) -> Result<bool> {
        let mut tx = self.begin_system().await?;
        let n = sqlx::query(LIMIT_CLEAR)
            .persistent(self.persistent)
            .bind(scope.kind_name())
            .bind(scope.name())
            .bind(source.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        self.limits.clear();
        Ok(n > 0)
    }

    async fn limit_settings(&self) -> Result<Vec<LimitSetting>> {
        let mut tx = self.begin_system().await?;
        let rows = match sqlx::query(LIMIT_LIST)
            .persistent(self.persistent)
            .fetch_all(&mut *tx)
            .await
        {
            Ok(rows) => rows,
            // undefined_table: the schema predates limits (a binary ahead
            // of its database in an online upgrade, before `drover
            // migrate`): none is in force, and claims run as they did.
            Err(e) if super::undefined_table(&e) => {
                return Ok(Vec::new());
            }
            Err(e) => return Err(e.into()),
        };
        tx.commit().await?;
        rows.iter().map(setting).collect()
    }

    async fn limit_usage(&self) -> Result<Vec<LimitUsage>> {
        let limits = effective(&self.limit_settings().await?);
        let lanes: Vec<&str> = limits
            .iter()
            .filter(|l| matches!(l.scope, LimitScope::Lane(_)))
            .map(|l| l.scope.name())
            .collect();
        let kinds: Vec<&str> = limits
            .iter()
            .filter(|l| !matches!(l.scope, LimitScope::Lane(_)))
            .map(|l| l.scope.name())
            .collect();
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(LIMIT_USAGE)
            .persistent(false)
            .bind(&lanes)
            .bind(&kinds)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let rows = rows.iter().map(usage_row).collect::<Result<Vec<_>>>()?;
        Ok(usage(&limits, &rows))
    }

    async fn limits_apply(&self, lane: &str, kinds: &[String]) -> Result<bool> {
        Ok(applies(&self.limits_in_force().await?, lane, kinds))
    }

    async fn order_blocker(
        &self,
        item: &Item,
        on_dead_letter: OnDeadLetter,
    ) -> Result<Option<OrderBlocker>> {
        let Some(group) = &item.group else {
            return Ok(None);
        };
        let mut tx = self.begin_system().await?;
        let r = sqlx::query(LIMIT_ORDER_BLOCKER)
            .persistent(self.persistent)
            .bind(item.id)
            .bind(item.tenant_id)
            .bind(&item.kind)
            .bind(group)
            .bind(on_dead_letter == OnDeadLetter::Hold)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        r.map(|r| {
            Ok(OrderBlocker {
                id: r.try_get("id")?,
                status: r.try_get::<String, _>("status")?.parse()?,
            })
        })
        .transpose()
    }
}
