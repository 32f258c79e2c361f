//! The reference workers of `examples/` (Python: `worker-python/worker.py`
//! over the client openapi-python-client generates; TypeScript:
//! `worker-ts/worker.ts` over openapi-fetch and openapi-typescript's
//! types), generated and type-checked at test time (`mypy --strict`, `tsc
//! --strict`) and run against a real `drover serve` on SQLite and on
//! PostgreSQL.
//!
//! For each worker and backend: a lane of 200 `drover.noop` and 40
//! `drover.sleep` (300 ms) items and a worker token granted
//! `refw:drover.*`. A first worker process (capacity 4) is sent SIGTERM
//! while it holds items and the lane is not yet drained; it must exit 0
//! having drained first: no item left claimed, none failed (lost 0), every
//! completion it sent landed once (stale 0, its count equal to the done
//! rows), its row `offline`. A second one (capacity 20) then drains the
//! rest, and SIGTERM ends it idle the same way: every item done, with one
//! completion each across the two runs (duplicate completions 0).
//!
//! Every wait is on the database's rows, bounded so that a hung worker
//! fails the test instead of holding the suite. The Python tools come from
//! the conformance suite's venv and the npm ones from the example's own
//! lock file, installed when missing; a missing `python3` or `npm` fails
//! the test, never skips it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::clients::{generate_python_client, node_tools, python_tools, repo, run, serve};
use common::pg::FreshDb;
use drover::queue::Principal;
use drover::{NewItem, Queue, Status};
use drover_http::tokens::{TokenGrant, create};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

const LANE: &str = "refw";
const NOOPS: usize = 200;
const SLEEPS: usize = 40;
const TOTAL: i64 = (NOOPS + SLEEPS) as i64;

/// How long a wait on the rows or a process may take before the test calls
/// it hung: the runs take seconds, the bound measures nothing.
const BOUND: Duration = Duration::from_secs(120);

fn example(name: &str) -> PathBuf {
    repo().join("examples").join(name)
}

/// Generates the Python client beside the worker and type-checks both.
fn build_python() {
    let dir = example("worker-python");
    generate_python_client(&dir);
    run(
        Command::new(python_tools().join("mypy"))
            .args(["--strict", "worker.py", "generated/drover_client"])
            .env("MYPYPATH", "generated")
            .current_dir(&dir),
        "mypy --strict over the Python reference worker and its client",
    );
}

/// Generates the TypeScript types beside the worker and compiles both.
fn build_typescript() {
    let dir = example("worker-ts");
    let bin = node_tools(&dir, &["openapi-typescript", "tsc"]);
    for d in ["generated", "build"] {
        let _ = std::fs::remove_dir_all(dir.join(d));
    }
    run(
        Command::new(bin.join("openapi-typescript"))
            .arg(repo().join("crates/drover-http/openapi.json"))
            .args(["-o", "generated/schema.ts"])
            .current_dir(&dir),
        "openapi-typescript",
    );
    run(
        Command::new(bin.join("tsc"))
            .args(["-p", ".", "--strict"])
            .current_dir(&dir),
        "tsc --strict over the TypeScript reference worker",
    );
}

fn worker_command(worker: &str) -> Command {
    if worker == "python" {
        let mut c = Command::new(python_tools().join("python"));
        c.arg("worker.py")
            .env("PYTHONPATH", "generated")
            .current_dir(example("worker-python"));
        c
    } else {
        let mut c = Command::new("node");
        c.arg("build/worker.js").current_dir(example("worker-ts"));
        c
    }
}

/// The store as the test reads it, on a runtime of its own.
struct Rows {
    rt: tokio::runtime::Runtime,
    queue: Queue,
}

impl Rows {
    fn connect(url: &str) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let queue = rt.block_on(async {
            let q = Queue::connect(url).await.unwrap();
            q.migrate().await.unwrap();
            q
        });
        Rows { rt, queue }
    }

    fn count(&self, status: Status) -> i64 {
        self.rt
            .block_on(self.queue.counts_lane(LANE))
            .unwrap()
            .iter()
            .filter(|r| r.status == status)
            .map(|r| r.count)
            .sum()
    }

    /// Waits until `done` holds of the rows; panics after [`BOUND`].
    fn wait_for(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let start = Instant::now();
        while !done(self) {
            assert!(start.elapsed() < BOUND, "{what}: not within {BOUND:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn worker_state(&self, id: &str) -> String {
        let rows = self.rt.block_on(self.queue.workers()).unwrap();
        rows.into_iter()
            .find(|w| w.id == id)
            .unwrap_or_else(|| panic!("no workers row {id}"))
            .state
    }
}

/// Mints the worker token and enqueues the lane; answers the token.
fn prepare(rows: &Rows) -> String {
    rows.rt.block_on(async {
        let grant = TokenGrant {
            role: "worker".parse().unwrap(),
            tenant: None,
            enqueue: Vec::new(),
            label: "reference worker".into(),
            work: vec![format!("{LANE}:drover.*")],
        };
        let (secret, _) = create(&rows.queue, &grant).await.unwrap();
        let items = (0..SLEEPS)
            .map(|_| NewItem::new("drover.sleep", json!({ "ms": 300 })).with_lane(LANE))
            .chain(
                (0..NOOPS).map(|n| NewItem::new("drover.noop", json!({ "n": n })).with_lane(LANE)),
            )
            .collect();
        rows.queue
            .enqueue_many(&Principal::system(), items)
            .await
            .unwrap();
        secret.expose().to_owned()
    })
}

/// Sends SIGTERM to `child` and answers its totals line once it exited 0.
fn terminate(child: Child, what: &str) -> Value {
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    kill(pid, Signal::SIGTERM).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    let out = match rx.recv_timeout(BOUND) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = kill(pid, Signal::SIGKILL);
            panic!("{what} did not exit within {BOUND:?} of SIGTERM");
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} exited {}:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{what}: totals line {last:?}: {e}"))
}

