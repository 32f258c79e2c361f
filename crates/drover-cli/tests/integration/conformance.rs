//! The HTTP conformance suite (crates/drover-http/conformance): the cases
//! of `cases.json`, written once, run through three clients generated from
//! the committed `crates/drover-http/openapi.json` at test time, each
//! against a real `drover serve` on SQLite and on PostgreSQL.
//!
//! - Python: `openapi-python-client`, the client and the program checked
//!   with `mypy --strict`;
//! - TypeScript: `openapi-typescript` + `openapi-fetch`, and
//!   `@hey-api/openapi-ts`, the programs and the generated code checked
//!   with `tsc` (`strict`).
//!
//! The generated code is written afresh every run into git-ignored folders
//! (`python/generated`, `ts/generated`) and never edited. The tools are
//! pinned (`python/requirements.txt`, `ts/package-lock.json`) and installed
//! into the repository's own folders (`python/.venv`, `ts/node_modules`)
//! when missing, as scripts/test.sh does; a missing `python3` or `npm`
//! fails the test, never skips it.
//!
//! Each client gets its own database and server: tokens from the cases
//! file's `tokens`, and the `stage` entries set up (a first request's
//! `Idempotency-Key` marker claimed and unanswered: the server's own record
//! of a request in flight, so the 409 case does not race a real one). The
//! test fails unless every client reports every case passed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::clients::{generate_python_client, node_tools, python_tools, run, serve, suite};
use common::pg::{FreshDb, block_on};
use drover::Queue;
use drover::access::{MARKER_RETENTION_DEFAULT, MARKER_STALE_DEFAULT, MarkerBegin, MarkerKey};
use drover_http::api::idempotency::fingerprint;
use drover_http::tokens::{TokenGrant, create};
use serde_json::{Value, json};
use uuid::Uuid;

/// Generates the Python client and type-checks it with the program.
fn generate_python() -> Duration {
    let start = Instant::now();
    let bin = python_tools();
    let py = suite().join("python");
    generate_python_client(&py);
    run(
        Command::new(bin.join("mypy"))
            .args(["--strict", "conformance.py", "generated/drover_client"])
            .env("MYPYPATH", "generated")
            .current_dir(&py),
        "mypy --strict over the generated client and conformance.py",
    );
    start.elapsed()
}

/// Generates both TypeScript clients and type-checks them with the programs.
fn generate_typescript() -> Duration {
    let start = Instant::now();
    let ts = suite().join("ts");
    let bin = node_tools(&ts, &["openapi-ts", "openapi-typescript", "tsc"]);
    for d in ["generated", "build"] {
        let _ = std::fs::remove_dir_all(ts.join(d));
    }
    run(
        Command::new(bin.join("openapi-typescript"))
            .args([
                "../../openapi.json",
                "-o",
                "generated/openapi-fetch/schema.ts",
            ])
            .current_dir(&ts),
        "openapi-typescript",
    );
    run(
        Command::new(bin.join("openapi-ts"))
            .args(["-i", "../../openapi.json", "-o", "generated/hey-api", "-s"])
            .current_dir(&ts),
        "@hey-api/openapi-ts",
    );
    run(
        Command::new(bin.join("tsc"))
            .args(["-p", ".", "--strict"])
            .current_dir(&ts),
        "tsc --strict over the generated clients and programs",
    );
    start.elapsed()
}

/// The three clients: a name, and the command that runs the cases.
const CLIENTS: [&str; 3] = [
    "openapi-python-client",
    "openapi-typescript+openapi-fetch",
    "@hey-api/openapi-ts",
];

fn client_command(client: &str) -> Command {
    let cases = suite().join("cases.json");
    match client {
        "openapi-python-client" => {
            let py = suite().join("python");
            let mut c = Command::new(py.join(".venv/bin/python"));
            c.arg("conformance.py")
                .arg(cases)
                .env("PYTHONPATH", "generated")
                .current_dir(py);
            c
        }
        _ => {
            let program = if client == "@hey-api/openapi-ts" {
                "build/hey-api.js"
            } else {
                "build/openapi-fetch.js"
            };
            let mut c = Command::new("node");
            c.arg(program).arg(cases).current_dir(suite().join("ts"));
            c
        }
    }
}

