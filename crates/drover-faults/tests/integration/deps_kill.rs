//! Dependencies and batches under kill -9 and a PostgreSQL restart: a
//! random DAG (fan-out and fan-in) and batches drained by three workers,
//! one of them SIGKILLed at random moments and restarted, and the server
//! itself restarted (`pg_ctl restart -m immediate`, every connection dies
//! at once) mid-drain on the test's own throwaway cluster, the workers
//! reconnecting on their own (they are the same processes across it).
//! The cluster keeps acknowledged commits (`synchronous_commit` on): a
//! history that loses a committed transition would not be a drover
//! fault. From the recorded history
//! (`starts`, `transitions`, both numbered by one sequence) the checker
//! counts dependants started before all their dependencies were done, and
//! batches whose callback was not enqueued exactly once. A second case
//! breaks the rule on purpose (a dependant made claimable by hand before
//! its dependency finished) and shows the checker catches it.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::time::{Duration, Instant};

use drover::NewItem;
use drover::queue::{BatchSpec, Principal};
use drover_faults::{deps_checker, scale};
use rand::Rng;
use support::{Run, SCHEMA, report};
use tokio::time::sleep;
use uuid::Uuid;

const FLAGS: [&str; 8] = [
    "--lease",
    "2s",
    "--sweep-interval",
    "1s",
    "--capacity",
    "20",
    "--retry-cap",
    "1s",
];

fn item(ms: u64) -> NewItem {
    let mut it = NewItem::new(
        "effects.write",
        serde_json::json!({"op_id": format!("op-{}", Uuid::new_v4().simple()), "ms": ms}),
    );
    it.max_attempts = 25;
    it
}

/// A random DAG of `n` items in layers of about `n / depth`: each item
/// past the first layer waits for one to three items of earlier layers.
fn random_dag(n: usize, depth: usize) -> Vec<NewItem> {
    let mut rng = rand::rng();
    let per = n.div_ceil(depth).max(1);
    let mut items: Vec<NewItem> = Vec::with_capacity(n);
    for i in 0..n {
        let mut it = item(rng.random_range(1..15));
        let layer_start = (i / per) * per;
        if layer_start > 0 {
            let fan_in = rng.random_range(1..=3usize).min(layer_start);
            let mut deps = Vec::new();
            while deps.len() < fan_in {
                let d = items[rng.random_range(0..layer_start)].id;
                if !deps.contains(&d) {
                    deps.push(d);
                }
            }
            it = it.with_after(deps);
        }
        items.push(it);
    }
    // Dependants first: the enqueue takes forward references.
    items.reverse();
    items
}

/// Waits until the test's own pool answers again after a restart.
async fn db_ready(run: &Run) {
    let until = Instant::now() + Duration::from_secs(60);
    while sqlx::query("SELECT 1")
        .execute(run.pg_pool())
        .await
        .is_err()
    {
        assert!(Instant::now() < until, "the server never answered");
        sleep(Duration::from_millis(100)).await;
    }
}

/// Items done so far (retried until the server answers).
async fn done_count(run: &Run) -> i64 {
    loop {
        let n = run.count_status("done").await;
        if n >= 0 {
            return n;
        }
        sleep(Duration::from_millis(100)).await;
    }
}

/// What the restarts did: how long each took, how many items were still
/// open when it struck, and how long after the server was ready the first
/// completion landed.
#[derive(Default)]
struct Restarts {
    took: Vec<f64>,
    open_at: Vec<i64>,
    resumed: Vec<f64>,
}

