//! The gap test (PostgreSQL): concurrent producers append while holding
//! their transaction open for a random 0–50 ms after taking their positions,
//! some rolling back; a projector follows the log the whole time and must
//! apply every committed event exactly once, in position order, and none of
//! the rolled-back ones.
//!
//! The same checker is shown to catch the trap: a naive log whose positions
//! come from a sequence taken before the hold, followed with `WHERE
//! position > checkpoint`, loses events under the same load (and, without
//! any randomness, in a two-transaction interleaving).
//!
//! Size: 2,000 committed events in `cargo test`; the 20,000 with
//! `DROVER_FAULT_FULL=1`. 16 producers either way.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state their expectations by panicking

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use drover::events::{Event, EventStore, NewEvent};
use drover::projector::{
    ProjectionTx, Projector, ProjectorConfig, ProjectorRunner, ProjectorStrategy,
};
use drover::store::Store;
use drover::store::postgres::event_append_in;
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_owner_url, pg_url};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgPool};
use uuid::Uuid;

const PRODUCERS: usize = 16;
const HOLD_MAX_MS: u64 = 50;
/// One transaction in this many rolls back.
const ROLLBACK_ONE_IN: u64 = 8;
/// Events per producer transaction: 1 ..= this.
const BATCH_MAX: u64 = 20;

