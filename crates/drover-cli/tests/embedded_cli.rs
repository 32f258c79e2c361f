//! The CLI embedded in a service's own binary (`drover_cli::run_with`):
//! the service's handlers hold its state (`drover::register!(state: …)`),
//! the closure given to `run_with` captures that state, and every command
//! that builds a worker sees the service's handlers, schedules and
//! projectors. In its own test binary, so the registration reaches no other
//! test's worker.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use drover::Queue;
use drover::periodic::Schedule;
use drover::queue::{JobContext, Kind};
use drover::store::ListFilter;
use drover::worker::{Done, Handler, Outcome, Strategy, WorkerBuilder};

/// The service's state: what its handler writes to (its pool, in a real
/// service).
#[derive(Clone, Default)]
struct Db(Arc<Mutex<Vec<String>>>);

mod reports {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    pub struct NightlyReport {}
    impl Kind for NightlyReport {
        const NAME: &'static str = "report.nightly";
    }

    pub struct Reporter {
        pub db: Db,
    }
    impl Handler for Reporter {
        type Job = NightlyReport;
        const STRATEGY: Strategy = Strategy {
            idempotency: "the report row is keyed by its day",
            retry: "default backoff",
            checkpoint: "none: one query, a rerun starts over",
            recovery: "a crashed run is swept and run again",
        };
        async fn handle(&self, _cx: &JobContext, _job: NightlyReport) -> Outcome {
            self.db.0.lock().unwrap().push("report".into());
            Ok(Done::Completed)
        }
    }

    fn setup(b: WorkerBuilder, db: &Db) -> WorkerBuilder {
        b.handler(Reporter { db: db.clone() }).schedule(
            Schedule::new("nightly-report", "30 2 * * *", NightlyReport {}).zone("Europe/Berlin"),
        )
    }

    drover::register!(state: setup);
}

fn sqlite_url(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}", dir.path().join("svc.db").display())
}

async fn service_cli(args: &[&str], db: Option<Db>) -> ExitCode {
    let args: Vec<String> = std::iter::once("my-service")
        .chain(args.iter().copied())
        .map(str::to_owned)
        .collect();
    match db {
        // The service's main: the closure captures its state.
        Some(db) => drover_cli::run_with(args, move |b| b.state(db.clone())).await,
        None => drover_cli::run_with(args, |b| b).await,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_a_closure_capturing_state_triggers_the_services_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(&dir);
    let db = Db::default();
    assert_eq!(
        service_cli(&["--database-url", &url, "migrate"], Some(db.clone())).await,
        ExitCode::SUCCESS
    );
    assert_eq!(
        service_cli(
            &[
                "--database-url",
                &url,
                "schedules",
                "trigger",
                "nightly-report"
            ],
            Some(db.clone())
        )
        .await,
        ExitCode::SUCCESS
    );
    let queue = Queue::connect(&url).await.unwrap();
    let items = queue
        .list(&ListFilter {
            kind: Some("report.nightly".into()),
            limit: 100,
            ..ListFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(items.len(), 1, "the trigger enqueued one report");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_no_state_for_a_setup_that_needs_it_fails_naming_the_type() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(&dir);
    assert_eq!(
        service_cli(&["--database-url", &url, "handlers"], None).await,
        ExitCode::from(drover_cli::EXIT_FAILURE)
    );
}

/// `drover <args>` in process, as the service's binary runs it: the
/// closure gives the builder the service's state.
fn embedded(queue: &Queue, db: &Db, args: &[&str]) -> (u8, String, String) {
    use clap::Parser;
    let cli =
        drover_cli::Cli::try_parse_from(std::iter::once("my-service").chain(args.iter().copied()))
            .expect("parse");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let db = db.clone();
    let code = {
        let mut cx = drover_cli::Context::with_queue(queue.clone(), &mut out, &mut err)
            .with_worker_setup(move |b| b.state(db.clone()));
        let rt = tokio::runtime::Handle::current();
        match tokio::task::block_in_place(|| {
            rt.block_on(drover_cli::execute(&cli.command, &mut cx))
        }) {
            Ok(()) => 0,
            Err(e) => {
                writeln!(cx.err, "error: {e}").unwrap();
                e.exit_code()
            }
        }
    };
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

/// The standalone `drover` binary on `url`, with the heartbeat off.
fn standalone(url: &str, args: &[&str]) -> (i32, String, String) {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_drover"));
    c.args(args).stdin(std::process::Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("DROVER_") || k == "DATABASE_URL" || k == "RUST_LOG" {
            c.env_remove(k);
        }
    }
    let out = c
        .env("DROVER_HEARTBEAT_CRON", "off")
        .env("DROVER_DATABASE_URL", url)
        .output()
        .expect("spawn drover");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_cli_sees_the_services_schedule_and_the_standalone_one_says_where_it_lives() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(&dir);
    let queue = Queue::connect(&url).await.unwrap();
    queue.migrate().await.unwrap();
    let db = Db::default();
    // The service's scheduler has run once: its row is in the state table.
    let worker = drover::Worker::builder(queue.clone())
        .state(db.clone())
        .metrics_addr(None)
        .build()
        .unwrap();
    worker
        .scheduler()
        .expect("declared")
        .run_once()
        .await
        .unwrap();

    // The service's own binary: declared, with next fire times; its
    // handler's strategies; the trigger enqueues.
    let (code, out, err) = embedded(&queue, &db, &["schedules", "--json"]);
    assert_eq!(code, 0, "{err}");
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    let nightly = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "nightly-report")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(nightly["declared"], true);
    assert_eq!(nightly["next"].as_array().unwrap().len(), 3, "{nightly}");
    assert!(!err.contains("declared by a service binary"), "{err}");
    let (code, out, err) = embedded(&queue, &db, &["handlers"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("report.nightly") && l.contains("keyed by its day")),
        "{out}"
    );
    let (code, out, err) = embedded(&queue, &db, &["schedules", "trigger", "nightly-report"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("enqueued "), "{out}");

    // The standalone binary lists the row, says where it is declared, and
    // its trigger says so rather than "not found".
    let (code, out, err) = standalone(&url, &["schedules"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nightly-report"), "{out}");
    let note = err.lines().find(|l| l.starts_with("note:")).unwrap_or("");
    assert!(
        note.contains("nightly-report")
            && note.contains("declared by a service binary, not this one"),
        "{err}"
    );
    let (code, _, err) = standalone(&url, &["schedules", "trigger", "nightly-report"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("\"nightly-report\" is declared by a service binary, not this one"),
        "{err}"
    );
    assert!(!err.contains("not found"), "{err}");
    let (code, _, err) = standalone(&url, &["schedules", "trigger", "nobody-declared"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not found"), "{err}");
}
