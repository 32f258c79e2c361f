//! Scenario 4: the PostgreSQL server restarted (`pg_ctl restart -m
//! immediate`, every connection dies at once) several times during a drain,
//! on the test's own throwaway cluster.
//!
//! Expected: nothing lost, nothing completed twice, the same worker
//! processes reconnect on their own, the drain resumes within 30 s of the
//! server being ready, and the wake-up listener listens again: with a 5 s
//! poll interval, a single item enqueued after the last restart is picked
//! up well under the poll interval (a working `LISTEN`, not the poll).
//!
//! A cluster started without durable commits refuses an immediate restart
//! or stop: it would lose acknowledged commits, and the checkers would
//! count its losses as drover's (the rate scenario once read a done item
//! without its effect that way).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::time::{Duration, Instant};

use drover::NewItem;
use drover::queue::Principal;
use drover_faults::scale;
use support::{Run, report};

const POLL: Duration = Duration::from_secs(5);

/// Waits until the test's own pool answers again after a restart.
async fn db_ready(run: &Run) {
    let until = Instant::now() + Duration::from_secs(60);
    while sqlx::query("SELECT 1")
        .execute(run.pg_pool())
        .await
        .is_err()
    {
        assert!(Instant::now() < until, "the server never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn done_count(run: &Run) -> i64 {
    loop {
        let n = run.count_status("done").await;
        if n >= 0 {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_mid_drain_postgres() {
    let run = Run::pg_durable().await;
    let items = scale::pick(3_000, 20_000);
    let restarts = scale::pick(2, 3);
    run.enqueue("effects.write", items, 5, 25).await;
    let flags = [
        "--lease",
        "2s",
        "--sweep-interval",
        "1s",
        "--poll-interval",
        "5s",
        "--capacity",
        "20",
    ];
    let mut workers: Vec<_> = (0..3).map(|_| run.spawn(&flags)).collect();
    let pids: Vec<u32> = workers.iter().map(|w| w.pid()).collect();
    let mut resume_secs = Vec::new();
    let mut down_secs = Vec::new();
    for k in 0..restarts {
        // Restart when the drain has made its share of progress.
        let target = (items as i64) * (k as i64 + 1) / (restarts as i64 + 2);
        let until = Instant::now() + Duration::from_secs(300);
        while done_count(&run).await < target {
            assert!(
                Instant::now() < until,
                "the drain stalled before restart {k}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let t = Instant::now();
        run.cluster().restart_immediate().expect("restart");
        down_secs.push(t.elapsed().as_secs_f64());
        let ready = Instant::now();
        db_ready(&run).await;
        let before = done_count(&run).await;
        let until = ready + Duration::from_secs(60);
        while done_count(&run).await <= before {
            assert!(
                Instant::now() < until,
                "no completion within 60 s of restart {k}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        resume_secs.push(ready.elapsed().as_secs_f64());
    }
    let drained = run
        .wait_final(Duration::from_secs(scale::pick(180, 900)))
        .await;
    // The workers are the same processes: none exited, none was restarted.
    for w in &mut workers {
        assert!(
            w.exited().is_none(),
            "worker {} exited:\n{}",
            w.pid(),
            w.log_text()
        );
    }
    // Pickup latency: idle workers, one item at a time, with a 5 s poll.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut pickups = Vec::new();
    for _ in 0..3 {
        let item = NewItem::new(
            "effects.write",
            serde_json::json!({"op_id": format!("probe-{}", uuid::Uuid::new_v4().simple()), "ms": 0}),
        );
        let id = item.id;
        let t = Instant::now();
        run.queue
            .enqueue_many(&Principal::system(), vec![item])
            .await
            .expect("enqueue probe");
        let until = t + Duration::from_secs(30);
        loop {
            let st: Option<String> =
                sqlx::query_scalar("SELECT status FROM drover.items WHERE id = $1")
                    .bind(id)
                    .fetch_optional(run.pg_pool())
                    .await
                    .unwrap_or(None);
            if st.as_deref() == Some("done") {
                break;
            }
            assert!(Instant::now() < until, "probe never done");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        pickups.push(t.elapsed().as_secs_f64());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let f = run.figures().await;
    let worst_pickup = pickups.iter().copied().fold(0f64, f64::max);
    let worst_resume = resume_secs.iter().copied().fold(0f64, f64::max);
    report(
        "4 restart mid-drain (PostgreSQL)",
        &format!("{items} items, 3 workers x 20, {restarts} restarts, poll 5 s"),
        &format!(
            "{} | restart took {down_secs:.2?}s | drain resumed {resume_secs:.2?}s after ready | probe pickup {pickups:.3?}s | worker pids unchanged {pids:?}",
            f.row()
        ),
    );
    assert!(drained, "not drained: {f:?}");
    assert_eq!(f.enqueued, items as i64 + 3);
    f.assert_promises_kept();
    assert!(
        worst_resume <= 30.0,
        "drain resumed {worst_resume:.2}s after ready"
    );
    assert!(
        worst_pickup < 1.0,
        "pickup {worst_pickup:.3}s: the listener is not listening (poll is {POLL:?})"
    );
    for w in &mut workers {
        w.term();
    }
    for w in &mut workers {
        let _ = w.wait_for(Duration::from_secs(15));
    }
}

#[tokio::test]
async fn a_cluster_without_durable_commits_refuses_an_immediate_restart() {
    let cluster = tokio::task::spawn_blocking(drover::testing::cluster::Cluster::start)
        .await
        .unwrap()
        .expect("throwaway cluster");
    let restart = cluster.restart_immediate().unwrap_err();
    assert!(restart.to_string().contains("start_durable"), "{restart}");
    let stop = cluster.stop_immediate().unwrap_err();
    assert!(stop.to_string().contains("start_durable"), "{stop}");
    // Still up: neither went through.
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&cluster.url())
        .await
        .expect("the server is still up");
    sqlx::query("SELECT 1").execute(&mut conn).await.unwrap();
}
