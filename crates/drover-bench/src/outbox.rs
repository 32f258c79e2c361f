//! `drover bench --outbox`: the producer → outbox → relay → handler path on
//! PostgreSQL, in a sandbox schema of its own.
//!
//! Three phases:
//!
//! 1. **Producers**: `producers` concurrent tasks commit `rows`
//!    transactions, each writing one business row (`bench_orders`) and one
//!    `work.<kind>` outbox row in the same transaction; no relay runs.
//! 2. **Relay**: relays (the worker's own service, `relay_loops` loops)
//!    start over that backlog; the clock stops when no row is pending.
//!    `relay rows/s = rows / wall time`. The relayed items wait in a lane
//!    no worker drains.
//! 3. **Latency**: a worker (with its relay, as deployed) idles 2 s, then a
//!    producer commits `latency_rows` such transactions 5 ms apart; the
//!    handler records the time from the producer's commit to its start.
//! 4. **Projector apply rate**: [`crate::projector_apply_rate`] appends
//!    `projector_events` events to a tenant of its own and times one runner
//!    applying them in batches of `projector_batch` (0 events skips it).
//!
//! Invariant: every phase counts its own rows only and the sandbox is
//! dropped whether the run succeeded or not.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover::outbox::{Relay, RelayConfig};
use drover::queue::{JobContext, Kind, Principal};
use drover::worker::{Done, Handler, Outcome, Strategy};
use drover::{Queue, Worker};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::report::Percentiles;
use crate::target::Target;
use crate::{BenchError, IDLE_BEFORE_LATENCY, LATENCY_SPACING, Progress};

/// `--outbox-rows`: producer transactions of the relay phase.
pub const OUTBOX_ROWS_DEFAULT: u64 = 20_000;
/// Concurrent producer tasks.
pub const PRODUCERS_DEFAULT: usize = 8;
/// Relay loops over the backlog.
pub const RELAY_LOOPS_DEFAULT: usize = 4;
/// `--projector-events`: events the projector phase applies.
pub const PROJECTOR_EVENTS_DEFAULT: u64 = 20_000;
/// `--projector-batch`: events per projector batch (one transaction each).
pub const PROJECTOR_BATCH_DEFAULT: u32 = 500;

/// What the outbox bench is told.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxSpec {
    /// Producer transactions of the relay phase.
    pub rows: u64,
    /// Concurrent producers.
    pub producers: usize,
    /// Relay loops running over the backlog.
    pub relay_loops: usize,
    /// Transactions of the latency phase, 5 ms apart.
    pub latency_rows: u64,
    /// Rows per relay claim.
    pub relay_batch: u32,
    /// Events the projector phase applies (0 skips the phase).
    pub projector_events: u64,
    /// Events per projector batch.
    pub projector_batch: u32,
    /// The longest a phase may wait.
    pub timeout: Duration,
}

/// What the outbox bench found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutboxReport {
    /// The database, without credentials.
    pub target: String,
    /// Producer transactions committed in phase 1.
    pub rows: u64,
    /// Producer transactions (business row + outbox row) per second.
    pub producer_tx_per_sec: f64,
    /// Rows relayed per second in phase 2.
    pub relay_rows_per_sec: f64,
    /// Items the relay inserted in phase 2 (equal to `rows` when clean).
    pub relayed_items: i64,
    /// Outbox commit → handler start, ms.
    pub commit_to_start: Percentiles,
    /// The projector apply rate, when the phase ran.
    pub projector: Option<crate::ProjectorFigures>,
}

impl OutboxReport {
    /// Writes the figures as a table.
    ///
    /// # Errors
    /// Write errors.
    pub fn write_table(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        writeln!(out, "outbox bench on {}", self.target)?;
        writeln!(
            out,
            "producers   {} tx (business row + outbox row)  {:.0} tx/s",
            self.rows, self.producer_tx_per_sec
        )?;
        writeln!(
            out,
            "relay       {:.0} rows/s  ({} items relayed)",
            self.relay_rows_per_sec, self.relayed_items
        )?;
        let p = &self.commit_to_start;
        writeln!(
            out,
            "commit → handler start  p50 {:.2} ms  p95 {:.2} ms  p99 {:.2} ms  max {:.2} ms  ({} rows)",
            p.p50, p.p95, p.p99, p.max, p.count
        )?;
        if let Some(f) = &self.projector {
            writeln!(
                out,
                "projector   {:.0} events/s  ({} events, batches of {}, {:.2} s)",
                f.events_per_sec,
                f.events,
                f.batch,
                f.elapsed.as_secs_f64()
            )?;
        }
        Ok(())
    }
}

