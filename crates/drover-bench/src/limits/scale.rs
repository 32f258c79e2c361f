//! Parts 3 and 4 of the limits mode: claim latency with a large backlog.
//!
//! 3. `items` pending items spread over `groups` groups (item `i` in group
//!    `i mod groups`, so each group's items are spread through the claim
//!    order), in a lane of their own. `claims` claims of `claim_batch`
//!    items are timed through `Queue::claim`, each followed by
//!    `Queue::complete_many` of what it claimed, in four alternating blocks
//!    per variant: no limit in force, then a per-group limit of 1 on the
//!    kind. The figure is the ratio of the limited p99 to the unlimited.
//! 4. Then `big_group` more items of one group (`big`) are loaded *ahead*
//!    of the others in claim order (older `available_at`: they arrived
//!    first, the case that can hurt), one of them is claimed and held, so
//!    that group's slot is full, and the other groups' claims are timed
//!    again under the same limit. The figure compares them with part 3's
//!    limited claims (same items, same limit, same run).
//!
//! Loading: on PostgreSQL straight in SQL (`INSERT … SELECT
//! generate_series`, [`crate::claim::LOAD_CHUNK`] rows per statement, rows
//! as the bulk API writes them), then `VACUUM ANALYZE`, as the
//! claim-latency mode does; on SQLite through the bulk API
//! (`Queue::enqueue_many`, `batch` items per call), its fast path there.
//!
//! A series of timed claims stops at its next claim once `claim_budget` has
//! passed (at least one claim is timed), so a pathological case is
//! reported with the claims it managed rather than running for hours.

use std::time::{Duration, Instant};

use chrono::Utc;
use drover::NewItem;
use drover::store::limits::LimitScope;
use serde_json::json;
use sqlx::{Acquire, Connection, Executor, Row};

use crate::limits::{LimitsSpec, operator};
use crate::report::limits::{BigGroup, ScaleClaims, ratio};
use crate::report::{ClaimStats, Percentiles};
use crate::target::Target;
use crate::{BenchConfig, BenchError, KIND, Progress};

/// The lane of parts 3 and 4.
pub const SCALE_LANE: &str = "bench-scale";
/// The one large group of part 4.
pub const BIG_GROUP: &str = "big";
/// Blocks per variant in part 3 (they alternate).
const BLOCKS: u32 = 4;

/// The limited claim's candidate statement, as the store runs it.
pub(crate) const CANDIDATES_SQL: &str =
    include_str!("../../../drover-store/sql/postgres/limit_candidates.sql");

/// Timings gathered over one or more series of claims.
#[derive(Default)]
struct Samples {
    claim_ms: Vec<f64>,
    complete_ms: Vec<f64>,
    claimed: usize,
    big_claimed: u64,
    budget_hit: bool,
    /// Claims cut at the budget (their time counted as the budget).
    unfinished: u64,
    /// Time spent in timed claims so far (the budget's clock).
    spent: Duration,
}

impl Samples {
    fn stats(&self) -> ClaimStats {
        let n = self.claim_ms.len().max(1);
        ClaimStats {
            claim: Percentiles::of(self.claim_ms.clone()),
            complete: Percentiles::of(self.complete_ms.clone()),
            mean_claimed: self.claimed as f64 / n as f64,
        }
    }
}

pub(crate) async fn run(
    config: &BenchConfig,
    spec: &LimitsSpec,
    target: &Target,
    progress: &Progress,
) -> Result<(ScaleClaims, Option<BigGroup>), BenchError> {
    let queue = target.queue(2).await?;
    let scope = LimitScope::KindPerGroup(KIND.into());
    let t = Instant::now();
    load(
        config,
        target,
        progress,
        0,
        spec.items,
        Group::Spread(spec.groups),
    )
    .await?;
    let load_s = t.elapsed().as_secs_f64();
    progress.note(&format!(
        "loaded {} items over {} groups in {load_s:.1} s",
        spec.items, spec.groups
    ));

    let per_block = spec.claims.div_ceil(BLOCKS);
    let (mut unlimited, mut limited) = (Samples::default(), Samples::default());
    for _ in 0..BLOCKS {
        series(&queue, spec, per_block, &mut unlimited, None).await?;
        queue.limit_set(&operator(), &scope, 1).await?;
        let r = series(&queue, spec, per_block, &mut limited, None).await;
        queue.limit_clear(&operator(), &scope).await?;
        r?;
    }
    let plan = explain(target, spec.claim_batch, None).await;
    let (u, l) = (unlimited.stats(), limited.stats());
    progress.note(&format!(
        "claim p99 no limit {:.3} ms, per-group limit {:.3} ms",
        u.claim.p99, l.claim.p99
    ));
    let scale = ScaleClaims {
        items: spec.items,
        groups: spec.groups,
        load_s,
        p50_ratio: ratio(l.claim.p50, u.claim.p50),
        p99_ratio: ratio(l.claim.p99, u.claim.p99),
        unlimited: u,
        limited: l,
        unfinished: unlimited.unfinished + limited.unfinished,
        plan,
    };
    if spec.big_group == 0 {
        return Ok((scale, None));
    }
    queue.limit_set(&operator(), &scope, 1).await?;
    let big = big_group(config, spec, target, progress, &queue, &scale).await;
    queue.limit_clear(&operator(), &scope).await?;
    Ok((scale, Some(big?)))
}