fn spawn(worker: &str, base: &str, token: &str, capacity: u32) -> Child {
    worker_command(worker)
        .env("DROVER_URL", base)
        .env("DROVER_TOKEN", token)
        .env("DROVER_LANES", LANE)
        .env("DROVER_CAPACITY", capacity.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{worker}: cannot start: {e}"))
}

fn int(totals: &Value, field: &str) -> i64 {
    totals[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} in {totals}"))
}

/// One worker on one backend: the drain on SIGTERM mid-run, then the rest.
fn drain(worker: &'static str, backend: &'static str) {
    let what = format!("the {worker} reference worker on {backend}");
    let sqlite = tempfile::tempdir().unwrap();
    let pg = (backend == "postgres").then(|| FreshDb::new("drover_refworkers"));
    let url = match &pg {
        Some(db) => db.url.clone(),
        None => format!("sqlite://{}", sqlite.path().join("drover.db").display()),
    };
    let rows = Rows::connect(&url);
    let token = prepare(&rows);
    let server = serve(&url);

    // Mid-run: it holds items and the lane is not drained.
    let first = spawn(worker, &server.base, &token, 4);
    rows.wait_for(&format!("{what}: holds items"), |r| {
        r.count(Status::Claimed) > 0 && r.count(Status::Done) > 0
    });
    let totals = terminate(first, &what);
    let done = rows.count(Status::Done);
    assert!(done < TOTAL, "{what}: drained the lane before SIGTERM");
    assert_eq!(rows.count(Status::Claimed), 0, "{what}: left items claimed");
    assert_eq!(rows.count(Status::Failed), 0, "{what}: {totals}");
    assert_eq!(
        rows.count(Status::Pending) + done,
        TOTAL,
        "{what}: lost items"
    );
    assert_eq!(int(&totals, "completed"), done, "{what}: {totals}");
    assert_eq!(int(&totals, "stale"), 0, "{what}: {totals}");
    assert_eq!(int(&totals, "failed"), 0, "{what}: {totals}");
    let id = totals["worker_id"].as_str().unwrap();
    assert_eq!(rows.worker_state(id), "offline", "{what}: {id}");

    // The rest, then SIGTERM while idle.
    let second = spawn(worker, &server.base, &token, 20);
    rows.wait_for(&format!("{what}: drains the lane"), |r| {
        r.count(Status::Done) == TOTAL
    });
    let rest = terminate(second, &what);
    assert_eq!(int(&rest, "completed"), TOTAL - done, "{what}: {rest}");
    assert_eq!(int(&rest, "stale"), 0, "{what}: {rest}");
    assert_eq!(int(&rest, "failed"), 0, "{what}: {rest}");
    assert_eq!(int(&rest, "released"), 0, "{what}: {rest}");
    let id = rest["worker_id"].as_str().unwrap();
    assert_eq!(rows.worker_state(id), "offline", "{what}: {id}");
    for s in [Status::Pending, Status::Claimed, Status::Failed] {
        assert_eq!(rows.count(s), 0, "{what}: {s:?}");
    }
    eprintln!(
        "{what}: {} done before SIGTERM ({} released), {} after; stale 0, lost 0",
        done,
        int(&totals, "released"),
        TOTAL - done
    );
    drop(server);
}

#[test]
fn reference_workers_drain_a_lane_and_stop_drain_first_on_sqlite_and_postgres() {
    let python = std::thread::spawn(build_python);
    let typescript = std::thread::spawn(build_typescript);
    python
        .join()
        .expect("the Python reference worker generates and type-checks");
    typescript
        .join()
        .expect("the TypeScript reference worker generates and type-checks");

    let runs: Vec<_> = ["sqlite", "postgres"]
        .into_iter()
        .flat_map(|b| ["python", "typescript"].map(|w| (w, b)))
        .map(|(w, b)| std::thread::spawn(move || drain(w, b)))
        .collect();
    let failed: Vec<_> = runs.into_iter().filter_map(|h| h.join().err()).collect();
    assert!(
        failed.is_empty(),
        "{} runs failed (see above)",
        failed.len()
    );
}
