//! Dependencies and batches under kill -9 (PostgreSQL): a random DAG
//! (fan-out and fan-in) and batches drained by three workers, one of them
//! SIGKILLed at random moments and restarted. From the recorded history
//! (`starts`, `transitions`, both numbered by one sequence) the checker
//! counts dependants started before all their dependencies were done, and
//! batches whose callback was not enqueued exactly once. A second case
//! breaks the rule on purpose (a dependant made claimable by hand before
//! its dependency finished) and shows the checker catches it.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use drover::NewItem;
use drover::queue::{BatchSpec, Principal};
use drover_faults::{deps_checker, scale};
use rand::Rng;
use support::{Run, SCHEMA, report};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dag_and_batches_under_kill9_postgres() {
    let run = Run::pg().await;
    let nodes = scale::pick(400, 10_000);
    let batches = scale::pick(4, 100);
    let per_batch = scale::pick(50, 1_000);
    let kills = scale::pick(5, 30);
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
    for _ in 0..kills {
        let gap = rand::rng().random_range(300..900);
        tokio::time::sleep(Duration::from_millis(gap)).await;
        let victim = rand::rng().random_range(0..workers.len());
        workers[victim].kill9();
        workers[victim] = run.spawn(&FLAGS);
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
        "dependencies and batches under kill -9 (PostgreSQL)",
        &format!(
            "DAG of {nodes} (depth 20, fan-in 1-3), {batches} batches of {per_batch}, 3 workers x 20, {kills} kills"
        ),
        &format!(
            "{} | started before dependencies done {early} | callbacks not once {not_once} | {secs:.1}s",
            f.row()
        ),
    );
    assert!(drained, "not drained: {f:?}");
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