/// The tokens the cases name (name -> secret), minted in `url`'s store,
/// with the `stage` entries set up there.
fn prepare(url: &str, cases: &Value) -> BTreeMap<String, String> {
    block_on(async {
        let queue = Queue::connect(url).await.unwrap();
        queue.migrate().await.unwrap();
        let mut secrets = BTreeMap::new();
        let mut rows = BTreeMap::new();
        for (name, spec) in cases["tokens"].as_object().unwrap() {
            let tenant = spec["tenant"].as_str().map(|t| {
                cases["tenants"][t]
                    .as_str()
                    .unwrap()
                    .parse::<Uuid>()
                    .unwrap()
            });
            let grant = TokenGrant {
                role: spec["role"].as_str().unwrap().parse().unwrap(),
                tenant,
                enqueue: spec["enqueue"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|g| g.as_str().unwrap().to_owned())
                    .collect(),
                label: format!("conformance {name}"),
                work: Vec::new(),
            };
            let (secret, row) = create(&queue, &grant).await.unwrap();
            secrets.insert(name.clone(), secret.expose().to_owned());
            rows.insert(name.clone(), row);
        }
        for stage in cases["stage"].as_array().unwrap() {
            let f = &stage["in_flight"];
            let row = &rows[f["token"].as_str().unwrap()];
            let key = MarkerKey {
                tenant_id: row.scope_tenant.unwrap_or(Uuid::nil()),
                principal: row.id,
                route: f["route"].as_str().unwrap().to_owned(),
                key: f["key"].as_str().unwrap().to_owned(),
            };
            // The fingerprint of the body the case then sends: the same
            // request, so the answer is 409 (another body would be 422).
            let body = serde_json::to_vec(&f["body"]).unwrap();
            let begun = queue
                .marker_begin(
                    &key,
                    &fingerprint(&body),
                    MARKER_RETENTION_DEFAULT,
                    MARKER_STALE_DEFAULT,
                )
                .await
                .unwrap();
            assert!(matches!(begun, MarkerBegin::Started), "{begun:?}");
        }
        secrets
    })
}

/// How long a client's run may take before the test calls it hung.
const CLIENT_BOUND: Duration = Duration::from_secs(300);

/// What one client did on one backend.
struct Outcome {
    client: &'static str,
    backend: &'static str,
    passed: usize,
    took: Duration,
    output: String,
    success: bool,
}

fn run_client(client: &'static str, backend: &'static str, cases: &Value) -> Outcome {
    let sqlite = tempfile::tempdir().unwrap();
    let pg = (backend == "postgres").then(|| FreshDb::new("drover_conformance"));
    let url = match &pg {
        Some(db) => db.url.clone(),
        None => format!("sqlite://{}", sqlite.path().join("drover.db").display()),
    };
    let tokens = prepare(&url, cases);
    let server = serve(&url);
    let start = Instant::now();
    let child = client_command(client)
        .env("DROVER_URL", &server.base)
        .env("DROVER_TOKENS", json!(tokens).to_string())
        .env("DROVER_TENANTS", cases["tenants"].to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{client}: cannot start: {e}"));
    // A client that never answers (a request that hangs) fails the test
    // instead of holding the suite: the run takes seconds, the bound is
    // minutes and measures nothing.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    let out = match rx.recv_timeout(CLIENT_BOUND) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("{client} on {backend} did not finish within {CLIENT_BOUND:?}");
        }
    };
    let took = start.elapsed();
    drop(server);
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let passed = output.lines().filter(|l| l.starts_with("PASS ")).count();
    Outcome {
        client,
        backend,
        passed,
        took,
        output,
        success: out.status.success(),
    }
}

#[test]
fn every_case_passes_through_three_generated_clients_on_sqlite_and_postgres() {
    let cases: Value =
        serde_json::from_str(&std::fs::read_to_string(suite().join("cases.json")).unwrap())
            .unwrap();
    let total = cases["cases"].as_array().unwrap().len();
    assert!(total > 0);

    let python = std::thread::spawn(generate_python);
    let typescript = std::thread::spawn(generate_typescript);
    let python = python
        .join()
        .expect("the Python client generates and type-checks");
    let typescript = typescript
        .join()
        .expect("the TypeScript clients generate and type-check");
    eprintln!(
        "generated and type-checked: Python {:.1} s, TypeScript {:.1} s",
        python.as_secs_f64(),
        typescript.as_secs_f64()
    );

    let runs: Vec<_> = ["sqlite", "postgres"]
        .into_iter()
        .flat_map(|backend| CLIENTS.into_iter().map(move |client| (client, backend)))
        .map(|(client, backend)| {
            let cases = cases.clone();
            std::thread::spawn(move || run_client(client, backend, &cases))
        })
        .collect();
    let outcomes: Vec<Outcome> = runs.into_iter().map(|h| h.join().unwrap()).collect();
    let mut failed = Vec::new();
    for o in &outcomes {
        eprintln!(
            "{:<34} {:<8} {:>2}/{total} cases passed in {:.2} s",
            o.client,
            o.backend,
            o.passed,
            o.took.as_secs_f64()
        );
        if !o.success || o.passed != total {
            failed.push(format!("{} on {}:\n{}", o.client, o.backend, o.output));
        }
    }
    assert!(
        failed.is_empty(),
        "conformance failures:\n{}",
        failed.join("\n")
    );
}