/// Part 4, with the per-group limit in force.
async fn big_group(
    config: &BenchConfig,
    spec: &LimitsSpec,
    target: &Target,
    progress: &Progress,
    queue: &drover::Queue,
    scale: &ScaleClaims,
) -> Result<BigGroup, BenchError> {
    let t = Instant::now();
    load(
        config,
        target,
        progress,
        spec.items,
        spec.big_group,
        Group::One,
    )
    .await?;
    let load_s = t.elapsed().as_secs_f64();
    progress.note(&format!(
        "loaded {} items of group {BIG_GROUP} in {load_s:.1} s",
        spec.big_group
    ));
    // The head of the claim order is the large group's: a claim of one
    // takes one of its items, and holds its only slot.
    let held = queue
        .claim(
            SCALE_LANE,
            &[],
            "bench-holder",
            Duration::from_secs(3600),
            1,
        )
        .await?;
    let holds_big = held
        .items
        .iter()
        .any(|cx| cx.item().group.as_deref() == Some(BIG_GROUP));
    if !holds_big {
        return Err(BenchError::Incomplete(format!(
            "the first claim did not take an item of group {BIG_GROUP}"
        )));
    }
    let mut with = Samples::default();
    let r = series(queue, spec, spec.claims, &mut with, Some(BIG_GROUP)).await;
    let plan = explain(target, spec.claim_batch, Some(BIG_GROUP)).await;
    let w = with.stats();
    progress.note(&format!(
        "claim p99 of other groups with group {BIG_GROUP} waiting: {:.3} ms ({} claims)",
        w.claim.p99, w.claim.count
    ));
    // The sweep's parking passes, as many as it takes (each stops at its
    // budget), then the same claims again with the backlog parked.
    let t = Instant::now();
    let (mut parked, mut passes) = (0u64, 0u32);
    let parking = loop {
        match queue.store().park_pass().await {
            Ok(pass) => {
                passes += 1;
                parked += pass.parked;
                if pass.parked == 0 {
                    break Ok(());
                }
            }
            Err(e) => break Err(e),
        }
    };
    let park_s = t.elapsed().as_secs_f64();
    progress.note(&format!(
        "parked {parked} items of group {BIG_GROUP} in {park_s:.1} s ({passes} passes)"
    ));
    // Parking leaves each moved row's old version behind, and its entry
    // in the claim index until a vacuum (autovacuum, or drover's paced
    // vacuum) clears it: time the claims after one, as they run once the
    // installation's vacuum has passed.
    let t = Instant::now();
    if let Some(admin) = &target.admin
        && parking.is_ok()
    {
        sqlx::query("VACUUM items").execute(admin).await?;
    }
    let vacuum_s = t.elapsed().as_secs_f64();
    let mut after = Samples::default();
    let r2 = match parking {
        Ok(()) => series(queue, spec, spec.claims, &mut after, Some(BIG_GROUP)).await,
        Err(e) => Err(e.into()),
    };
    let refs: Vec<&drover::JobContext> = held.items.iter().collect();
    queue.complete_many(&refs).await?;
    r?;
    r2?;
    let a = after.stats();
    progress.note(&format!(
        "claim p99 of other groups with group {BIG_GROUP} parked: {:.3} ms ({} claims)",
        a.claim.p99, a.claim.count
    ));
    Ok(BigGroup {
        big_items: spec.big_group,
        load_s,
        without: scale.limited,
        p50_ratio: ratio(w.claim.p50, scale.limited.claim.p50),
        p99_ratio: ratio(w.claim.p99, scale.limited.claim.p99),
        with: w,
        budget_hit: with.budget_hit,
        big_claimed: with.big_claimed + after.big_claimed,
        unfinished: with.unfinished,
        parked,
        park_s,
        park_passes: passes,
        vacuum_s,
        after_p50_ratio: ratio(a.claim.p50, scale.limited.claim.p50),
        after_p99_ratio: ratio(a.claim.p99, scale.limited.claim.p99),
        after: a,
        plan,
    })
}

