//! The outbox relay under faults: the relaying worker SIGKILLed while
//! producers commit (and roll back) outbox rows of mixed `work.*` and
//! `event.*` kinds, and a PostgreSQL restart mid-relay.
//!
//! Expected: every committed row relayed exactly once (its item exists
//! under the row's id, no item beyond them; each event appended once under
//! the row's id), no rolled-back row anywhere, no row parked, and after the
//! restart the same worker processes relay again without help.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use drover::outbox::{NewOutboxRow, OutboxStats};
use drover_faults::scale;
use rand::Rng;
use support::{Db, Run, SCHEMA, report};
use uuid::Uuid;

/// Rows each producer transaction writes.
const PER_TX: usize = 10;
/// One transaction in this many rolls back.
const ROLLBACK_EVERY: usize = 10;

/// The rows committed, by target.
#[derive(Default)]
struct Written {
    work: HashSet<Uuid>,
    events: HashSet<Uuid>,
    rolled_back: HashSet<Uuid>,
}

fn rows(tx_no: usize) -> Vec<NewOutboxRow> {
    (0..PER_TX)
        .map(|i| {
            if (tx_no + i).is_multiple_of(2) {
                NewOutboxRow::new(
                    "work.effects.write",
                    serde_json::json!({"op_id": format!("op-{}", Uuid::new_v4().simple()), "ms": 1}),
                )
            } else {
                NewOutboxRow::new("event.order_placed", serde_json::json!({"tx": tx_no, "i": i}))
            }
        })
        .collect()
}

/// One producer transaction: the rows, then commit or roll back.
async fn produce(run: &Run, tx_no: usize, w: &mut Written) {
    let batch = rows(tx_no);
    let commit = tx_no % ROLLBACK_EVERY != ROLLBACK_EVERY - 1;
    let result: drover::Result<()> = async {
        match &run.db {
            Db::Pg { pool, .. } => {
                let mut tx = pool.begin().await?;
                for r in &batch {
                    drover::store::postgres::outbox_insert_in(&mut tx, SCHEMA, r).await?;
                }
                if commit {
                    tx.commit().await?
                } else {
                    tx.rollback().await?
                }
            }
            Db::Sqlite { pool, .. } => {
                let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                for r in &batch {
                    drover::store::sqlite::outbox_insert_in(&mut tx, r, chrono::Utc::now()).await?;
                }
                if commit {
                    tx.commit().await?
                } else {
                    tx.rollback().await?
                }
            }
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) if commit => {
            for r in batch {
                if r.kind.starts_with("work.") {
                    w.work.insert(r.id);
                } else {
                    w.events.insert(r.id);
                }
            }
        }
        // Rolled back on purpose, or failed (the server restarting): either
        // way the rows were never committed.
        _ => w.rolled_back.extend(batch.iter().map(|r| r.id)),
    }
}

async fn stats(run: &Run) -> Option<OutboxStats> {
    run.queue.store().outbox_stats().await.ok()
}

