//! Orchestrations under kill -9: a 5-step workflow (`effects.saga`) whose
//! one worker process is SIGKILLed at step boundaries (right after a step's
//! effect landed, before its transition commits) and inside steps (while a
//! step works), and restarted each time. Every orchestration completes with
//! each step's effect applied exactly once: the effect is keyed on the
//! record's version, and a step re-run after a kill runs at the same one.
//!
//! Reduced: 10 kills over 2 orchestrations; full (`DROVER_FAULT_FULL=1`):
//! 20 kills over 4.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::time::{Duration, Instant};

use drover::orchestration::{OrchestrationStatus, Start};
use drover_faults::scale;
use drover_faults::worker::{SAGA_STEPS, SagaState};
use support::{Db, Run, report};
use uuid::Uuid;

const STEP_MS: u64 = 300;

/// (effects written, step starts logged) so far.
async fn progress(run: &Run) -> (i64, i64) {
    match &run.db {
        Db::Pg { pool, .. } => {
            let e: i64 = sqlx::query_scalar("SELECT count(*) FROM drover.saga_effects")
                .fetch_one(pool)
                .await
                .unwrap();
            let s: i64 =
                sqlx::query_scalar("SELECT count(*) FROM drover.starts WHERE op_id LIKE '%:s%'")
                    .fetch_one(pool)
                    .await
                    .unwrap();
            (e, s)
        }
        Db::Sqlite { pool, .. } => {
            let e: i64 = sqlx::query_scalar("SELECT count(*) FROM saga_effects")
                .fetch_one(pool)
                .await
                .unwrap();
            let s: i64 = sqlx::query_scalar("SELECT count(*) FROM starts WHERE op_id LIKE '%:s%'")
                .fetch_one(pool)
                .await
                .unwrap();
            (e, s)
        }
    }
}

/// Each (step, version) row of one orchestration's effects.
async fn effects_of(run: &Run, id: Uuid) -> Vec<(String, i64)> {
    match &run.db {
        Db::Pg { pool, .. } => sqlx::query_as(
            "SELECT step, version FROM drover.saga_effects WHERE orchestration_id = $1 ORDER BY version",
        )
        .bind(id)
        .fetch_all(pool)
        .await
        .unwrap(),
        Db::Sqlite { pool, .. } => sqlx::query_as(
            "SELECT step, version FROM saga_effects WHERE orchestration_id = ?1 ORDER BY version",
        )
        .bind(id.as_bytes().to_vec())
        .fetch_all(pool)
        .await
        .unwrap(),
    }
}

/// Starts saga number `i` (its own idempotency key) and returns its id.
async fn start_saga(run: &Run, i: usize) -> Uuid {
    let start = Start {
        kind: "effects.saga".into(),
        tenant_id: Uuid::nil(),
        state: serde_json::to_value(SagaState { ms: STEP_MS }).unwrap(),
        first_step: SAGA_STEPS[0].into(),
        lane: "default".into(),
        max_attempts: 50,
        idempotency_key: Some(format!("saga-{i}")),
    };
    run.queue.start(&start).await.unwrap().record.id
}

async fn saga_under_kills(run: Run, backend: &str) {
    let kills = scale::pick(10, 20);
    let sagas = scale::pick(2, 4);
    let flags = [
        "--lease",
        "1s",
        "--sweep-interval",
        "500ms",
        "--poll-interval",
        "100ms",
        "--capacity",
        "4",
        "--retry-cap",
        "500ms",
    ];
    let mut worker = run.spawn(&flags);
    let mut ids = Vec::new();
    for i in 0..sagas {
        ids.push(start_saga(&run, i).await);
    }
    let mut log = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(scale::pick(120, 300));
    let (mut effects, mut starts) = progress(&run).await;
    let mut still_since = Instant::now();
    while log.len() < kills && Instant::now() < deadline {
        let (e, s) = progress(&run).await;
        if (e, s) != (effects, starts) {
            still_since = Instant::now();
        } else if still_since.elapsed() > Duration::from_secs(3) {
            // The sagas can all finish before the kills are done (a fast
            // restart leaves fewer steps to kill in): one more gives the
            // next kill a step to land in.
            ids.push(start_saga(&run, ids.len()).await);
            still_since = Instant::now();
        }
        // Alternate: a kill right after an effect landed (the step's
        // boundary: its transition not yet committed), then one while a
        // step works (half-way into its sleep).
        let boundary = log.len() % 2 == 0;
        if boundary && e > effects {
            worker.kill9();
            log.push("boundary");
            worker = run.spawn(&flags);
        } else if !boundary && s > starts {
            tokio::time::sleep(Duration::from_millis(STEP_MS / 2)).await;
            worker.kill9();
            log.push("inside");
            worker = run.spawn(&flags);
        }
        (effects, starts) = (e, s);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(
        log.len(),
        kills,
        "ran out of time before {kills} kills: {log:?}"
    );
    let end = Instant::now() + Duration::from_secs(scale::pick(120, 300));
    for id in &ids {
        loop {
            let r = run.queue.orchestration(Uuid::nil(), *id).await.unwrap();
            if r.status == OrchestrationStatus::Completed {
                break;
            }
            assert!(
                Instant::now() < end,
                "{id} never completed: {} at {} {:?}",
                r.status,
                r.step,
                r.history
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let (total_effects, total_starts) = progress(&run).await;
    for id in &ids {
        let got = effects_of(&run, *id).await;
        let steps: Vec<&str> = got.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(
            steps, SAGA_STEPS,
            "{id}: each step's effect exactly once, in order: {got:?}"
        );
        let r = run.queue.orchestration(Uuid::nil(), *id).await.unwrap();
        assert_eq!(r.version, 6, "five transitions");
        assert_eq!(r.history.len(), 5, "{:?}", r.history);
    }
    report(
        &format!("orchestrations under kill -9 ({backend})"),
        &format!(
            "{} x 5-step sagas, 1 worker, {kills} kills ({} at boundaries, {} inside steps)",
            ids.len(),
            log.iter().filter(|k| **k == "boundary").count(),
            log.iter().filter(|k| **k == "inside").count()
        ),
        &format!(
            "{total_starts} step starts, {total_effects} effects (each step once), {} re-runs absorbed",
            total_starts - total_effects
        ),
    );
    worker.term();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saga_kill9_postgres() {
    saga_under_kills(Run::pg().await, "PostgreSQL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saga_kill9_sqlite() {
    saga_under_kills(Run::sqlite().await, "SQLite").await;
}