/// The relay phase's kind: relayed into a lane no worker drains.
#[derive(Debug, Serialize, Deserialize)]
struct Parked {
    n: u64,
}
impl Kind for Parked {
    const NAME: &'static str = "drover_bench.outbox_parked";
    const LANE: &'static str = "outbox_bench_parked";
}

/// The latency phase's kind.
#[derive(Debug, Serialize, Deserialize)]
struct Timed {
    n: u64,
}
impl Kind for Timed {
    const NAME: &'static str = "drover_bench.outbox_timed";
}

type Commits = Arc<Mutex<HashMap<Uuid, Instant>>>;

struct TimedHandler {
    commits: Commits,
    samples: Arc<Mutex<Vec<f64>>>,
}

impl Handler for TimedHandler {
    type Job = Timed;
    const STRATEGY: Strategy = Strategy {
        idempotency: "records one latency sample per item id; a rerun adds nothing",
        retry: "never fails",
        checkpoint: "none: one step",
        recovery: "a benchmark run is thrown away with its sandbox",
    };

    async fn handle(&self, cx: &JobContext, _job: Timed) -> Outcome {
        let now = Instant::now();
        let t = self
            .commits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&cx.id());
        if let Some(t) = t {
            self.samples
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(now.duration_since(t).as_secs_f64() * 1000.0);
        }
        Ok(Done::Completed)
    }
}

/// One producer transaction: a business row and an outbox row for `job`.
async fn produce<K: Kind>(queue: &Queue, pool: &sqlx::PgPool, job: &K) -> Result<Uuid, BenchError> {
    let mut tx = pool.begin().await?;
    sqlx::query("INSERT INTO bench_orders (id, placed_at) VALUES ($1, now())")
        .bind(Uuid::now_v7())
        .execute(&mut *tx)
        .await?;
    let id = queue
        .outbox_work_in(&mut *tx, &Principal::system(), job)
        .await?;
    tx.commit().await?;
    Ok(id)
}

async fn pending(queue: &Queue) -> Result<i64, BenchError> {
    Ok(queue.store().outbox_stats().await?.pending)
}

/// Runs the outbox bench against `target` (PostgreSQL).
///
/// # Errors
/// [`BenchError::Incomplete`] when a phase does not finish within the
/// timeout; database errors.
pub(crate) async fn run(
    spec: &OutboxSpec,
    target: &Target,
    progress: &Progress,
) -> Result<OutboxReport, BenchError> {
    let admin = target.admin()?.clone();
    sqlx::query("CREATE TABLE bench_orders (id uuid PRIMARY KEY, placed_at timestamptz NOT NULL)")
        .execute(&admin)
        .await?;
    let producers = spec.producers.max(1);
    let queue = target
        .queue(u32::try_from(producers + 4).unwrap_or(16))
        .await?;
    let pool = producer_pool(&queue, target, producers).await?;

    // 1. Producers, no relay.
    progress.note("outbox producers");
    let producer_secs = produce_backlog(spec, &queue, &pool, producers).await?;

    // 2. Relay over the backlog.
    progress.note("outbox relay");
    let relay_secs = relay_backlog(spec, &queue).await?;
    let relayed_items: i64 =
        sqlx::query_scalar("SELECT count(*) FROM items WHERE kind = 'drover_bench.outbox_parked'")
            .fetch_one(&admin)
            .await?;

    // 3. Latency through a worker with its relay.
    progress.note("outbox latency");
    let samples = commit_to_start(spec, target, &queue, &pool).await?;

    // 4. Projector apply rate, on the same sandbox (a tenant of its own).
    let projector = if spec.projector_events > 0 {
        progress.note("projector apply rate");
        Some(
            crate::projector_apply_rate(
                queue.store().clone(),
                spec.projector_events,
                spec.projector_batch,
            )
            .await?,
        )
    } else {
        None
    };
    Ok(OutboxReport {
        target: target.describe(),
        rows: spec.rows,
        producer_tx_per_sec: spec.rows as f64 / producer_secs,
        relay_rows_per_sec: spec.rows as f64 / relay_secs,
        relayed_items,
        commit_to_start: Percentiles::of(samples),
        projector,
    })
}

/// The producers' own pool on the sandbox schema: their transactions write
/// the business table beside the outbox, so they need its `search_path`.
async fn producer_pool(
    queue: &Queue,
    target: &Target,
    producers: usize,
) -> Result<sqlx::PgPool, BenchError> {
    match queue.store().pg_schema() {
        Some(schema) => Ok(sqlx::postgres::PgPoolOptions::new()
            .max_connections(u32::try_from(producers).unwrap_or(8))
            .connect_with(
                target
                    .url()
                    .parse::<sqlx::postgres::PgConnectOptions>()?
                    .options([("search_path", schema)]),
            )
            .await?),
        None => {
            Err(drover::Error::invalid("database_url", "the outbox bench needs PostgreSQL").into())
        }
    }
}

