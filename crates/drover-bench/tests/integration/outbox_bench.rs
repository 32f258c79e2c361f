//! `drover bench --outbox` end to end on PostgreSQL, at a small size: every
//! producer row relayed into one item, every latency row reaching its
//! handler, the projector phase applying every event, and the JSON report
//! carrying each figure. Speed is reported, never asserted.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use std::time::Duration;

use drover_bench::Progress;
use drover_bench::outbox::OutboxSpec;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_bench_reports_relay_latency_and_projector_figures() {
    let spec = OutboxSpec {
        rows: 300,
        producers: 4,
        relay_loops: 2,
        latency_rows: 20,
        relay_batch: 100,
        projector_events: 400,
        projector_batch: 100,
        timeout: Duration::from_secs(120),
    };
    let url = drover::testing::pg_url().await;
    let report = drover_bench::run_outbox(&url, &spec, &Progress::new(false))
        .await
        .expect("the outbox bench runs");
    assert_eq!(report.rows, 300);
    assert_eq!(report.relayed_items, 300, "one item per producer row");
    assert_eq!(
        report.commit_to_start.count, 20,
        "every latency row started"
    );
    let projector = report.projector.as_ref().expect("the projector phase ran");
    assert_eq!((projector.events, projector.batch), (400, 100));
    let json = serde_json::to_value(&report).unwrap();
    for field in ["relay_rows_per_sec", "commit_to_start", "projector"] {
        assert!(json.get(field).is_some(), "{field} missing from {json}");
    }
    assert!(json["projector"]["events_per_sec"].is_number());
    let mut table = Vec::new();
    report.write_table(&mut table).unwrap();
    let table = String::from_utf8(table).unwrap();
    assert!(table.contains("projector"), "{table}");
    println!("{table}");
}