impl Restarts {
    /// Restarts the server once the drain has done `target` items (the
    /// caller's share of the total), while items are still open, then
    /// waits for the first completion after it.
    async fn restart_at(
        &mut self,
        run: &Run,
        target: i64,
        workers: &mut [drover_faults::procs::Proc],
    ) {
        let until = Instant::now() + Duration::from_secs(300);
        while done_count(run).await < target {
            assert!(Instant::now() < until, "the drain stalled before a restart");
            sleep(Duration::from_millis(50)).await;
        }
        let open = run.open_items().await;
        let t = Instant::now();
        run.cluster().restart_immediate().expect("restart");
        self.took.push(t.elapsed().as_secs_f64());
        self.open_at.push(open);
        let ready = Instant::now();
        db_ready(run).await;
        let before = done_count(run).await;
        while run.open_items().await > 0 && done_count(run).await <= before {
            assert!(
                ready.elapsed() < Duration::from_secs(60),
                "no completion within 60 s of a restart"
            );
            sleep(Duration::from_millis(50)).await;
        }
        self.resumed.push(ready.elapsed().as_secs_f64());
        // The workers reconnect on their own: none of them exited.
        for w in workers.iter_mut() {
            assert!(
                w.exited().is_none(),
                "worker {} exited over the restart:\n{}",
                w.pid(),
                w.log_text()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dag_and_batches_under_kill9_and_restart_postgres() {
    let run = Run::pg_durable().await;
    let nodes = scale::pick(400, 10_000);
    let batches = scale::pick(4, 100);
    let per_batch = scale::pick(50, 1_000);
    let kills = scale::pick(5, 30);
    let restarts = scale::pick(1usize, 2);
    let total = i64::try_from(nodes + batches * per_batch).expect("size");
    let system = Principal::system();

    run.queue
        .enqueue_dag(&system, random_dag(nodes, 20))
        .await
        .expect("DAG");
    let mut ids = Vec::new();
    for _ in 0..batches {
        let id = Uuid::now_v7();
        run.queue
            .batch_create(&system, BatchSpec::new(id, "drover.noop"))
            .await
            .expect("batch");
        let members: Vec<NewItem> = (0..per_batch).map(|_| item(2).with_batch(id)).collect();
        run.queue
            .enqueue_many(&system, members)
            .await
            .expect("members");
        run.queue.batch_seal(Uuid::nil(), id).await.expect("seal");
        ids.push(id);
    }

    let mut workers: Vec<_> = (0..3).map(|_| run.spawn(&FLAGS)).collect();
    let started = Instant::now();
    let mut rs = Restarts::default();
    // Restart k strikes when (k + 1) / (restarts + 2) of the items are done,
    // between kills: a restart lands among the kills, never after the drain.
    let due = |k: usize| total * (k as i64 + 1) / (restarts as i64 + 2);
    for _ in 0..kills {
        // The gap between kills, watched in steps so that a restart due
        // strikes within 50 ms of the drain reaching its share.
        let gap = Instant::now() + Duration::from_millis(rand::rng().random_range(300..900));
        while Instant::now() < gap {
            sleep(Duration::from_millis(50)).await;
            if rs.took.len() < restarts && done_count(&run).await >= due(rs.took.len()) {
                rs.restart_at(&run, due(rs.took.len()), &mut workers).await;
            }
        }
        let victim = rand::rng().random_range(0..workers.len());
        assert!(
            workers[victim].exited().is_none(),
            "worker {} exited on its own:\n{}",
            workers[victim].pid(),
            workers[victim].log_text()
        );
        workers[victim].kill9();
        workers[victim] = run.spawn(&FLAGS);
    }
    while rs.took.len() < restarts {
        rs.restart_at(&run, due(rs.took.len()), &mut workers).await;
    }
    let drained = run
        .wait_final(Duration::from_secs(scale::pick(180, 900)))
        .await;
    let secs = started.elapsed().as_secs_f64();
    let f = run.figures().await;
    let early = deps_checker::pg_started_early(run.pg_pool(), SCHEMA)
        .await
        .expect("check");
    let not_once = deps_checker::pg_callbacks_not_once(run.pg_pool(), SCHEMA)
        .await
        .expect("check");
    report(
        "dependencies and batches under kill -9 and a restart (PostgreSQL)",
        &format!(
            "DAG of {nodes} (depth 20, fan-in 1-3), {batches} batches of {per_batch}, 3 workers x 20, {kills} kills, {restarts} restarts"
        ),
        &format!(
            "{} | started before dependencies done {early} | callbacks not once {not_once} | restarts took {:.2?}s with {:?} items open, first completion {:.2?}s after ready | {secs:.1}s",
            f.row(),
            rs.took,
            rs.open_at,
            rs.resumed
        ),
    );
    assert!(drained, "not drained: {f:?}");
    for open in &rs.open_at {
        assert!(
            *open > 0,
            "a restart struck after the drain: {:?}",
            rs.open_at
        );
    }
    f.assert_promises_kept();
    assert_eq!(
        early, 0,
        "dependants started before their dependencies were done"
    );
    assert_eq!(not_once, 0, "batch callbacks enqueued other than once");
    for id in ids {
        let b = run.queue.batch(Uuid::nil(), id).await.expect("batch");
        assert!(b.fired, "{b:?}");
        assert_eq!(b.open(), 0, "{b:?}");
    }
    for w in &mut workers {
        w.term();
    }
}

/// The rule broken on purpose: a dependant made claimable by hand while its
/// dependency still runs. The checker must see the early start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checker_catches_a_broken_dependency_rule_postgres() {
    let run = Run::pg().await;
    let system = Principal::system();
    let slow = item(800);
    let dependant = item(1).with_after([slow.id]);
    run.queue
        .enqueue_dag(&system, vec![dependant.clone(), slow.clone()])
        .await
        .expect("DAG");
    // The broken release: ignores the open count.
    sqlx::query(&format!(
        "UPDATE \"{SCHEMA}\".items SET available_at = now() WHERE id = $1"
    ))
    .bind(dependant.id)
    .execute(run.pg_pool())
    .await
    .expect("break the rule");
    let w = run.spawn(&FLAGS);
    assert!(run.wait_final(Duration::from_secs(60)).await, "not drained");
    let early = deps_checker::pg_started_early(run.pg_pool(), SCHEMA)
        .await
        .expect("check");
    assert_eq!(early, 1, "the checker missed the early start");
    w.term();
}
