//! Claim-latency mode (PostgreSQL): the claim statement itself, timed with a
//! large backlog waiting, optionally while a second session holds a
//! transaction open and the workers churn through the backlog.
//!
//! The backlog is loaded straight in SQL (`INSERT … SELECT generate_series`,
//! in chunks of [`LOAD_CHUNK`]) because 10 M items through the bulk API
//! would take many minutes; the rows are what the bulk API writes (pending,
//! lane `default`, payload `{"n": i}`). Then `VACUUM ANALYZE`, as autovacuum
//! would leave a table that has settled.

use std::time::{Duration, Instant};

use sqlx::{Acquire, Connection, Executor, Row};

use crate::recorder::Recorder;
use crate::report::{ClaimStats, Percentiles, Probe, Report};
use crate::standard::base_report;
use crate::target::Target;
use crate::workers::Fleet;
use crate::{BenchConfig, BenchError, KIND, LANE, Mode, Progress};

/// Items per loading statement.
pub const LOAD_CHUNK: u64 = 250_000;
/// The interval between claims timed during the churn.
pub const PROBE_EVERY: Duration = Duration::from_millis(200);

/// The claim and batched-completion statements, as the store runs them.
const CLAIM_SQL: &str = include_str!("../../drover-store/sql/postgres/item_claim.sql");
const COMPLETE_SQL: &str = include_str!("../../drover-store/sql/postgres/item_complete_many.sql");

