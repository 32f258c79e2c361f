//! The projector apply rate: how many events per second one
//! [`ProjectorRunner`] moves its checkpoint past on a store, for `drover
//! bench` to report beside the outbox figures.
//!
//! It appends `events` events to a tenant of its own (a fresh random UUID,
//! so it shares a sandbox with other phases without touching their rows),
//! then times the runner from checkpoint 0 until it has caught up with the
//! head. The projector writes nothing of its own, so the figure is what
//! drover itself costs per event (read, fenced checkpoint move, commit per
//! batch): the ceiling for a projection whose own writes are cheap.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use drover::Store;
use drover::events::{Event, NewEvent};
use drover::projector::{
    ProjectionTx, Projector, ProjectorConfig, ProjectorRunner, ProjectorStrategy,
};
use serde::Serialize;
use uuid::Uuid;

/// Events appended per call while filling the log.
const APPEND_BATCH: usize = 1_000;

/// What [`projector_apply_rate`] measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProjectorFigures {
    /// Events applied.
    pub events: u64,
    /// Events per batch (one transaction each).
    pub batch: u32,
    /// From the first pass to caught up.
    pub elapsed: Duration,
    /// `events / elapsed`.
    pub events_per_sec: f64,
}

struct Noop;

#[async_trait]
impl Projector for Noop {
    fn name(&self) -> &str {
        "drover_bench.noop_projector"
    }
    fn topics(&self) -> Vec<String> {
        vec![]
    }
    fn strategy(&self) -> ProjectorStrategy {
        ProjectorStrategy {
            idempotency: "writes nothing: a replay changes nothing",
            retry: ProjectorStrategy::RETRY_DEFAULT,
            checkpoint: "the store's checkpoint; nothing else to keep",
            recovery: ProjectorStrategy::RECOVERY_DEFAULT,
            rebuild: "nothing to reset",
            lag: "measured, not read",
        }
    }
    async fn apply(&self, _e: &Event, _tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        Ok(())
    }
    async fn reset(&self, _t: Uuid, _tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        Ok(())
    }
}

/// Appends `events` events to a fresh tenant of `store` and times one
/// runner applying them in batches of `batch`.
///
/// # Errors
/// Storage errors; [`drover::Error::Config`] for a `batch` of 0.
pub async fn projector_apply_rate(
    store: Arc<dyn Store>,
    events: u64,
    batch: u32,
) -> drover::Result<ProjectorFigures> {
    let tenant = Uuid::new_v4();
    let mut left = events as usize;
    while left > 0 {
        let n = left.min(APPEND_BATCH);
        let chunk: Vec<NewEvent> = (0..n)
            .map(|i| NewEvent::new("bench", serde_json::json!({ "n": i })).in_tenant(tenant))
            .collect();
        store.event_append_many(&chunk).await?;
        left -= n;
    }
    let runner = ProjectorRunner::new(
        store.clone(),
        Arc::new(Noop),
        ProjectorConfig {
            batch,
            // The loop below runs passes until the head; each pass takes
            // as many batches as a runner may.
            max_batches: drover::projector::PROJECTOR_MAX_BATCHES_MAX,
            ..ProjectorConfig::default()
        },
    )?;
    let head = store.event_head(tenant).await?.position;
    let started = Instant::now();
    loop {
        runner.run_once().await?;
        let done = store
            .projector_checkpoints(Some("drover_bench.noop_projector"))
            .await?
            .iter()
            .any(|r| r.tenant == tenant && r.position >= head);
        if done {
            break;
        }
    }
    let elapsed = started.elapsed();
    Ok(ProjectorFigures {
        events,
        batch,
        elapsed,
        events_per_sec: events as f64 / elapsed.as_secs_f64().max(1e-9),
    })
}
