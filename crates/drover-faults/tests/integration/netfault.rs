//! Scenario 5: connection faults between the workers and PostgreSQL,
//! through the TCP proxy (`proxy.rs`).
//!
//! 1. Cuts during a drain: every live connection cut at random moments, and
//!    a server reply dropped (its connection cut at the moment the reply
//!    would arrive: for an autocommit write, the COMMIT landed and its reply
//!    never came). Under load these hit claims, renewals, effect writes and
//!    completions; the worker logs show which steps saw the fault.
//! 2. A partition longer than the lease: worker A's traffic is black-holed
//!    (held, then delivered late) for three leases while worker B, connected
//!    directly, sweeps A's items and runs them. A starts nothing under a
//!    superseded claim, and its late writes change nothing.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use drover::testing::cluster::Cluster;
use drover_faults::proxy::Proxy;
use drover_faults::scale;
use rand::Rng;
use support::{Run, report};

const LEASE: Duration = Duration::from_secs(2);

async fn proxied() -> (Run, Proxy) {
    let cluster = Cluster::start().expect("throwaway cluster");
    let upstream: SocketAddr = format!("127.0.0.1:{}", cluster.port()).parse().unwrap();
    let proxy = Proxy::start(upstream).await.expect("proxy");
    let url = format!("postgres://postgres@{}/postgres", proxy.addr());
    (Run::pg_at(cluster, url).await, proxy)
}

fn count(logs: &str, needle: &str) -> usize {
    logs.lines().filter(|l| l.contains(needle)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cuts_mid_drain_postgres() {
    let (run, proxy) = proxied().await;
    let items = scale::pick(2_000, 10_000);
    run.enqueue("effects.write", items, 5, 25).await;
    let flags = [
        "--lease",
        "2s",
        "--sweep-interval",
        "1s",
        "--capacity",
        "20",
    ];
    let mut workers: Vec<_> = (0..3).map(|_| run.spawn(&flags)).collect();
    let (mut cuts, mut dropped) = (0, 0);
    let until = Instant::now() + Duration::from_secs(scale::pick(120, 600));
    while run.open_items().await > 0 && Instant::now() < until {
        let wait = rand::rng().random_range(100..400);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        if rand::rng().random_bool(0.3) {
            proxy.cut();
            cuts += 1;
        } else {
            proxy.drop_next_reply();
            dropped += 1;
        }
    }
    let drained = run.wait_final(Duration::from_secs(60)).await;
    let f = run.figures().await;
    let logs: String = workers.iter().map(|w| w.log_text()).collect();
    let steps = [
        ("claim", count(&logs, "claim failed")),
        (
            "renewal",
            count(&logs, "lease renewal failed") + count(&logs, "lease renewal timed out"),
        ),
        ("effect write", count(&logs, "effects write failed")),
        ("completion", count(&logs, "batched completion failed")),
        ("other outcome", count(&logs, "outcome not written")),
        (
            "completion reply lost, resolved",
            count(&logs, "completion reply was lost"),
        ),
        (
            "completion given up",
            count(&logs, "completion not written"),
        ),
        ("lease lost", count(&logs, "lease lost")),
    ];
    for w in &workers {
        assert!(
            !w.log_text().contains("fault worker failed"),
            "a worker died:\n{}",
            w.log_text()
        );
    }
    report(
        "5 connection cuts mid-drain (PostgreSQL)",
        &format!(
            "{items} items, 3 workers x 20, {cuts} cuts of every connection, {dropped} dropped replies"
        ),
        &format!(
            "{} | faults seen per step {steps:?} | connections opened {}",
            f.row(),
            proxy.connections()
        ),
    );
    assert!(drained, "not drained: {f:?}");
    f.assert_promises_kept();
    for w in &mut workers {
        assert!(w.exited().is_none(), "a worker exited:\n{}", w.log_text());
        w.term();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_longer_than_the_lease_postgres() {
    let (run, proxy) = proxied().await;
    let items = 40;
    run.enqueue("effects.write", items, 1_500, 25).await;
    let flags = [
        "--lease",
        "2s",
        "--sweep-interval",
        "1s",
        "--capacity",
        "10",
    ];
    let mut a = run.spawn(&flags);
    let pool = run.pg_pool().clone();
    let until = Instant::now() + Duration::from_secs(30);
    while run.starts().await < 10 {
        assert!(Instant::now() < until, "A never started 10 items");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.blackhole(true);
    let cut_at = chrono::Utc::now();
    // B bypasses the proxy: it sweeps A's items once their leases pass.
    let direct = run.cluster().url();
    let mut b = {
        let mut args = vec!["--database-url", direct.as_str(), "--schema", "drover"];
        args.extend_from_slice(&flags);
        drover_faults::procs::Proc::spawn(
            std::path::Path::new(support::BIN),
            &args.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
            &run.dir.path().join("b.log"),
        )
    };
    tokio::time::sleep(LEASE * 3).await;
    proxy.blackhole(false);
    let healed_at = chrono::Utc::now();
    let drained = run.wait_final(Duration::from_secs(60)).await;
    tokio::time::sleep(LEASE).await;
    let f = run.figures().await;
    let a_pid = i32::try_from(a.pid()).unwrap();
    let q = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .bind(a_pid)
                .fetch_one(&pool)
                .await
                .expect("query")
        }
    };
    // Starts by A under a claim already superseded when the start landed.
    let a_stale_starts = q(
        "SELECT count(*) FROM drover.starts s WHERE s.pid = $1 AND EXISTS (\
         SELECT 1 FROM drover.transitions t WHERE t.item_id = s.item_id \
         AND t.new_seq > s.fencing_token AND t.at < s.at)",
    )
    .await;
    let a_late_refused =
        q("SELECT count(*) FROM drover.effect_log WHERE pid = $1 AND NOT claim_ok").await;
    let a_late_changed = q("SELECT count(*) FROM drover.effect_log e WHERE pid = $1 AND changed AND EXISTS (\
         SELECT 1 FROM drover.starts s WHERE s.item_id = e.item_id AND s.fencing_token > e.fencing_token)")
    .await;
    let rescued: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM drover.transitions WHERE old_status = 'claimed' \
         AND new_status IN ('pending', 'failed') AND last_error = 'lease expired' AND at > $1",
    )
    .bind(cut_at)
    .fetch_one(&pool)
    .await
    .unwrap();
    let log = a.log_text();
    report(
        "5 partition longer than the lease (PostgreSQL)",
        "40 items x 1.5 s, A (capacity 10, via the proxy) black-holed 3 x lease, B direct",
        &format!(
            "{} | rescued by B's sweep {rescued} | A starts under a superseded claim {a_stale_starts} | A late effect writes refused {a_late_refused}, accepted {a_late_changed} | A lease-lost lines {} | healed {:.1}s after the cut",
            f.row(),
            count(&log, "lease lost"),
            (healed_at - cut_at).num_milliseconds() as f64 / 1000.0
        ),
    );
    assert!(drained, "not drained: {f:?}");
    f.assert_promises_kept();
    assert!(rescued >= 10, "B's sweep rescued A's items: {rescued}");
    assert_eq!(a_stale_starts, 0, "A started under a superseded claim");
    assert_eq!(a_late_changed, 0, "a late write of A's was accepted");
    assert!(a.exited().is_none(), "A died:\n{log}");
    a.term();
    b.term();
    let _ = a.wait_for(Duration::from_secs(15));
    let _ = b.wait_for(Duration::from_secs(15));
}