pub(crate) async fn run(
    config: &BenchConfig,
    target: &Target,
    progress: &Progress,
) -> Result<Report, BenchError> {
    let Mode::ClaimLatency {
        backlog,
        claims,
        claim_batch,
        churn,
        hold_xact,
    } = config.mode.clone()
    else {
        return Err(drover::Error::invalid("mode", "not claim latency").into());
    };
    let admin = target.admin()?;
    let mut report = base_report(config, target, "claim_latency");
    report.backlog = Some(backlog);
    report.hold_xact = Some(hold_xact);

    let bar = progress.bar(backlog, "load");
    let t0 = Instant::now();
    let mut next = 0u64;
    while next < backlog {
        let n = (backlog - next).min(LOAD_CHUNK);
        load(admin, next, n).await?;
        next += n;
        bar.inc(n);
    }
    sqlx::query("VACUUM ANALYZE items").execute(admin).await?;
    bar.finish_and_clear();
    report.load_s = Some(t0.elapsed().as_secs_f64());
    progress.note(&format!(
        "loaded {backlog} pending items in {:.1} s",
        t0.elapsed().as_secs_f64()
    ));

    let queue = target.queue(2).await?;
    let mut plans = vec![explain(target).await];
    report.claim_before = Some(measure(&queue, claims, claim_batch).await?);

    if let Some(churn) = churn {
        // The open transaction pins the xmin horizon: no row version
        // deleted after it began can be vacuumed (or marked dead in an
        // index) until it ends.
        let mut holder = if hold_xact {
            let mut conn = admin.acquire().await?.detach();
            conn.execute("BEGIN; SELECT txid_current();").await?;
            progress.note("holding a transaction open in a second session");
            Some(conn)
        } else {
            None
        };
        let recorder = Recorder::new();
        let fleet = Fleet::start(config, target, &recorder).await?;
        let bar = progress.bar(churn.as_secs(), "churn");
        let start = Instant::now();
        let mut probes = Vec::new();
        let mut failure = None;
        while start.elapsed() < churn {
            tokio::time::sleep(PROBE_EVERY).await;
            match measure(&queue, 1, claim_batch).await {
                Ok(s) => probes.push(Probe {
                    t_s: start.elapsed().as_secs_f64(),
                    claim_ms: s.claim.p50,
                }),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
            bar.set_position(start.elapsed().as_secs());
        }
        bar.finish_and_clear();
        report.rss = Some(fleet.rss());
        fleet.stop().await;
        if let Some(e) = failure {
            return Err(e);
        }
        report.churned = Some(recorder.total().executed);
        report.probes = Some(probes);
        plans.push(explain(target).await);
        report.claim_after = Some(measure(&queue, claims, claim_batch).await?);
        if let Some(conn) = holder.as_mut() {
            conn.execute("ROLLBACK").await?;
        }
        if let Some(conn) = holder {
            let _ = conn.close().await;
        }
    }
    let dead = sqlx::query(
        // items is partitioned (migration 0026): its partitions' counts.
        "SELECT sum(s.n_dead_tup)::bigint FROM pg_stat_user_tables s \
         JOIN pg_inherits i ON i.inhrelid = s.relid \
         WHERE s.schemaname = current_schema() AND i.inhparent = 'items'::regclass",
    )
    .fetch_optional(admin)
    .await?;
    report.dead_tuples = dead.and_then(|r| r.try_get::<i64, _>(0).ok());
    report.plans = Some(plans);
    Ok(report)
}

/// Inserts items `from..from + n` as pending, in one statement.
async fn load(admin: &sqlx::PgPool, from: u64, n: u64) -> Result<(), BenchError> {
    let nil = uuid::Uuid::nil();
    sqlx::query(
        "INSERT INTO items (id, tenant_id, kind, lane, payload, priority, status, available_at, \
             attempts, max_attempts, claim_seq, created_by, created_at, updated_at, updated_by) \
         SELECT gen_random_uuid(), $3, $4, $5, jsonb_build_object('n', g), 0, 'pending', \
                now() - interval '1 day' + g * interval '1 microsecond', 0, 5, 0, $3, now(), now(), $3 \
         FROM generate_series($1::bigint, $2::bigint) AS g",
    )
    .bind(i64::try_from(from).unwrap_or(i64::MAX))
    .bind(i64::try_from(from + n - 1).unwrap_or(i64::MAX))
    .bind(nil)
    .bind(KIND)
    .bind(LANE)
    .execute(admin)
    .await?;
    Ok(())
}

/// Times `claims` claims of `batch` items through the queue API, each
/// followed by the batched completion of what it claimed.
async fn measure(queue: &drover::Queue, claims: u32, batch: u32) -> Result<ClaimStats, BenchError> {
    let mut claim_ms = Vec::with_capacity(claims as usize);
    let mut complete_ms = Vec::with_capacity(claims as usize);
    let mut claimed = 0usize;
    for _ in 0..claims {
        let t = Instant::now();
        let got = queue
            .claim(LANE, &[], "bench-probe", Duration::from_secs(30), batch)
            .await?;
        claim_ms.push(t.elapsed().as_secs_f64() * 1e3);
        claimed += got.items.len();
        let refs: Vec<&drover::JobContext> = got.items.iter().collect();
        let t = Instant::now();
        queue.complete_many(&refs).await?;
        complete_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(ClaimStats {
        claim: Percentiles::of(claim_ms),
        complete: Percentiles::of(complete_ms),
        mean_claimed: claimed as f64 / f64::from(claims.max(1)),
    })
}

/// `EXPLAIN (ANALYZE, BUFFERS)` of one claim of 20 and of its batched
/// completion, as the system role, in a transaction rolled back after. A
/// failure is reported as the plan's text, never fails the run.
async fn explain(target: &Target) -> String {
    match explain_inner(target).await {
        Ok(s) => s,
        Err(e) => format!("(explain failed: {e})"),
    }
}

async fn explain_inner(target: &Target) -> Result<String, BenchError> {
    let admin = target.admin()?;
    let mut conn = admin.acquire().await?.detach();
    let mut out = String::new();
    {
        let mut tx = Connection::begin(&mut conn).await?;
        let c = tx.acquire().await?;
        // The installation's system role (migration 0005 names it).
        c.execute("SELECT set_config('role', (SELECT system_role FROM drover_roles()), true)")
            .await?;
        c.execute(format!("PREPARE bench_claim AS {CLAIM_SQL}").as_str())
            .await?;
        c.execute(format!("PREPARE bench_complete AS {COMPLETE_SQL}").as_str())
            .await?;
        let rows = sqlx::query(
            "EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_claim('default', '{}', 'bench-explain', 30, 20)",
        )
        .fetch_all(&mut *c)
        .await?;
        out.push_str("claim of 20:\n");
        for r in rows {
            out.push_str(&r.try_get::<String, _>(0)?);
            out.push('\n');
        }
        let ids = sqlx::query(
            "SELECT coalesce(string_agg(id::text, ','), ''), coalesce(string_agg(claim_token::text, ','), '') \
             FROM items WHERE claimed_by = 'bench-explain'",
        )
        .fetch_one(&mut *c)
        .await?;
        let (ids, tokens): (String, String) = (ids.try_get(0)?, ids.try_get(1)?);
        // Both lists are uuids the database printed: hex, dashes, commas.
        let rows = sqlx::query(&format!(
            "EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_complete('{{{ids}}}'::uuid[], '{{{tokens}}}'::uuid[])"
        ))
        .fetch_all(&mut *c)
        .await?;
        out.push_str("batched completion of those:\n");
        for r in rows {
            out.push_str(&r.try_get::<String, _>(0)?);
            out.push('\n');
        }
        tx.rollback().await?;
    }
    let _ = conn.close().await;
    Ok(out)
}
