//! Projector scenario: a projector process is killed with SIGKILL at random
//! moments while it applies a log that keeps growing, and restarted each
//! time. Its projection lives in the same database, so every batch and its
//! checkpoint commit together: at every sample the last position the
//! projection recorded equals the checkpoint (never behind it), and the
//! final projection equals a from-scratch rebuild, and the events' own
//! totals.
//!
//! Size: 2,000 events and 5 kills; 20,000 and 20 with `DROVER_FAULT_FULL=1`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use drover::events::NewEvent;
use drover_faults::procs::Proc;
use drover_faults::{projector, scale};
use rand::Rng;
use support::{Run, SCHEMA};
use uuid::Uuid;

const BIN: &str = env!("CARGO_BIN_EXE_drover-fault-projector");
const TOPICS: [&str; 3] = ["order_placed", "order_paid", "order_shipped"];
const BATCH: usize = 100;

fn spawn(run: &Run, n: usize) -> Proc {
    let args = vec![
        "--database-url".to_owned(),
        run.url.clone(),
        "--schema".into(),
        SCHEMA.into(),
        "--batch".into(),
        "50".into(),
        "--lease".into(),
        "1s".into(),
    ];
    Proc::spawn(
        std::path::Path::new(BIN),
        &args,
        &run.dir.path().join(format!("projector-{n}.log")),
    )
}

type Totals = BTreeMap<(Uuid, String), (i64, i64)>;

async fn totals(run: &Run, sql: &str) -> Totals {
    let rows: Vec<(Uuid, String, i64, i64)> = sqlx::query_as(sql)
        .fetch_all(run.pg_pool())
        .await
        .expect("totals");
    rows.into_iter()
        .map(|(t, topic, n, v)| ((t, topic), (n, v)))
        .collect()
}

async fn projection(run: &Run) -> Totals {
    totals(
        run,
        "SELECT tenant_id, topic, n, total FROM drover.fault_totals ORDER BY 1, 2",
    )
    .await
}

/// (checkpoint, last position in the projection) per tenant, read in one
/// statement (one snapshot). The cluster's login is a superuser, which row
/// level security does not restrict.
async fn sample(run: &Run) -> Vec<(Uuid, i64, i64)> {
    sqlx::query_as(
        "SELECT c.tenant_id, c.position, coalesce(l.position, 0) \
         FROM drover.projector_checkpoints c LEFT JOIN drover.fault_last l USING (tenant_id) \
         WHERE c.projector = 'fault_totals'",
    )
    .fetch_all(run.pg_pool())
    .await
    .expect("sample")
}

async fn caught_up(run: &Run, rebuilds: i32) -> bool {
    let behind: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM drover.event_heads h \
         LEFT JOIN drover.projector_checkpoints c ON c.tenant_id = h.tenant_id AND c.projector = 'fault_totals' \
         WHERE c.position IS DISTINCT FROM h.head OR c.rebuilds < $1 OR c.rebuild_requested",
    )
    .bind(rebuilds)
    .fetch_one(run.pg_pool())
    .await
    .expect("behind");
    behind == 0
}

async fn wait_caught_up(run: &Run, proc: &Proc, rebuilds: i32, ahead: &mut usize) {
    let end = Instant::now() + Duration::from_secs(scale::pick(60, 600));
    while !caught_up(run, rebuilds).await {
        let s = sample(run).await;
        *ahead += s.iter().filter(|(_, c, l)| c != l).count();
        if Instant::now() >= end {
            let log = proc.log_text();
            let tail: String = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
            panic!("the projector never caught up (checkpoints {s:?}); its log ends:\n{tail}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_projector_killed_while_applying_equals_a_rebuild() {
    let run = Run::pg().await;
    sqlx::raw_sql(&projector::setup_sql(SCHEMA))
        .execute(run.pg_pool())
        .await
        .expect("projection tables");
    let store = run.queue.store().clone();
    let events = scale::pick(2_000usize, 20_000);
    let kills = scale::pick(5usize, 20);
    let tenants = [Uuid::from_u128(0xA), Uuid::from_u128(0xB)];
    let gap_ms = 300u64;
    let span = Duration::from_millis(gap_ms * kills as u64);
    let mut spawned = 0;
    let mut proc = spawn(&run, spawned);
    spawned += 1;
    let started = Instant::now();
    let gap = || Duration::from_millis(rand::rng().random_range(gap_ms / 2..gap_ms * 3 / 2));
    let mut next_kill = started + gap();
    let (mut appended, mut killed, mut samples, mut ahead) = (0usize, 0usize, 0usize, 0usize);
    while killed < kills || appended < events {
        let paced = (events as f64 * (started.elapsed().as_secs_f64() / span.as_secs_f64())).ceil()
            as usize;
        if appended < paced.min(events) {
            let n = BATCH.min(events - appended);
            let batch: Vec<NewEvent> = (0..n)
                .map(|i| {
                    let k = appended + i;
                    NewEvent::new(TOPICS[k % TOPICS.len()], serde_json::json!({ "v": k }))
                        .in_tenant(tenants[k % tenants.len()])
                })
                .collect();
            store.event_append_many(&batch).await.expect("append");
            appended += n;
        }
        if killed < kills && Instant::now() >= next_kill {
            proc.kill9();
            killed += 1;
            proc = spawn(&run, spawned);
            spawned += 1;
            next_kill = Instant::now() + gap();
        }
        let s = sample(&run).await;
        samples += 1;
        ahead += s.iter().filter(|(_, c, l)| c != l).count();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_caught_up(&run, &proc, 0, &mut ahead).await;
    proc.kill9();
    let after_kills = projection(&run).await;
    let from_log = totals(
        &run,
        "SELECT tenant_id, topic, count(*), sum((payload->>'v')::bigint)::bigint \
         FROM drover.events GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .await;

    // A from-scratch rebuild by a fresh process.
    let flagged = store
        .projector_request_rebuild(projector::NAME, None)
        .await
        .expect("rebuild");
    assert_eq!(flagged, tenants.len() as u64);
    let mut proc = spawn(&run, spawned);
    wait_caught_up(&run, &proc, 1, &mut ahead).await;
    proc.kill9();
    let rebuilt = projection(&run).await;

    println!(
        "projector kill -9: {events} events, {killed} kills, {samples} samples, \
         checkpoint ahead of or behind the projection in {ahead} samples"
    );
    assert_eq!(ahead, 0, "the checkpoint and the projection always agree");
    assert_eq!(
        after_kills.values().map(|(n, _)| n).sum::<i64>(),
        events as i64
    );
    assert_eq!(after_kills, from_log, "every event applied exactly once");
    assert_eq!(
        after_kills, rebuilt,
        "the projection equals a from-scratch rebuild"
    );
}
