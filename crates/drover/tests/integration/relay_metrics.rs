//! The relay's items count in `drover_enqueued_total` as a direct
//! enqueue's do, with the same lane and kind labels; a second relay of a
//! row (which meets its own item) counts nothing. The recorder is the
//! process's (`crate::recorder`), which under `cargo test` counts every
//! test's enqueues: the lane and kind here are this module's alone.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests state their expectations by panicking

use drover::Queue;
use drover::outbox::{Relay, RelayConfig};
use drover::queue::{Kind, Principal};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct SendReceipt {
    order: u64,
}

impl Kind for SendReceipt {
    const NAME: &'static str = "relay_metrics.send_receipt";
    const LANE: &'static str = "relay_metrics";
}

/// The value of the `drover_enqueued_total` series of `lane` and `kind`.
fn enqueued(text: &str, lane: &str, kind: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with("drover_enqueued_total{"))
        .filter(|l| l.contains(&format!("lane=\"{lane}\"")))
        .filter(|l| l.contains(&format!("kind=\"{kind}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn relayed_items_count_in_drover_enqueued_total() {
    let handle = crate::recorder::prometheus();
    let queue = Queue::memory();
    let relay = Relay::new(queue.clone(), RelayConfig::default()).unwrap();
    for order in 0..3 {
        let row = queue
            .outbox_work_row(&Principal::system(), &SendReceipt { order })
            .unwrap();
        queue.store().outbox_insert(&row).await.unwrap();
    }
    let r = relay.run_once().await.unwrap();
    assert_eq!(r.items_inserted, 3, "{r:?}");
    assert_eq!(
        enqueued(
            &handle.render(),
            "relay_metrics",
            "relay_metrics.send_receipt"
        ),
        3.0
    );
    // A direct enqueue counts in the same series.
    queue.enqueue(SendReceipt { order: 9 }).await.unwrap();
    assert_eq!(
        enqueued(
            &handle.render(),
            "relay_metrics",
            "relay_metrics.send_receipt"
        ),
        4.0
    );
    assert_eq!(relay.run_once().await.unwrap().claimed, 0);
    assert_eq!(
        enqueued(
            &handle.render(),
            "relay_metrics",
            "relay_metrics.send_receipt"
        ),
        4.0
    );
}