fn full() -> bool {
    std::env::var("DROVER_FAULT_FULL").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn target() -> usize {
    if full() { 20_000 } else { 2_000 }
}

fn rand_below(n: u64) -> u64 {
    rand::random::<u64>() % n
}

/// What the producers did.
#[derive(Default)]
struct Ledger {
    committed: Mutex<HashSet<Uuid>>,
    rolled_back: Mutex<HashSet<Uuid>>,
    /// Committed events still to produce.
    left: AtomicUsize,
}

/// Exactly once, in position order, dense, nothing rolled back: `applied`
/// is (position, id) in the order the follower applied them.
fn check(ledger: &Ledger, applied: &[(i64, Uuid)]) -> Result<(), String> {
    let committed = ledger.committed.lock().unwrap();
    let rolled_back = ledger.rolled_back.lock().unwrap();
    let ids: Vec<Uuid> = applied.iter().map(|(_, id)| *id).collect();
    let distinct: HashSet<Uuid> = ids.iter().copied().collect();
    if distinct.len() != ids.len() {
        return Err(format!(
            "{} events applied more than once",
            ids.len() - distinct.len()
        ));
    }
    if let Some(id) = ids.iter().find(|id| rolled_back.contains(id)) {
        return Err(format!("rolled-back event {id} applied"));
    }
    let missing = committed.difference(&distinct).count();
    if missing > 0 {
        return Err(format!(
            "{missing} committed events never applied (of {})",
            committed.len()
        ));
    }
    if let Some(w) = applied.windows(2).find(|w| w[0].0 >= w[1].0) {
        return Err(format!(
            "applied out of position order: {} then {}",
            w[0].0, w[1].0
        ));
    }
    Ok(())
}

/// Writes each event into a table of the test schema, keyed by position and
/// by id (a second apply would fail the batch), numbering the applications.
struct GapProjector {
    insert: String,
}

#[async_trait]
impl Projector for GapProjector {
    fn name(&self) -> &str {
        "gap_check"
    }
    fn topics(&self) -> Vec<String> {
        vec![]
    }
    fn strategy(&self) -> ProjectorStrategy {
        ProjectorStrategy {
            idempotency: "never replayed: the row lands in the checkpoint's transaction",
            retry: ProjectorStrategy::RETRY_DEFAULT,
            checkpoint: "the checkpoint commits with the row, in the same database",
            recovery: ProjectorStrategy::RECOVERY_DEFAULT,
            rebuild: "not rebuilt in this test",
            lag: "the test waits until it is caught up",
        }
    }
    async fn apply(&self, e: &Event, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        let conn = tx.postgres().expect("a PostgreSQL store");
        sqlx::query(&self.insert)
            .bind(e.position)
            .bind(e.id)
            .execute(conn)
            .await?;
        Ok(())
    }
    async fn reset(&self, _tenant: Uuid, _tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        Ok(())
    }
}

async fn producer_pool() -> PgPool {
    PgPoolOptions::new()
        .max_connections(PRODUCERS as u32 + 2)
        .connect(&pg_owner_url().await)
        .await
        .expect("producer pool")
}

/// One producer: transactions of 1..=BATCH_MAX events through
/// `event_append_in`, each held open 0–50 ms after the append, one in
/// ROLLBACK_ONE_IN rolled back, until the ledger's budget is spent.
async fn produce(pool: PgPool, schema: String, tenant: Uuid, ledger: Arc<Ledger>) {
    loop {
        let want = 1 + rand_below(BATCH_MAX) as usize;
        let rollback = rand_below(ROLLBACK_ONE_IN) == 0;
        let n = if rollback {
            want
        } else {
            match ledger
                .left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| {
                    (l > 0).then(|| l - l.min(want))
                }) {
                Ok(l) => l.min(want),
                Err(_) => return,
            }
        };
        let events: Vec<NewEvent> = (0..n)
            .map(|i| NewEvent::new("gap", json!({ "i": i })).in_tenant(tenant))
            .collect();
        let mut tx = pool.begin().await.expect("begin");
        event_append_in(&mut tx, &schema, &events)
            .await
            .expect("append in");
        tokio::time::sleep(Duration::from_millis(rand_below(HOLD_MAX_MS + 1))).await;
        let ids = events.iter().map(|e| e.id);
        if rollback {
            tx.rollback().await.expect("rollback");
            ledger.rolled_back.lock().unwrap().extend(ids);
        } else {
            tx.commit().await.expect("commit");
            ledger.committed.lock().unwrap().extend(ids);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn projector_applies_every_committed_event_once_in_order() {
    let (store, schema) = pg_fresh_store().await;
    let tenant = Uuid::from_u128(0x6A9);
    let admin = pg_owner_url().await;
    let mut conn = sqlx::PgConnection::connect(&admin).await.expect("connect");
    sqlx::query(&format!(
        "CREATE TABLE \"{schema}\".gap_projection (seq bigserial PRIMARY KEY, \
         position bigint NOT NULL UNIQUE, id uuid NOT NULL UNIQUE)"
    ))
    .execute(&mut conn)
    .await
    .expect("projection table");
    let ledger = Arc::new(Ledger {
        left: AtomicUsize::new(target()),
        ..Ledger::default()
    });
    let pool = producer_pool().await;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|_| {
            tokio::spawn(produce(
                pool.clone(),
                schema.clone(),
                tenant,
                Arc::clone(&ledger),
            ))
        })
        .collect();
    let store_dyn: Arc<dyn Store> = store.clone();
    let runner = ProjectorRunner::new(
        store_dyn,
        Arc::new(GapProjector {
            insert: format!(
                "INSERT INTO \"{schema}\".gap_projection (position, id) VALUES ($1, $2)"
            ),
        }),
        ProjectorConfig {
            batch: 100,
            ..ProjectorConfig::default()
        },
    )
    .expect("runner");
    let done = Arc::new(AtomicBool::new(false));
    let follower = {
        let done = Arc::clone(&done);
        tokio::spawn(async move {
            let mut passes = 0u64;
            loop {
                let finished = done.load(Ordering::SeqCst);
                let r = runner.run_once().await.expect("pass");
                assert_eq!(r.failed, 0, "a batch failed: {r:?}");
                passes += 1;
                if finished && r.behind_events == 0 {
                    return passes;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    for p in producers {
        p.await.expect("producer");
    }
    done.store(true, Ordering::SeqCst);
    let passes = follower.await.expect("follower");
    let applied: Vec<(i64, Uuid)> = sqlx::query_as(&format!(
        "SELECT position, id FROM \"{schema}\".gap_projection ORDER BY seq"
    ))
    .fetch_all(&mut conn)
    .await
    .expect("projection");
    check(&ledger, &applied).unwrap_or_else(|e| panic!("{e}"));
    let n = target() as i64;
    assert_eq!(applied.len() as i64, n);
    assert_eq!(
        applied.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
        (1..=n).collect::<Vec<_>>(),
        "dense positions: a rolled-back append leaves no hole"
    );
    assert!(
        !ledger.rolled_back.lock().unwrap().is_empty(),
        "some rolled back"
    );
    assert!(passes > 1, "the projector followed while producers ran");
    let _ = conn.close().await;
    pool.close().await;
    drop(store);
    pg_drop_schema(&pg_url().await, &schema).await;
}

/// The same load and the same checker against a naive log: positions from a
/// sequence taken before the hold, read with `position > checkpoint`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn naive_sequence_reader_misses_events_under_the_same_load() {
    let (store, schema) = pg_fresh_store().await;
    let admin = pg_owner_url().await;
    let mut conn = sqlx::PgConnection::connect(&admin).await.expect("connect");
    sqlx::query(&format!(
        "CREATE TABLE \"{schema}\".naive_log (position bigserial PRIMARY KEY, id uuid NOT NULL)"
    ))
    .execute(&mut conn)
    .await
    .expect("naive table");
    let ledger = Arc::new(Ledger {
        left: AtomicUsize::new(target()),
        ..Ledger::default()
    });
    let pool = producer_pool().await;
    let insert = format!("INSERT INTO \"{schema}\".naive_log (id) SELECT unnest($1::uuid[])");
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|_| {
            let (pool, ledger, insert) = (pool.clone(), Arc::clone(&ledger), insert.clone());
            tokio::spawn(async move {
                loop {
                    let want = 1 + rand_below(BATCH_MAX) as usize;
                    let rollback = rand_below(ROLLBACK_ONE_IN) == 0;
                    let n = if rollback {
                        want
                    } else {
                        match ledger
                            .left
                            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| {
                                (l > 0).then(|| l - l.min(want))
                            }) {
                            Ok(l) => l.min(want),
                            Err(_) => return,
                        }
                    };
                    let ids: Vec<Uuid> = (0..n).map(|_| Uuid::now_v7()).collect();
                    let mut tx = pool.begin().await.expect("begin");
                    sqlx::query(&insert)
                        .bind(&ids)
                        .execute(&mut *tx)
                        .await
                        .expect("insert");
                    tokio::time::sleep(Duration::from_millis(rand_below(HOLD_MAX_MS + 1))).await;
                    if rollback {
                        tx.rollback().await.expect("rollback");
                        ledger.rolled_back.lock().unwrap().extend(ids);
                    } else {
                        tx.commit().await.expect("commit");
                        ledger.committed.lock().unwrap().extend(ids);
                    }
                }
            })
        })
        .collect();
    let read = format!(
        "SELECT position, id FROM \"{schema}\".naive_log WHERE position > $1 ORDER BY position LIMIT 100"
    );
    let done = Arc::new(AtomicBool::new(false));
    let follower = {
        let (done, pool, read) = (Arc::clone(&done), pool.clone(), read.clone());
        tokio::spawn(async move {
            let mut checkpoint = 0i64;
            let mut applied = Vec::new();
            loop {
                let finished = done.load(Ordering::SeqCst);
                let rows: Vec<(i64, Uuid)> = sqlx::query_as(&read)
                    .bind(checkpoint)
                    .fetch_all(&pool)
                    .await
                    .expect("read");
                if let Some((p, _)) = rows.last() {
                    checkpoint = *p;
                }
                let empty = rows.is_empty();
                applied.extend(rows);
                if finished && empty {
                    return applied;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    for p in producers {
        p.await.expect("producer");
    }
    done.store(true, Ordering::SeqCst);
    let applied = follower.await.expect("follower");
    let verdict = check(&ledger, &applied);
    let err = verdict.expect_err("the naive reader must lose events under this load");
    assert!(err.contains("never applied"), "{err}");
    let _ = conn.close().await;
    pool.close().await;
    drop(store);
    pg_drop_schema(&pg_url().await, &schema).await;
}

/// The trap without randomness: T1 takes position 1 and holds; T2 takes 2
/// and commits; the naive reader reads 2 and moves its checkpoint past 1;
/// T1 commits; 1 is never read. The event log under the same interleaving
/// hands T2 its position only after T1 ends, so its reader misses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_flight_position_trap_two_transactions() {
    let (store, schema) = pg_fresh_store().await;
    let admin = pg_owner_url().await;
    let pool = producer_pool().await;
    sqlx::query(&format!(
        "CREATE TABLE \"{schema}\".naive_log (position bigserial PRIMARY KEY, id uuid NOT NULL)"
    ))
    .execute(&pool)
    .await
    .expect("naive table");
    let insert = format!("INSERT INTO \"{schema}\".naive_log (id) VALUES ($1)");
    let read = format!(
        "SELECT position FROM \"{schema}\".naive_log WHERE position > $1 ORDER BY position"
    );
    let mut t1 = pool.begin().await.expect("t1");
    sqlx::query(&insert)
        .bind(Uuid::now_v7())
        .execute(&mut *t1)
        .await
        .expect("t1 insert");
    let mut t2 = pool.begin().await.expect("t2");
    sqlx::query(&insert)
        .bind(Uuid::now_v7())
        .execute(&mut *t2)
        .await
        .expect("t2 insert");
    t2.commit().await.expect("t2 commit");
    let seen: Vec<i64> = sqlx::query_scalar(&read)
        .bind(0i64)
        .fetch_all(&pool)
        .await
        .expect("read");
    assert_eq!(seen, vec![2], "the reader sees 2 while 1 is in flight");
    t1.commit().await.expect("t1 commit");
    let after: Vec<i64> = sqlx::query_scalar(&read)
        .bind(2i64)
        .fetch_all(&pool)
        .await
        .expect("read");
    assert!(
        after.is_empty(),
        "position 1 committed behind the checkpoint: lost to the naive reader"
    );

    // The event log: T2's append waits for T1's head lock, so it cannot
    // commit a later position while an earlier one is in flight.
    let tenant = Uuid::from_u128(0x7);
    let mut t1 = pool.begin().await.expect("t1");
    let p1 = event_append_in(
        &mut t1,
        &schema,
        &[NewEvent::new("trap", json!({})).in_tenant(tenant)],
    )
    .await
    .expect("t1 append")[0]
        .position();
    assert_eq!(p1, 1);
    let t2 = {
        let (pool, schema) = (pool.clone(), schema.clone());
        tokio::spawn(async move {
            let mut t2 = pool.begin().await.expect("t2");
            let p = event_append_in(
                &mut t2,
                &schema,
                &[NewEvent::new("trap", json!({})).in_tenant(tenant)],
            )
            .await
            .expect("t2 append")[0]
                .position();
            t2.commit().await.expect("t2 commit");
            p
        })
    };
    // Synchronise on the database: T2 is waiting on T1's lock.
    let mut watch = sqlx::PgConnection::connect(&admin).await.expect("watch");
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND datname = current_database() AND query LIKE '%FROM event_heads%FOR UPDATE%'",
        )
        .fetch_one(&mut watch)
        .await
        .expect("activity");
        if waiting > 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(
        store
            .event_read(tenant, 0, &[], 10)
            .await
            .expect("read")
            .is_empty(),
        "nothing committed yet: nothing to pass"
    );
    t1.commit().await.expect("t1 commit");
    assert_eq!(
        t2.await.expect("t2"),
        2,
        "T2 got the next position after T1 ended"
    );
    let got: BTreeSet<i64> = store
        .event_read(tenant, 0, &[], 10)
        .await
        .expect("read")
        .iter()
        .map(|e| e.position)
        .collect();
    assert_eq!(got, BTreeSet::from([1, 2]));
    let _ = watch.close().await;
    pool.close().await;
    drop(store);
    pg_drop_schema(&pg_url().await, &schema).await;
}
