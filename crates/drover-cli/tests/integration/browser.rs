//! The dashboard in headless Chromium (Debian's `chromium`, driven by
//! playwright-core from npm; no browser download) against a real
//! `drover serve` on a fresh PostgreSQL database, with a worker of this
//! test draining a lane: log in, filter items, retry a failed item and see
//! it pending, cancel one, pause the worker's lane and see the worker stop
//! claiming from it, a cross-site form POST refused; on the lanes page a
//! code-declared kind limit listed with its use, an operator's lane limit
//! set through the form and cleared; the overview's alert cases (a lane
//! with waiting work and no worker, a kind no live worker runs) and its
//! labelled charts; the workers page (in flight against capacity, what
//! runs now); the schedules page (next runs, trigger now); orchestrations
//! (the stuck one highlighted, a detail page, a signal sent, one
//! cancelled, the stuck one resumed); the failed item's run history; the
//! dead letter grouped by error with "retry all in this group"; who paused
//! a lane, by name; the batches page; a tenant-scoped operator's own
//! overview (its alert, its charts) with the workers page refused. Screenshots go to
//! `target/browser-artifacts/`; with `DROVER_UPDATE_SCREENSHOT=1` the
//! overview is also written to `docs/img/dashboard.png`.
//!
//! Needs `chromium`, `node` and `npm` (`.ci/run` installs them); fails,
//! never skips, when they are missing.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use drover::queue::{JobContext, Kind, Principal, Queue};
use drover::worker::{Done, Handler, Outcome, Strategy, WorkerSettings};
use drover::{NewItem, Status, Worker};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::common;
use common::pg::FreshDb;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Tag {
    n: u32,
}

impl Kind for Tag {
    const NAME: &'static str = "browser.tag";
}

#[derive(Clone)]
struct Report(mpsc::UnboundedSender<(String, u32)>);

impl Handler for Report {
    type Job = Tag;
    const STRATEGY: Strategy = Strategy {
        idempotency: "test handler: reports and does nothing else",
        retry: "queue default",
        checkpoint: "none: one step",
        recovery: "swept after the lease",
    };
    async fn handle(&self, cx: &JobContext, job: Tag) -> Outcome {
        let _ = self.0.send((cx.item().lane.clone(), job.n));
        Ok(Done::Completed)
    }
}

const POLL: Duration = Duration::from_millis(50);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chromium() -> PathBuf {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(p).exists() {
            return p.into();
        }
    }
    panic!("Debian's chromium is not installed (apt-get install chromium; .ci/run does)");
}

/// Installs playwright-core into the repository's browser folder when it
/// is not there yet (never a browser download).
fn browser_dir() -> PathBuf {
    let dir = repo().join("crates/drover-http/browser");
    if !dir.join("node_modules/playwright-core").exists() {
        let st = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund"])
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .current_dir(&dir)
            .status()
            .expect("npm is installed (.ci/run installs it)");
        assert!(st.success(), "npm install in {}", dir.display());
    }
    dir
}

async fn enqueue(q: &Queue, kind: &str, lane: &str, n: u32) -> Uuid {
    q.enqueue_item(
        &Principal::system(),
        NewItem::new(kind, json!({ "n": n })).with_lane(lane),
    )
    .await
    .unwrap()
    .item
    .id
}

async fn next(rx: &mut mpsc::UnboundedReceiver<(String, u32)>) -> (String, u32) {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("an item ran in time")
        .expect("the handler is alive")
}

/// Two orchestration records as a start writes them, the second made
/// stuck (as an unknown step leaves one): their ids.
async fn orchestrations(q: &Queue) -> (Uuid, Uuid) {
    use drover::orchestration::{OrchestrationStatus, RecordWrite, Start, Transition};
    let mut ids = Vec::new();
    for order in [1, 2] {
        let mut start = Start::new("checkout", &json!({ "order": order })).unwrap();
        start.lane = "default".into();
        start.first_step = "reserve".into();
        start.max_attempts = 3;
        let (rec, first) = start.build().unwrap();
        ids.push(
            q.store()
                .orchestration_insert(&rec, &first)
                .await
                .unwrap()
                .record,
        );
    }
    let b = &ids[1];
    let mut w = RecordWrite::of(b);
    w.status = OrchestrationStatus::Stuck;
    w.resume_as = Some(OrchestrationStatus::Running);
    w.error = Some("unknown step \"reserve\"".into());
    q.store()
        .orchestration_update(&Transition {
            tenant_id: b.tenant_id,
            id: b.id,
            expected_version: b.version,
            write: w,
            enqueue: None,
            consume_signal: None,
        })
        .await
        .unwrap();
    (ids[0].id, ids[1].id)
}