/// Phase 1: `producers` tasks commit `spec.rows` producer transactions
/// between them, no relay running; answers the wall time, s.
async fn produce_backlog(
    spec: &OutboxSpec,
    queue: &Queue,
    pool: &sqlx::PgPool,
    producers: usize,
) -> Result<f64, BenchError> {
    let started = Instant::now();
    let per = spec.rows / producers as u64;
    let mut tasks = Vec::new();
    for p in 0..producers as u64 {
        let (queue, pool) = (queue.clone(), pool.clone());
        let n = if p == producers as u64 - 1 {
            spec.rows - per * p
        } else {
            per
        };
        tasks.push(tokio::spawn(async move {
            for i in 0..n {
                produce(&queue, &pool, &Parked { n: p * per + i }).await?;
            }
            Ok::<_, BenchError>(())
        }));
    }
    for t in tasks {
        t.await
            .map_err(|e| BenchError::Incomplete(format!("a producer panicked: {e}")))??;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Phase 2: relays over the backlog until no row is pending; answers the
/// wall time, s.
async fn relay_backlog(spec: &OutboxSpec, queue: &Queue) -> Result<f64, BenchError> {
    let relay = Relay::new(
        queue.clone(),
        RelayConfig {
            batch: spec.relay_batch,
            concurrency: spec.relay_loops.max(1),
            ..RelayConfig::default()
        },
    )?;
    let stop = tokio_util::sync::CancellationToken::new();
    let started = Instant::now();
    let running = {
        let stop = stop.clone();
        tokio::spawn(async move { relay.run(stop).await })
    };
    let deadline = started + spec.timeout;
    while pending(queue).await? > 0 {
        if Instant::now() > deadline {
            stop.cancel();
            return Err(BenchError::Incomplete(
                "the relay did not drain the outbox in time".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let relay_secs = started.elapsed().as_secs_f64();
    stop.cancel();
    let _ = running.await;
    Ok(relay_secs)
}

/// Phase 3: a worker (with its relay) idles, then `spec.latency_rows`
/// producer transactions commit [`LATENCY_SPACING`] apart; answers each
/// one's commit → handler start, ms.
async fn commit_to_start(
    spec: &OutboxSpec,
    target: &Target,
    queue: &Queue,
    pool: &sqlx::PgPool,
) -> Result<Vec<f64>, BenchError> {
    let commits: Commits = Arc::new(Mutex::new(HashMap::new()));
    let samples = Arc::new(Mutex::new(Vec::new()));
    let settings = crate::workers::settings(20);
    let wq = target.queue(settings.pool_size + 4).await?;
    let worker = Worker::builder(wq)
        .settings(settings)
        .handler(TimedHandler {
            commits: commits.clone(),
            samples: samples.clone(),
        })
        .build()?
        .start()
        .await?;
    tokio::time::sleep(IDLE_BEFORE_LATENCY).await;
    let mut next = Instant::now();
    for n in 0..spec.latency_rows {
        tokio::time::sleep_until(tokio::time::Instant::from_std(next)).await;
        next += LATENCY_SPACING;
        let mut tx = pool.begin().await?;
        sqlx::query("INSERT INTO bench_orders (id, placed_at) VALUES ($1, now())")
            .bind(Uuid::now_v7())
            .execute(&mut *tx)
            .await?;
        let who = Principal::system();
        let row = queue.outbox_work_row(&who, &Timed { n })?;
        queue.outbox_write_in(&mut *tx, &who, &row).await?;
        // Stamped before the commit (so a handler that starts before this
        // task resumes still finds a stamp, an earlier and so a
        // conservative one), then restamped right after the commit returns.
        commits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(row.id, Instant::now());
        tx.commit().await?;
        if let Some(t) = commits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&row.id)
        {
            *t = Instant::now();
        }
    }
    let deadline = Instant::now() + spec.timeout;
    loop {
        let got = samples.lock().unwrap_or_else(|p| p.into_inner()).len() as u64;
        if got >= spec.latency_rows {
            break;
        }
        if Instant::now() > deadline {
            worker.shutdown().await;
            return Err(BenchError::Incomplete(format!(
                "only {got} of {} latency rows reached their handler",
                spec.latency_rows
            )));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    worker.shutdown().await;
    let samples = std::mem::take(&mut *samples.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(samples)
}
