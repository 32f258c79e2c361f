//! A PostgreSQL outage (the server stopped for longer than the database
//! timeout, then started again) under an in-process worker draining a
//! backlog, on the test's own throwaway cluster.
//!
//! Expected: calls made during the outage fail within the configured
//! timeout (`ConnectOptions::db_timeout`, not the pool's 30 s default);
//! the claim loop and liveness log the outage once each, not per retry;
//! claims resume soon after the server is ready; no item is lost and none
//! is charged an attempt (every lease outlives the outage, and completions
//! retry past it).

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover::queue::{JobContext, Kind, Principal};
use drover::store::{ConnectOptions, connect_with};
use drover::testing::cluster::Cluster;
use drover::worker::{Done, Handler, Outcome, Strategy, WorkerSettings};
use drover::{NewItem, Queue, Worker};
use serde::{Deserialize, Serialize};

const DB_TIMEOUT: Duration = Duration::from_secs(2);
const OUTAGE: Duration = Duration::from_secs(6);
const ITEMS: usize = 600;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Nap {
    ms: u64,
}

impl Kind for Nap {
    const NAME: &'static str = "outage.nap";
}

/// Sleeps, touches no database: any attempt charged would be the queue's.
struct Napper;

impl Handler for Napper {
    type Job = Nap;
    const STRATEGY: Strategy = Strategy {
        idempotency: "no effects",
        retry: "default",
        recovery: "run again after the lease",
        checkpoint: "none: one short call, a rerun starts over",
    };

    async fn handle(&self, _cx: &JobContext, job: Nap) -> Outcome {
        tokio::time::sleep(Duration::from_millis(job.ms)).await;
        Ok(Done::Completed)
    }
}

/// The log lines of this process, to count how often an outage is logged.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn count(&self, needle: &str) -> usize {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .matches(needle)
            .count()
    }
}

async fn status_count(queue: &Queue, status: drover::Status) -> Option<i64> {
    let rows = queue.counts().await.ok()?;
    Some(
        rows.iter()
            .filter(|r| r.status == status)
            .map(|r| r.count)
            .sum(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_fails_fast_and_resumes_without_charging_attempts() {
    let logs = Captured::default();
    let writer = logs.clone();
    let _ = tracing_subscriber::fmt()
        .with_env_filter("drover=info")
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .try_init();

    let cluster = Cluster::start_durable().expect("throwaway cluster");
    let opts = ConnectOptions {
        pool_size: 8,
        db_timeout: DB_TIMEOUT,
        ..ConnectOptions::default()
    };
    let queue = Queue::new(connect_with(&cluster.url(), &opts).await.expect("connect"));
    queue.migrate().await.expect("migrate");
    let items: Vec<NewItem> = (0..ITEMS)
        .map(|_| NewItem::new(Nap::NAME, serde_json::json!({ "ms": 25 })))
        .collect();
    queue
        .enqueue_many(&Principal::system(), items)
        .await
        .expect("enqueue");

    // A lease far longer than the outage: an attempt charged would be the
    // outage's fault, not a lease that legitimately ran out.
    let settings = WorkerSettings {
        capacity: 4,
        lease: Duration::from_secs(60),
        renew_interval: Duration::from_secs(15),
        renew_timeout: Duration::from_secs(2),
        heartbeat_interval: Duration::from_millis(500),
        poll_interval: Duration::from_millis(500),
        sweep_interval: Duration::from_secs(1),
        metrics_addr: None,
        pool_size: 8,
        db_timeout: DB_TIMEOUT,
        // The test counts its own items; the heartbeat job would add one.
        heartbeat_cron: None,
        ..WorkerSettings::default()
    };
    let worker_queue = Queue::new(connect_with(&cluster.url(), &opts).await.expect("connect"));
    let worker = Worker::builder(worker_queue)
        .settings(settings)
        .handler(Napper)
        .build()
        .expect("worker")
        .start()
        .await
        .expect("start");

    let until = Instant::now() + Duration::from_secs(120);
    while status_count(&queue, drover::Status::Done)
        .await
        .unwrap_or(0)
        < (ITEMS / 5) as i64
    {
        assert!(Instant::now() < until, "the drain never got going");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    cluster.stop_immediate().expect("stop");
    let down = Instant::now();
    // Calls during the outage fail, each within the timeout (plus slack
    // for a loaded machine), instead of waiting the outage out.
    let mut call_secs = Vec::new();
    while down.elapsed() < OUTAGE {
        let t = Instant::now();
        let r = queue.counts().await;
        let took = t.elapsed();
        assert!(r.is_err(), "a call succeeded with the server down");
        assert!(
            r.as_ref().unwrap_err().is_transient(),
            "an outage is a transient error: {r:?}"
        );
        call_secs.push(took.as_secs_f64());
        assert!(
            took <= DB_TIMEOUT + Duration::from_millis(1500),
            "a call took {took:?} to fail (timeout {DB_TIMEOUT:?})"
        );
    }
    cluster.start_again().expect("start");
    let ready = Instant::now();
    // The first completion after the server is ready: claims (and
    // completions) resumed on their own.
    let before = loop {
        if let Some(n) = status_count(&queue, drover::Status::Done).await {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let until = ready + Duration::from_secs(30);
    let resumed = loop {
        let n = status_count(&queue, drover::Status::Done)
            .await
            .unwrap_or(0);
        if n > before {
            break ready.elapsed();
        }
        assert!(Instant::now() < until, "no completion within 30 s of ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    let until = Instant::now() + Duration::from_secs(120);
    while status_count(&queue, drover::Status::Done)
        .await
        .unwrap_or(0)
        < ITEMS as i64
    {
        assert!(Instant::now() < until, "not drained after the outage");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    worker.shutdown().await;

    let done = queue
        .list(&drover::store::ListFilter {
            limit: u32::try_from(ITEMS * 2).unwrap(),
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(done.len(), ITEMS, "none lost, none added");
    let charged: Vec<_> = done.iter().filter(|i| i.attempts != 0).collect();
    let claims_failed = logs.count("claim failed; retrying");
    let liveness_failed = logs.count("liveness publish failing");
    eprintln!(
        "outage {OUTAGE:?}: {} calls failed in {:.2?} s (timeout {DB_TIMEOUT:?}); first completion \
         {:.2} s after ready; {} items, {} charged an attempt; outage logged {claims_failed}x by \
         the claim loop, {liveness_failed}x by liveness",
        call_secs.len(),
        call_secs,
        resumed.as_secs_f64(),
        done.len(),
        charged.len()
    );
    assert!(
        done.iter().all(|i| i.status == drover::Status::Done),
        "every item done"
    );
    assert!(
        charged.is_empty(),
        "attempts charged for the outage: {charged:?}"
    );
    assert!(
        resumed <= Duration::from_secs(5),
        "claims resumed {resumed:?} after the server was ready"
    );
    assert!(
        claims_failed <= 1,
        "the claim loop logged the outage {claims_failed} times (once expected)"
    );
    assert!(
        liveness_failed <= 1,
        "liveness logged the outage {liveness_failed} times (once expected)"
    );
}
