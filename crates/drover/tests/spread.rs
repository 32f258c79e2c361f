//! Fair spread at light load: two idle workers share a trickle of items
//! instead of one taking every item (the rule: `worker::spread_delay`, the
//! least loaded worker claims first after a wake-up, ties broken at
//! random). Synchronised on the items' completions, one item at a time.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use drover::queue::{JobContext, Kind, Principal, Queue};
use drover::store::memory::MemoryStore;
use drover::worker::{Done, Handler, Outcome, Strategy, WorkerSettings};
use drover::{NewItem, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Drip {}

impl Kind for Drip {
    const NAME: &'static str = "test.drip";
}

/// Counts the items its worker ran and reports each completion.
#[derive(Clone)]
struct Tally {
    ran: Arc<AtomicUsize>,
    done: mpsc::UnboundedSender<()>,
}

impl Handler for Tally {
    type Job = Drip;
    const STRATEGY: Strategy = Strategy {
        idempotency: "test handler: no side effects",
        retry: "queue default",
        checkpoint: "none: one step, a rerun starts over",
        recovery: "swept after the lease",
    };
    async fn handle(&self, _cx: &JobContext, _job: Drip) -> Outcome {
        self.ran.fetch_add(1, Ordering::SeqCst);
        let _ = self.done.send(());
        Ok(Done::Completed)
    }
}

fn settings() -> WorkerSettings {
    WorkerSettings {
        capacity: 8,
        // Claims come from wake-ups, not from the poll.
        poll_interval: Duration::from_secs(5),
        metrics_addr: None,
        heartbeat_cron: None,
        ..WorkerSettings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_idle_workers_share_a_trickle() {
    const ITEMS: usize = 200;
    let q = Queue::new(Arc::new(MemoryStore::new()));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ran = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
    let mut workers = Vec::new();
    for r in &ran {
        let w = Worker::builder(q.clone())
            .settings(settings())
            .handler(Tally {
                ran: r.clone(),
                done: tx.clone(),
            })
            .build()
            .unwrap();
        workers.push(w.start().await.unwrap());
    }
    for _ in 0..ITEMS {
        q.enqueue_item(&Principal::system(), NewItem::new(Drip::NAME, json!({})))
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("the item ran")
            .unwrap();
    }
    for w in workers {
        w.shutdown().await;
    }
    let (a, b) = (ran[0].load(Ordering::SeqCst), ran[1].load(Ordering::SeqCst));
    eprintln!("split of {ITEMS} trickled items: {a} / {b}");
    assert_eq!(a + b, ITEMS);
    // Even odds per item: below 25 % for either would take a coin that
    // lands the same way far more often than chance (p < 1e-12).
    assert!(a.min(b) >= ITEMS / 4, "split {a} / {b}");
}