/// A running `drover serve`: its address and one-time token; killed on drop.
struct Serve {
    child: std::process::Child,
    base: String,
    token: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `drover serve` on `url`. With `one_time`, no token is stored yet and the
/// server prints a one-time admin token, returned in `token`; without it,
/// the stored tokens are the server's and `token` is empty.
fn serve(url: &str, one_time: bool) -> Serve {
    let mut child = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env("DROVER_DATABASE_URL", url)
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn drover serve");
    let (tx, rx) = std_mpsc::channel::<(bool, String)>();
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send((true, l));
        }
    });
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx2.send((false, l));
        }
    });
    let (mut base, mut token, mut token_next) = (None, None, false);
    if !one_time {
        token = Some(String::new());
    }
    while base.is_none() || token.is_none() {
        let (is_out, line) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("drover serve prints its address and token");
        if is_out {
            if let Some(a) = line.strip_prefix("listening on ") {
                base = Some(a.trim().to_owned());
            }
        } else if token_next {
            token = Some(line.trim().to_owned());
            token_next = false;
        } else if line.contains("one-time admin token") {
            token_next = true;
        }
    }
    Serve {
        child,
        base: base.unwrap(),
        token: token.unwrap(),
    }
}

#[test]
fn dashboard_in_headless_chromium() {
    let chromium = chromium();
    let browser = browser_dir();
    let db = FreshDb::new("drover_browser");
    let artifacts = repo().join("target/browser-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let q = Queue::connect(&db.url).await.unwrap();
        q.migrate().await.unwrap();
        // A failed item (its error names the disk), one to cancel, both in
        // lanes no worker drains; and a worker on `bulk` and `other`.
        let failed = enqueue(&q, "report.build", "reports", 1).await;
        let batch = q
            .claim("reports", &[], "w-browser", Duration::from_secs(30), 1)
            .await
            .unwrap();
        q.fail(&batch.items[0], "disk full on /var/spool", true)
            .await
            .unwrap();
        // Two dead letters whose errors differ only in digits: one group.
        let mut timed_out = Vec::new();
        for (n, error) in [
            (5, "order 1234 timed out after 30s"),
            (6, "order 98 timed out after 5s"),
        ] {
            timed_out.push(enqueue(&q, "report.render", "reports", n).await);
            let b = q
                .claim("reports", &[], "w-browser", Duration::from_secs(30), 1)
                .await
                .unwrap();
            q.fail(&b.items[0], error, true).await.unwrap();
        }
        enqueue(&q, "report.build", "reports", 2).await;
        // A kind limit of 1 from code, one export claimed, two waiting.
        q.limit_declare(&drover::store::limits::LimitScope::Kind("export".into()), 1)
            .await
            .unwrap();
        for n in 0..3 {
            enqueue(&q, "export", "exports", n).await;
        }
        let held = q
            .claim("exports", &[], "w-browser", Duration::from_secs(600), 3)
            .await
            .unwrap();
        assert_eq!(held.items.len(), 1, "the kind limit admits one");
        let to_cancel = enqueue(&q, "mail.send", "held", 3).await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let w = Worker::builder(q.clone())
            .settings(WorkerSettings {
                capacity: 2,
                lanes: vec!["bulk".into(), "other".into()],
                poll_interval: POLL,
                heartbeat_interval: Duration::from_millis(200),
                metrics_addr: None,
                heartbeat_cron: None,
                ..WorkerSettings::default()
            })
            .handler(Report(tx))
            .without_sweep()
            .build()
            .unwrap()
            .start()
            .await
            .unwrap();
        enqueue(&q, Tag::NAME, "bulk", 10).await;
        assert_eq!(
            next(&mut rx).await,
            ("bulk".into(), 10),
            "the worker drains bulk"
        );
        // The history the overview charts: settled by the sweep, run here
        // once (this worker runs none) after the settlement's second.
        let since = q.db_now().await.unwrap() - chrono::TimeDelta::hours(1);
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            q.store().counts_settle().await.unwrap();
            let rows = q
                .throughput(&drover::store::throughput::ThroughputQuery {
                    since,
                    tenant_id: None,
                    by: drover::store::throughput::ThroughputBy::Minute,
                })
                .await
                .unwrap();
            let done: i64 = rows.iter().map(|r| r.done).sum();
            let failed: i64 = rows.iter().map(|r| r.failed).sum();
            if (done, failed) == (1, 3) {
                break;
            }
        }
        // A kind the live worker of `bulk` does not run: "unhandled".
        enqueue(&q, "mystery.kind", "bulk", 1).await;
        let (orch, stuck) = orchestrations(&q).await;
        q.store()
            .schedule_upsert(&drover::periodic::ScheduleDecl {
                name: drover::periodic::HEARTBEAT_NAME.into(),
                cron: "* * * * *".into(),
                zone: "UTC".into(),
                kind: drover::periodic::HEARTBEAT_NAME.into(),
                lane: "default".into(),
                misfire: drover::periodic::MisfirePolicy::Skip,
            })
            .await
            .unwrap();

        // One tenant's waiting item, in a lane no worker drains.
        let tenant = Uuid::from_u128(0x007e_4a17);
        q.enqueue_item(
            &Principal::system(),
            NewItem::new("report.build", json!({ "n": 7 }))
                .with_lane("tenant-lane")
                .with_tenant(tenant),
        )
        .await
        .unwrap();

        let srv = serve(&db.url, true);
        let mut node = Command::new("node");
        node.arg("dashboard.mjs")
            .current_dir(&browser)
            .env("BASE_URL", &srv.base)
            .env("TOKEN", &srv.token)
            .env("CHROMIUM", &chromium)
            .env("ARTIFACTS", &artifacts)
            .env("FAILED_ID", failed.to_string())
            .env("CANCEL_ID", to_cancel.to_string())
            .env("GROUP_KIND", "report.render")
            .env("PAUSE_LANE", "bulk")
            .env("LIMIT_KIND", "export")
            .env("LIMIT_LANE", "exports")
            .env("NO_WORKER_LANE", "reports")
            .env("UNHANDLED_KIND", "mystery.kind")
            .env("RUNNING_KIND", "export")
            .env("SCHEDULE", drover::periodic::HEARTBEAT_NAME)
            .env("ORCH_ID", orch.to_string())
            .env("STUCK_ID", stuck.to_string());
        if std::env::var_os("DROVER_UPDATE_SCREENSHOT").is_some() {
            node.env("SCREENSHOT", repo().join("docs/img/dashboard.png"));
        }
        let out = tokio::task::spawn_blocking(move || node.output().expect("node runs"))
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "browser script failed:\n{stdout}\n{stderr}"
        );
        for s in [
            "logged in",
            "filtered",
            "retried",
            "dead group retried",
            "cancelled",
            "paused",
            "cross-site refused",
            "limit listed",
            "limit set",
            "limit cleared",
            "alerts",
            "charts",
            "workers",
            "schedules",
            "orchestration",
            "batches",
            "done",
        ] {
            assert!(
                stdout.contains(&format!("STEP {s}")),
                "step {s:?} missing:\n{stdout}"
            );
        }

        // What the browser did landed.
        assert_eq!(
            q.get(Uuid::nil(), failed).await.unwrap().status,
            Status::Pending
        );
        assert_eq!(
            q.get(Uuid::nil(), to_cancel).await.unwrap().status,
            Status::Cancelled
        );
        for id in timed_out {
            assert_eq!(
                q.get(Uuid::nil(), id).await.unwrap().status,
                Status::Pending
            );
        }
        let audit = q.audit(Uuid::nil(), failed).await.unwrap();
        assert!(
            audit
                .iter()
                .any(|a| a.action == "retry" && !a.actor.is_nil()),
            "the browser's retry is audited with its token"
        );
        let orch = q
            .store()
            .orchestration_get(Uuid::nil(), orch)
            .await
            .unwrap()
            .unwrap();
        assert!(orch.cancel_requested, "the browser asked to cancel");
        assert_eq!(q.lanes_paused().await.unwrap(), vec!["bulk".to_owned()]);
        let in_force: Vec<String> = q
            .limits()
            .await
            .unwrap()
            .iter()
            .map(|u| format!("{} {}", u.setting.scope, u.setting.source.as_str()))
            .collect();
        assert_eq!(
            in_force,
            vec!["kind export code"],
            "the lane limit was cleared"
        );

        // The worker stops claiming from the lane paused in the browser.
        let end = tokio::time::Instant::now() + Duration::from_secs(30);
        while w.paused_lanes() != ["bulk"] {
            assert!(
                tokio::time::Instant::now() < end,
                "the worker never saw the pause"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let held = enqueue(&q, Tag::NAME, "bulk", 11).await;
        for n in 20..23 {
            enqueue(&q, Tag::NAME, "other", n).await;
            assert_eq!(next(&mut rx).await, ("other".into(), n));
        }
        tokio::time::sleep(POLL * 4).await;
        let item = q.get(Uuid::nil(), held).await.unwrap();
        assert_eq!(
            (item.status, item.claim_seq),
            (Status::Pending, 0),
            "no claim from the paused lane"
        );
        q.lane_resume(&Principal::system(), "bulk").await.unwrap();
        assert_eq!(next(&mut rx).await, ("bulk".into(), 11));
        drop(srv);

        // A tenant-scoped operator, its token in the table (so the next
        // server reads its tokens from there and prints none).
        let minted = Command::new(env!("CARGO_BIN_EXE_drover"))
            .args([
                "token",
                "create",
                "--role",
                "operator",
                "--label",
                "tenant ops",
            ])
            .args(["--tenant", &tenant.to_string()])
            .env("DROVER_DATABASE_URL", &db.url)
            .env_remove("DATABASE_URL")
            .output()
            .expect("drover token create");
        assert!(minted.status.success(), "{minted:?}");
        let tenant_token = String::from_utf8_lossy(&minted.stdout)
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .expect("the token is printed")
            .trim()
            .to_owned();
        let srv = serve(&db.url, false);
        let mut node = Command::new("node");
        node.arg("tenant.mjs")
            .current_dir(&browser)
            .env("BASE_URL", &srv.base)
            .env("CHROMIUM", &chromium)
            .env("ARTIFACTS", &artifacts)
            .env("TENANT", tenant.to_string())
            .env("TENANT_TOKEN", &tenant_token);
        let out = tokio::task::spawn_blocking(move || node.output().expect("node runs"))
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("STEP tenant overview"),
            "tenant walk failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        drop(srv);
        w.shutdown().await;
    });
    drop(rt);
    drop(db);
}
