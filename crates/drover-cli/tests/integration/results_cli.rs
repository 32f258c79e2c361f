//! `drover enqueue --unique-while-active` and `drover show` printing an
//! item's result and progress, with the real binary on a SQLite file.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::process::{Command, Stdio};
use std::time::Duration;

use drover::item::Progress;
use serde_json::json;
use uuid::Uuid;

use crate::common;
use common::{Run, from_output};

fn drover(url: &str, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(args)
        .env("DROVER_DATABASE_URL", url)
        .env_remove("DATABASE_URL")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("spawn drover");
    from_output(out)
}

fn row(text: &str, name: &str) -> Option<String> {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
}

#[test]
fn unique_while_active_then_show_prints_result_and_progress() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("drover.db").display());
    drover(&url, &["migrate"]).ok();

    let enqueue = [
        "enqueue",
        "drover.echo",
        "--payload",
        r#"{"say":"hi"}"#,
        "--key",
        "echo:1",
        "--unique-while-active",
    ];
    let first = drover(&url, &enqueue).ok().stdout.trim().to_owned();
    let again = drover(&url, &enqueue).ok();
    assert_eq!(again.stdout.trim(), first, "refused while active");
    assert!(again.stderr.contains("already exists"), "{again:?}");
    let no_key = drover(&url, &["enqueue", "drover.echo", "--unique-while-active"]);
    assert_eq!(no_key.code, 2, "{no_key:?}");

    // A worker's run, in process: progress, then the completion with the
    // handler's result.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let q = drover::Queue::connect(&url).await.unwrap();
        let got = q
            .claim("default", &[], "w", Duration::from_secs(30), 1)
            .await
            .unwrap();
        let cx = got.items.into_iter().next().expect("claimed");
        assert_eq!(cx.id().to_string(), first);
        cx.report_progress(Progress {
            value: Some(75.0),
            data: Some(json!({"step": 3})),
        })
        .await
        .unwrap();
        let shown = drover(&url, &["show", &first]).ok().stdout;
        assert_eq!(
            row(&shown, "progress").as_deref(),
            Some(r#"75 % {"step":3}"#),
            "{shown}"
        );
        assert_eq!(row(&shown, "result").as_deref(), Some("-"), "{shown}");
        assert_eq!(
            row(&shown, "active_key").as_deref(),
            Some("echo:1"),
            "{shown}"
        );
        q.complete_with(&cx, Some(&json!({"say": "hi"})))
            .await
            .unwrap();
    });

    let shown = drover(&url, &["show", &first]).ok().stdout;
    assert_eq!(row(&shown, "status").as_deref(), Some("done"), "{shown}");
    assert_eq!(
        row(&shown, "result").as_deref(),
        Some(r#"{"say":"hi"}"#),
        "{shown}"
    );
    assert_eq!(
        row(&shown, "runs").as_deref(),
        Some("1 (done on its first claim: the item is that run)"),
        "{shown}"
    );
    let json = drover(&url, &["show", &first, "--json"]).ok().json();
    assert_eq!(json["runs"], json!([]), "no run row for a first-claim done");
    assert_eq!(json["result"], json!({"say": "hi"}));
    assert_eq!(
        json["progress"],
        json!({"value": 75.0, "data": {"step": 3}})
    );

    // Final: the same key enqueues anew.
    let next = drover(&url, &enqueue).ok().stdout.trim().to_owned();
    assert_ne!(next, first);
    Uuid::parse_str(&next).expect("an id");

    // Released once, then done: two runs, newest first, each on a line.
    rt.block_on(async {
        let q = drover::Queue::connect(&url).await.unwrap();
        for end in ["release", "complete"] {
            let got = q
                .claim("default", &[], "w-runs", Duration::from_secs(30), 1)
                .await
                .unwrap();
            let cx = got.items.into_iter().next().expect("claimed");
            assert_eq!(cx.id().to_string(), next);
            match end {
                "release" => q.release(&cx, Some("shutting down")).await.unwrap(),
                _ => q.complete(&cx).await.unwrap(),
            }
        }
    });
    let shown = drover(&url, &["show", &next]).ok().stdout;
    assert_eq!(row(&shown, "runs").as_deref(), Some("2"), "{shown}");
    let lines: Vec<&str> = shown.lines().filter(|l| l.starts_with("  #")).collect();
    assert_eq!(lines.len(), 2, "{shown}");
    assert!(
        lines[0].starts_with("  #2") && lines[0].contains("done"),
        "{shown}"
    );
    assert!(
        lines[1].starts_with("  #1") && lines[1].contains("released"),
        "{shown}"
    );
    assert!(lines.iter().all(|l| l.contains("on w-runs")), "{shown}");
    let json = drover(&url, &["show", &next, "--json"]).ok().json();
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(2), "{json}");
}