/// Which group loaded items get.
#[derive(Clone, Copy)]
enum Group {
    /// Item `i` in group `g<i mod n>`, one day old.
    Spread(u64),
    /// Every item in [`BIG_GROUP`], two days old (ahead of the spread ones).
    One,
}

/// Loads items `from..from + n` as pending in [`SCALE_LANE`].
async fn load(
    config: &BenchConfig,
    target: &Target,
    progress: &Progress,
    from: u64,
    n: u64,
    group: Group,
) -> Result<(), BenchError> {
    let bar = progress.bar(n, "load");
    let mut next = from;
    let end = from + n;
    if let Some(admin) = &target.admin {
        while next < end {
            let k = (end - next).min(crate::claim::LOAD_CHUNK);
            load_pg(admin, next, k, group).await?;
            next += k;
            bar.inc(k);
        }
        sqlx::query("VACUUM ANALYZE items").execute(admin).await?;
        // The rows were written behind the queue's back, older than the
        // lane's claim floors (migration 0025), which a claim skips until
        // the next refresh (up to a second): mark the floors stale so the
        // first claim reads the stripes from their start, as it would
        // after an enqueue.
        sqlx::query("UPDATE claim_floors SET taken_at = '-infinity'")
            .execute(admin)
            .await?;
    } else {
        let producer = target.queue(2).await?;
        let now = Utc::now();
        while next < end {
            let k = (end - next).min(config.batch as u64);
            let items: Vec<NewItem> = (next..next + k)
                .map(|i| {
                    let (g, days) = match group {
                        Group::Spread(m) => (format!("g{}", i % m), 1),
                        Group::One => (BIG_GROUP.to_owned(), 2),
                    };
                    let at = now - chrono::Duration::days(days)
                        + chrono::Duration::microseconds(i64::try_from(i).unwrap_or(0));
                    NewItem::new(KIND, json!({ "n": i }))
                        .with_lane(SCALE_LANE)
                        .with_group(g)
                        .with_available_at(at)
                })
                .collect();
            producer.enqueue_many(&operator(), items).await?;
            next += k;
            bar.inc(k);
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// Inserts items `from..from + n` in one statement (PostgreSQL).
async fn load_pg(admin: &sqlx::PgPool, from: u64, n: u64, group: Group) -> Result<(), BenchError> {
    let nil = uuid::Uuid::nil();
    let (modulo, fixed, days) = match group {
        Group::Spread(m) => (i64::try_from(m).unwrap_or(1), None, 1),
        Group::One => (1, Some(BIG_GROUP), 2),
    };
    sqlx::query(
        "INSERT INTO items (id, tenant_id, kind, lane, group_key, payload, priority, status, \
             available_at, attempts, max_attempts, claim_seq, created_by, created_at, updated_at, updated_by) \
         SELECT gen_random_uuid(), $3, $4, $5, coalesce($7, 'g' || (g % $6)), jsonb_build_object('n', g), \
                0, 'pending', now() - $8 * interval '1 day' + g * interval '1 microsecond', 0, 5, 0, \
                $3, now(), now(), $3 \
         FROM generate_series($1::bigint, $2::bigint) AS g",
    )
    .bind(i64::try_from(from).unwrap_or(i64::MAX))
    .bind(i64::try_from(from + n - 1).unwrap_or(i64::MAX))
    .bind(nil)
    .bind(KIND)
    .bind(SCALE_LANE)
    .bind(modulo)
    .bind(fixed)
    .bind(f64::from(days))
    .execute(admin)
    .await?;
    Ok(())
}

/// Times `claims` claims (fewer once `into` has spent `spec.claim_budget`
/// in claims) of `spec.claim_batch` items each, completing each batch,
/// into `into`; counts claimed items of group `big`.
async fn series(
    queue: &drover::Queue,
    spec: &LimitsSpec,
    claims: u32,
    into: &mut Samples,
    big: Option<&str>,
) -> Result<(), BenchError> {
    for k in 0..claims {
        if (k > 0 || !into.claim_ms.is_empty()) && into.spent > spec.claim_budget {
            into.budget_hit = true;
            break;
        }
        let t = Instant::now();
        let claim = queue.claim(
            SCALE_LANE,
            &[],
            "bench-probe",
            Duration::from_secs(60),
            spec.claim_batch,
        );
        // A claim longer than the whole budget is cut there (dropping it
        // rolls its transaction back): its time is a lower bound.
        let Ok(got) = tokio::time::timeout(spec.claim_budget, claim).await else {
            into.spent += t.elapsed();
            into.claim_ms.push(t.elapsed().as_secs_f64() * 1e3);
            into.unfinished += 1;
            into.budget_hit = true;
            break;
        };
        let got = got?;
        into.spent += t.elapsed();
        into.claim_ms.push(t.elapsed().as_secs_f64() * 1e3);
        into.claimed += got.items.len();
        into.big_claimed += got
            .items
            .iter()
            .filter(|cx| big.is_some() && cx.item().group.as_deref() == big)
            .count() as u64;
        let refs: Vec<&drover::JobContext> = got.items.iter().collect();
        let t = Instant::now();
        queue.complete_many(&refs).await?;
        into.complete_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(())
}

/// PostgreSQL: `EXPLAIN (ANALYZE, BUFFERS)` of the limited claim's
/// candidate statement for a claim of `batch`, with the group `full` (if
/// any) full. `None` on SQLite; a failure is reported as the plan's text.
async fn explain(target: &Target, batch: u32, full: Option<&str>) -> Option<String> {
    // As the store asks: 4 per slot plus 32.
    let want = i64::from(batch) * 4 + 32;
    let (kinds, tenants, groups) = match full {
        Some(g) => (
            format!("{{{KIND}}}"),
            format!("{{{}}}", uuid::Uuid::nil()),
            format!("{{{g}}}"),
        ),
        None => ("{}".to_owned(), "{}".to_owned(), "{}".to_owned()),
    };
    let args =
        format!("'{SCALE_LANE}', '{{}}', {want}, '{{}}', '{kinds}', '{tenants}', '{groups}'");
    explain_both(target, CANDIDATES_SQL, &args).await
}

/// [`explain_statement`] as a custom plan (what the first executions of a
/// prepared statement run) and as the generic plan (what PostgreSQL may
/// switch to after five, when it estimates it no costlier), one after the
/// other.
pub(crate) async fn explain_both(target: &Target, statement: &str, args: &str) -> Option<String> {
    let custom = explain_statement(target, statement, args, Some("force_custom_plan")).await?;
    let generic = explain_statement(target, statement, args, Some("force_generic_plan"))
        .await
        .unwrap_or_default();
    Some(format!(
        "custom plan:\n{custom}\ngeneric plan (a prepared statement's after 5 executions, if no costlier):\n{generic}"
    ))
}

/// PostgreSQL: `EXPLAIN (ANALYZE, BUFFERS)` of the prepared `statement`
/// executed with `args` (SQL literals: EXPLAIN takes no bind parameters,
/// so callers pass only constants of their own), as the system role in a
/// transaction rolled back after. `None` on SQLite; a failure is reported
/// as the plan's text, never fails the run. `mode` sets `plan_cache_mode`
/// for it.
pub(crate) async fn explain_statement(
    target: &Target,
    statement: &str,
    args: &str,
    mode: Option<&str>,
) -> Option<String> {
    let admin = target.admin.as_ref()?;
    Some(match explain_inner(admin, statement, args, mode).await {
        Ok(s) => s,
        Err(e) => format!("(explain failed: {e})"),
    })
}

async fn explain_inner(
    admin: &sqlx::PgPool,
    statement: &str,
    args: &str,
    mode: Option<&str>,
) -> Result<String, BenchError> {
    let mut conn = admin.acquire().await?.detach();
    let mut out = String::new();
    {
        let mut tx = Connection::begin(&mut conn).await?;
        let c = tx.acquire().await?;
        c.execute("SELECT set_config('role', (SELECT system_role FROM drover_roles()), true)")
            .await?;
        if let Some(m) = mode {
            sqlx::query("SELECT set_config('plan_cache_mode', $1, true)")
                .bind(m)
                .execute(&mut *c)
                .await?;
        }
        c.execute(format!("PREPARE bench_explained AS {statement}").as_str())
            .await?;
        let rows = sqlx::query(&format!(
            "EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_explained({args})"
        ))
        .fetch_all(&mut *c)
        .await?;
        for r in rows {
            out.push_str(&r.try_get::<String, _>(0)?);
            out.push('\n');
        }
        tx.rollback().await?;
    }
    let _ = conn.close().await;
    Ok(out)
}
