//! `drover orchestrations list|show|cancel|resume`, `drover signal` and the
//! workflow runner's strategies in `drover handlers`, in process over an
//! in-memory queue with a real worker.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use clap::Parser;
use drover::orchestration::{
    Next, OrchestrationStatus, Start, StepError, Workflow, WorkflowStrategy, Workflows,
};
use drover::worker::WorkerSettings;
use drover::{Queue, Worker};
use uuid::Uuid;

const STRATEGY: WorkflowStrategy = WorkflowStrategy {
    compensation: "release the hold",
    resume: "a signal or the sweep's timeout",
};

fn workflow() -> Workflow<u32> {
    Workflow::<u32>::new("hold", STRATEGY)
        .step("ask", |_cx, n| async move {
            Ok(Next::WaitSignal {
                name: "answer",
                step: "done",
                timeout: Duration::from_secs(600),
                on_timeout: "done",
                state: n + 1,
            })
        })
        .step("done", |cx, n| async move {
            let got = cx
                .signal()
                .cloned()
                .ok_or_else(|| StepError::fatal("no signal"))?;
            Ok(Next::complete(got, n))
        })
        .compensate("ask", |_cx, _n| async move { Ok(()) })
}

fn drover(queue: &Queue, args: &[&str]) -> (i32, String, String) {
    let cli =
        drover_cli::Cli::try_parse_from(std::iter::once("drover").chain(args.iter().copied()))
            .expect("parse");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = {
        let mut cx = drover_cli::Context::with_queue(queue.clone(), &mut out, &mut err)
            .with_worker_setup(|b| b.workflows(Workflows::new().with(workflow())));
        let rt = tokio::runtime::Handle::current();
        match tokio::task::block_in_place(|| {
            rt.block_on(drover_cli::execute(&cli.command, &mut cx))
        }) {
            Ok(()) => 0,
            Err(e) => {
                writeln!(cx.err, "error: {e}").unwrap();
                i32::from(e.exit_code())
            }
        }
    };
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

async fn wait(queue: &Queue, id: Uuid, want: OrchestrationStatus) {
    let end = Instant::now() + Duration::from_secs(20);
    while queue.orchestration(Uuid::nil(), id).await.unwrap().status != want {
        assert!(Instant::now() < end, "never {want}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_signal_cancel_and_handlers() {
    let queue = Queue::memory();
    let worker = Worker::builder(queue.clone())
        .settings(WorkerSettings {
            metrics_addr: None,
            poll_interval: Duration::from_millis(50),
            ..WorkerSettings::default()
        })
        .workflows(Workflows::new().with(workflow()))
        .build()
        .unwrap()
        .start()
        .await
        .unwrap();
    let start = |k: &str| Start::of(&workflow(), &0).unwrap().key(k);
    let a = queue.start(&start("a")).await.unwrap().record.id;
    let b = queue.start(&start("b")).await.unwrap().record.id;
    wait(&queue, a, OrchestrationStatus::Parked).await;
    wait(&queue, b, OrchestrationStatus::Parked).await;

    let (code, out, _) = drover(&queue, &["orchestrations", "list", "--status", "parked"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(&a.to_string()) && out.contains(&b.to_string()),
        "{out}"
    );
    assert!(out.contains("STATUS") && out.contains("parked"), "{out}");

    let (code, out, _) = drover(&queue, &["orchestrations", "show", &a.to_string()]);
    assert_eq!(code, 0);
    assert!(out.contains("waiting:   answer"), "{out}");
    assert!(out.contains("step:      done"), "{out}");
    assert!(out.contains("waiting_for answer"), "history: {out}");

    let (code, out, _) = drover(
        &queue,
        &[
            "signal",
            &a.to_string(),
            "answer",
            "--payload",
            r#"{"yes":true}"#,
        ],
    );
    assert_eq!((code, out.trim()), (0, format!("woke {a}").as_str()));
    wait(&queue, a, OrchestrationStatus::Completed).await;
    let done = queue.orchestration(Uuid::nil(), a).await.unwrap();
    assert_eq!(done.result, Some(serde_json::json!({"yes": true})));

    // A finished orchestration refuses the signal; a bad payload is exit 2.
    let (code, _, err) = drover(&queue, &["signal", &a.to_string(), "answer"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("conflict"), "{err}");
    let (code, _, _) = drover(
        &queue,
        &["signal", &b.to_string(), "answer", "--payload", "{nope"],
    );
    assert_eq!(code, 2);

    let (code, out, _) = drover(&queue, &["orchestrations", "cancel", &b.to_string()]);
    assert_eq!(code, 0, "{out}");
    wait(&queue, b, OrchestrationStatus::Cancelled).await;
    let (code, out, _) = drover(
        &queue,
        &["orchestrations", "list", "--status", "cancelled", "--json"],
    );
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["id"], serde_json::json!(b));

    // Not stuck: resume is a conflict.
    let (code, _, err) = drover(&queue, &["orchestrations", "resume", &b.to_string()]);
    assert_eq!(code, 1, "{err}");

    let (code, out, _) = drover(&queue, &["handlers"]);
    assert_eq!(code, 0);
    assert!(out.contains("drover.step"), "{out}");
    assert!(
        out.contains("workflow runner") && out.contains("hold"),
        "{out}"
    );
    assert!(
        out.contains("compensation") && out.contains("release the hold"),
        "{out}"
    );
    assert!(
        out.contains("resume") && out.contains("a signal or the sweep's timeout"),
        "{out}"
    );
    worker.shutdown().await;
}