/// Waits until no committed row is pending.
async fn wait_relayed(run: &Run, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if stats(run).await.is_some_and(|s| s.pending == 0) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Checks exactly-once: one item per committed work row and none beyond,
/// one event per committed event row, nothing of a rolled-back row.
async fn check(run: &Run, w: &Written) -> String {
    let store = run.queue.store();
    let items = store
        .item_list(&drover::store::ListFilter {
            tenant_id: Some(Uuid::nil()),
            kind: Some("effects.write".into()),
            limit: 1_000_000,
            ..Default::default()
        })
        .await
        .unwrap();
    let item_ids: HashSet<Uuid> = items.iter().map(|i| i.id).collect();
    let lost = w.work.difference(&item_ids).count();
    let extra = items.len() - w.work.intersection(&item_ids).count();
    assert_eq!(lost, 0, "items lost");
    assert_eq!(extra, 0, "items not of a committed row (or duplicated)");
    for it in &items {
        assert_eq!(
            it.idempotency_key.as_deref(),
            Some(it.id.to_string().as_str())
        );
    }
    let events = store
        .event_read(Uuid::nil(), 0, &[], 10_000_000)
        .await
        .unwrap();
    let event_ids: Vec<Uuid> = events.iter().map(|e| e.id).collect();
    let distinct: HashSet<Uuid> = event_ids.iter().copied().collect();
    assert_eq!(event_ids.len(), distinct.len(), "an event appended twice");
    assert_eq!(distinct, w.events, "events lost or extra");
    for id in &w.rolled_back {
        assert!(
            !item_ids.contains(id) && !distinct.contains(id),
            "rolled-back row {id} relayed"
        );
    }
    let s = stats(run).await.unwrap();
    assert_eq!(s.failed, 0, "rows parked: {s:?}");
    assert_eq!(s.pending, 0);
    format!(
        "committed {} work + {} event rows ({} rolled back): items {} (lost 0, duplicate 0), events {} (each once)",
        w.work.len(),
        w.events.len(),
        w.rolled_back.len(),
        items.len(),
        events.len()
    )
}

const FLAGS: [&str; 6] = [
    "--lease",
    "2s",
    "--sweep-interval",
    "1s",
    "--capacity",
    "20",
];

async fn relay_killed(run: Run, backend: &str) {
    let writes = scale::pick(2_000, 20_000);
    let kills = scale::pick(5, 20);
    let mut workers: Vec<_> = (0..2).map(|_| run.spawn(&FLAGS)).collect();
    let mut w = Written::default();
    let txs = writes / PER_TX;
    let kill_every = txs / (kills + 1);
    let mut killed = 0;
    let started = Instant::now();
    for t in 0..txs {
        produce(&run, t, &mut w).await;
        if killed < kills && t > 0 && t % kill_every == 0 {
            let victim = rand::rng().random_range(0..workers.len());
            workers[victim].kill9();
            killed += 1;
            workers[victim] = run.spawn(&FLAGS);
        }
    }
    let relayed = wait_relayed(&run, Duration::from_secs(scale::pick(120, 600))).await;
    assert!(relayed, "rows still pending: {:?}", stats(&run).await);
    let line = check(&run, &w).await;
    report(
        &format!("outbox relay kill -9 ({backend})"),
        &format!(
            "{writes} outbox writes in {txs} transactions, 2 relaying workers, {killed} kills"
        ),
        &format!("{line} | {:.1}s", started.elapsed().as_secs_f64()),
    );
    assert_eq!(killed, kills);
    assert!(
        run.wait_final(Duration::from_secs(scale::pick(120, 600)))
            .await
    );
    for p in &mut workers {
        p.term();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_killed_postgres() {
    relay_killed(Run::pg().await, "PostgreSQL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_killed_sqlite() {
    relay_killed(Run::sqlite().await, "SQLite").await;
}

/// The server restarted (`-m immediate`) while rows are being written and
/// relayed: the same worker processes relay every committed row afterwards.
///
/// Liveness, not speed: the restart leaves no relay claim behind (a run cut
/// off part-way rolls back whole, so no row waits out its lease), the first
/// row committed after the restart is relayed, and the backlog drains; the
/// delays are reported, bounded only by the "never resumed" limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_resumes_after_postgres_restart() {
    let run = Run::pg_durable().await;
    let writes = scale::pick(2_000, 20_000);
    let txs = writes / PER_TX;
    let mut workers: Vec<_> = (0..2).map(|_| run.spawn(&FLAGS)).collect();
    let pids: Vec<u32> = workers.iter().map(|p| p.pid()).collect();
    let mut w = Written::default();
    let (mut resume, mut drained, mut backlog) = (0.0, 0.0, 0);
    for t in 0..txs {
        if t == txs / 2 {
            run.cluster().restart_immediate().expect("restart");
            // The producer's own pool reconnects too; its failed
            // transactions count as never committed.
            let until = Instant::now() + Duration::from_secs(60);
            while sqlx::query("SELECT 1")
                .execute(run.pg_pool())
                .await
                .is_err()
            {
                assert!(Instant::now() < until, "the server never answered");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let t0 = Instant::now();
            // What the restart left: pending rows, none of them under a
            // claim (a committed claim on a pending row would wait out its
            // lease before any relay could take it).
            let left = run
                .queue
                .store()
                .outbox_list(&drover::outbox::OutboxFilter {
                    status: Some(drover::outbox::OutboxStatus::Pending),
                    limit: 1_000_000,
                    ..Default::default()
                })
                .await
                .expect("list pending rows");
            backlog = left.len();
            let held = left.iter().filter(|r| r.claim_token.is_some()).count();
            assert_eq!(held, 0, "the restart left {held} rows under a relay claim");
            // One committed row after the restart: the relay must take it.
            let probe = NewOutboxRow::new("event.order_placed", serde_json::json!({"probe": 1}));
            let probe_id = probe.id;
            let mut tx = run.pg_pool().begin().await.expect("begin");
            drover::store::postgres::outbox_insert_in(&mut tx, SCHEMA, &probe)
                .await
                .expect("probe row");
            tx.commit().await.expect("commit the probe row");
            w.events.insert(probe_id);
            loop {
                let row = run
                    .queue
                    .store()
                    .outbox_get(Uuid::nil(), probe_id)
                    .await
                    .ok()
                    .flatten();
                if row.is_some_and(|r| r.status == drover::outbox::OutboxStatus::Done) {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(60),
                    "the relay never resumed"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            resume = t0.elapsed().as_secs_f64();
            assert!(
                wait_relayed(&run, Duration::from_secs(60)).await,
                "the backlog left by the restart was never relayed"
            );
            drained = t0.elapsed().as_secs_f64();
        }
        produce(&run, t, &mut w).await;
    }
    assert!(wait_relayed(&run, Duration::from_secs(120)).await);
    for (p, pid) in workers.iter().zip(&pids) {
        assert_eq!(p.pid(), *pid, "a worker was replaced");
    }
    let line = check(&run, &w).await;
    report(
        "outbox relay PostgreSQL restart",
        &format!("{writes} outbox writes, 2 relaying workers, 1 immediate restart mid-relay"),
        &format!(
            "{line} | after the server answered: 0 rows under a claim, {backlog} pending; \
             the first row committed after the restart relayed in {resume:.2}s, \
             the backlog drained in {drained:.2}s"
        ),
    );
    for p in &mut workers {
        p.term();
    }
}
