//! Scenario 8: hostile input through the library, the CLI (the fault
//! binary runs drover's CLI for every command but `worker`) and
//! `--from-file`: rows written 0, a typed error every time, no SQL echoed.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::os::unix::ffi::OsStrExt;
use std::process::Command;

use drover::queue::Principal;
use drover::{ErrorKind, NewItem};
use proptest::prelude::*;
use support::{BIN, Run, report};

fn hostile_names() -> Vec<String> {
    let mut v: Vec<String> = [
        "",
        "a'b",
        "a\"b",
        "100%",
        "$$x$$",
        "a.b'; DROP TABLE items; --",
        "back\\slash",
        "nul\0byte",
        "tab\tctl",
        "new\nline",
        "esc\u{1b}[31m",
        "UPPER",
        "ѕеnd_еmail",
        "send\u{200b}mail",
        "ｓｅｎｄ",
        "lane with space",
        "semi;colon",
        "/*c*/",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    v.push("a".repeat(65));
    v.push("k".repeat(129));
    v
}

fn deep(n: usize) -> serde_json::Value {
    let mut v = serde_json::Value::Null;
    for _ in 0..n {
        v = serde_json::Value::Array(vec![v]);
    }
    v
}

fn no_sql(msg: &str) {
    for w in [
        "SELECT",
        "INSERT",
        "UPDATE",
        "WHERE",
        "RETURNING",
        "pg_",
        "sqlx",
    ] {
        assert!(!msg.contains(w), "error echoes SQL or driver text: {msg}");
    }
}

async fn library(run: &Run, backend: &str) {
    let mut refused = 0;
    for name in hostile_names() {
        for (kind, lane) in [
            (name.clone(), "default".to_owned()),
            ("ok.kind".to_owned(), name.clone()),
        ] {
            // Lanes may be up to 64 bytes and kinds 128: a 65-byte name is
            // a valid kind, so only count the refusals that must happen.
            let item = NewItem::new(kind.clone(), serde_json::json!({})).with_lane(lane.clone());
            match run.queue.enqueue_item(&Principal::system(), item).await {
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{kind:?}/{lane:?}: {e}");
                    no_sql(&e.to_string());
                    refused += 1;
                }
                Ok(_) => assert!(
                    kind.len() == 65 && lane == "default",
                    "accepted hostile kind {kind:?} lane {lane:?}"
                ),
            }
        }
    }
    let big = serde_json::json!({"blob": "x".repeat(300 * 1024)});
    // Over the size limit: refused. Nested 100 deep: valid JSON within the
    // limit, accepted (PostgreSQL and SQLite store it as JSON).
    let item = NewItem::new("ok.kind", big);
    let e = run
        .queue
        .enqueue_item(&Principal::system(), item)
        .await
        .expect_err("oversized payload");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    no_sql(&e.to_string());
    refused += 1;
    let nested = run
        .queue
        .enqueue_item(&Principal::system(), NewItem::new("ok.kind", deep(100)))
        .await;
    let valid = 1 + i64::from(nested.is_ok());
    if let Err(e) = nested {
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        no_sql(&e.to_string());
    }
    let written = run.count_status("pending").await;
    report(
        &format!("8 hostile input, library ({backend})"),
        "kinds, lanes, payloads",
        &format!(
            "refused {refused} | rows written for invalid input {}",
            written - valid
        ),
    );
    assert_eq!(written, valid, "rows written for invalid input");
}

fn cli(url: &str, args: &[&[u8]]) -> (i32, String) {
    let out = Command::new(BIN)
        .arg("--database-url")
        .arg(url)
        .args(args.iter().map(|a| std::ffi::OsStr::from_bytes(a)))
        .output()
        .expect("run the CLI");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn through_cli(run: &Run, backend: &str) {
    let before = run.open_items().await;
    let mut refused = 0;
    for name in hostile_names()
        .into_iter()
        .filter(|n| !n.contains('\0') && n.len() != 65)
    {
        for args in [
            vec![b"enqueue".as_slice(), name.as_bytes()],
            vec![
                b"enqueue".as_slice(),
                b"ok.kind",
                b"--lane",
                name.as_bytes(),
            ],
        ] {
            let (code, err) = cli(&run.url, &args);
            assert_eq!(code, 2, "{name:?}: {err}");
            no_sql(&err);
            refused += 1;
        }
    }
    for payload in [b"{not json".as_slice(), b"\xff\xfe", b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["] {
        let (code, err) = cli(&run.url, &[b"enqueue", b"ok.kind", b"--payload", payload]);
        assert_eq!(code, 2, "{err}");
        no_sql(&err);
        refused += 1;
    }
    // --from-file: each file holds one good line and one hostile line; the
    // whole file is refused.
    let lines: Vec<Vec<u8>> = vec![
        b"{\"kind\":\"a'b\"}".to_vec(),
        b"{\"kind\":\"ok\",\"lane\":\"$$\"}".to_vec(),
        b"{\"kind\":\"ok\",\"payload\":".to_vec(),
        b"{\"kind\":\"ok\x00\"}".to_vec(),
        b"{\"kind\":\"ok\",\"payload\":\"\xff\"}".to_vec(),
        format!(
            "{{\"kind\":\"ok\",\"payload\":\"{}\"}}",
            "x".repeat(300 * 1024)
        )
        .into_bytes(),
        b"\x00\x01\x02".to_vec(),
    ];
    for (i, bad) in lines.iter().enumerate() {
        let path = run.dir.path().join(format!("bad-{i}.jsonl"));
        let mut body = b"{\"kind\":\"ok.kind\"}\n".to_vec();
        body.extend_from_slice(bad);
        body.push(b'\n');
        std::fs::write(&path, body).expect("write");
        let (code, err) = cli(
            &run.url,
            &[b"enqueue", b"--from-file", path.as_os_str().as_bytes()],
        );
        assert_eq!(code, 2, "line {i}: {err}");
        no_sql(&err);
        refused += 1;
    }
    let after = run.open_items().await;
    report(
        &format!("8 hostile input, CLI and --from-file ({backend})"),
        "kinds, lanes, payloads, files",
        &format!(
            "refused {refused} (exit 2 each) | rows written {}",
            after - before
        ),
    );
    assert_eq!(after, before, "rows written for invalid input");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_sqlite() {
    let run = Run::sqlite().await;
    library(&run, "SQLite").await;
    through_cli(&run, "SQLite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_postgres() {
    let run = Run::pg().await;
    library(&run, "PostgreSQL").await;
    let url = format!("{}?options=-csearch_path%3Ddrover", run.url);
    let _ = url;
    through_cli(&run, "PostgreSQL").await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
    /// Validation never panics and refuses with InvalidInput; anything it
    /// accepts is a valid name.
    #[test]
    fn names_are_validated_without_panics(s in any::<String>()) {
        match drover::item::validate_kind(&s) {
            Ok(()) => prop_assert!(!s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.:-".contains(&b))),
            Err(e) => prop_assert_eq!(e.kind(), ErrorKind::InvalidInput),
        }
        match drover::item::validate_lane(&s) {
            Ok(()) => prop_assert!(!s.is_empty() && s.len() <= 64),
            Err(e) => prop_assert_eq!(e.kind(), ErrorKind::InvalidInput),
        }
    }

    /// The JSON Lines import parser never panics on arbitrary bytes.
    #[test]
    fn import_lines_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = drover::jsonl::parse_line(&text, uuid::Uuid::nil());
    }
}
