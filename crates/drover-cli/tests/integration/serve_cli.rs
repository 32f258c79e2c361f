//! `drover serve` and `drover token` as a user runs them: the binary, a
//! SQLite file, real sockets on loopback.
//!
//! - With no token configured, a non-loopback address is refused (exit 2)
//!   and a loopback one serves with a one-time token printed to stderr.
//! - `drover token create` prints a token once; the server then accepts
//!   it and prints no one-time token; `token revoke` ends it.
//! - A worker token claims and completes over `serve`; SIGTERM ends its
//!   long poll with 503 and `Retry-After` (the drain), then `serve` exits.
//! - schemathesis (installed by `.ci/run` into `.ci/venv`) runs every
//!   check (`--checks all`) on every operation of the live server's
//!   `/v1/openapi.json` (fetched without a token: it is open).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common;

struct Db(PathBuf);

impl Db {
    fn new() -> Db {
        Db(std::env::temp_dir().join(format!("drover-serve-{}.db", uuid::Uuid::new_v4())))
    }
    fn url(&self) -> String {
        format!("sqlite://{}", self.0.display())
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        for s in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{s}", self.0.display()));
        }
    }
}

fn drover(db: &Db, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_drover"))
        .arg("--database-url")
        .arg(db.url())
        .args(args)
        .env("RUST_LOG", "info")
        .output()
        .unwrap()
}

/// A running `drover serve`: its address, what it printed, and the child
/// (stopped with SIGTERM on drop).
struct Server {
    child: Child,
    addr: String,
    stderr_head: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

fn serve(db: &Db, expect_one_time_token: bool) -> Server {
    serve_with(db, expect_one_time_token, &[], &[])
}

/// As [`serve`], with more arguments and variables.
fn serve_with(
    db: &Db,
    expect_one_time_token: bool,
    args: &[&str],
    vars: &[(&str, &str)],
) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_drover"))
        .arg("--database-url")
        .arg(db.url())
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(args)
        .env_remove("DROVER_HTTP_SECURE_COOKIE")
        .envs(vars.iter().copied())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut stderr_head = String::new();
    if expect_one_time_token {
        for _ in 0..2 {
            err.read_line(&mut stderr_head).unwrap();
        }
    }
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = err.read_to_end(&mut sink);
    });
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = out.read_to_end(&mut sink);
    });
    Server {
        child,
        addr,
        stderr_head,
    }
}

/// One HTTP/1.1 request; the status code.
fn get(addr: &str, path: &str, token: Option<&str>) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// One HTTP/1.1 request; the status, the head's lines and the body.
fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    write!(s, "{head}Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head.to_owned(), body.to_owned())
}

/// The `Set-Cookie` line of a dashboard login with `token`.
fn login_cookie(server: &Server, token: &str) -> String {
    let (status, head, body) = request(
        &server.addr,
        "POST",
        "/ui/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &format!("token={token}"),
    );
    assert_eq!(status, 303, "{head}\n{body}");
    head.lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("no cookie: {head}"))
        .to_owned()
}

fn one_time_token(server: &Server) -> String {
    server.stderr_head.lines().nth(1).unwrap().trim().to_owned()
}

/// `--secure-cookie` and `DROVER_HTTP_SECURE_COOKIE` mark the session
/// cookie `Secure`; without either it is not (plain HTTP on loopback).
#[test]
fn secure_cookie_flag_and_variable_mark_the_session_cookie() {
    let db = Db::new();
    assert!(drover(&db, &["migrate"]).status.success());
    for (args, vars, secure) in [
        (&["--secure-cookie"][..], &[][..], true),
        (&[][..], &[("DROVER_HTTP_SECURE_COOKIE", "true")][..], true),
        (&[][..], &[][..], false),
    ] {
        let server = serve_with(&db, true, args, vars);
        let cookie = login_cookie(&server, &one_time_token(&server));
        assert!(cookie.contains("HttpOnly"), "{cookie}");
        assert_eq!(
            cookie.contains("; Secure"),
            secure,
            "{args:?} {vars:?}: {cookie}"
        );
    }
}

/// `serve` on a database no migration was applied to (a SQLite file, a
/// PostgreSQL database) stops at once, naming the command that fixes it,
/// not the database's missing table.
#[test]
fn serve_on_an_unmigrated_database_says_run_migrate_first() {
    let file = Db::new();
    let pg = common::pg::FreshDb::new("drover_serve_unmigrated");
    for url in [file.url(), pg.url.clone()] {
        let out = Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(["--database-url", &url, "serve", "--addr", "127.0.0.1:0"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{url}: {err}");
        assert!(err.contains("run `drover migrate` first"), "{url}: {err}");
        assert!(
            !err.contains("no such table") && !err.contains("does not exist"),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "it never listened");
    }
}

/// The built-in kinds are known to `serve`: enqueued over HTTP they are
/// `known_kind`, and `/v1/stats` does not list them as unhandled.
#[test]
fn serve_knows_the_built_in_kinds() {
    let db = Db::new();
    assert!(drover(&db, &["migrate"]).status.success());
    let server = serve(&db, true);
    let auth = format!("Bearer {}", one_time_token(&server));
    for kind in [
        "drover.noop",
        "drover.sleep",
        "drover.fail",
        "drover.panic",
        "not.builtin",
    ] {
        let (status, _, body) = request(
            &server.addr,
            "POST",
            "/v1/items",
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            &format!(
                r#"{{"kind": "{kind}", "payload": {{"ms": 1, "times": 0}}, "run_at": "2999-01-01T00:00:00Z"}}"#
            ),
        );
        assert_eq!(status, 201, "{body}");
        let want = !kind.starts_with("not.");
        assert!(
            body.contains(&format!("\"known_kind\":{want}")),
            "{kind}: {body}"
        );
    }
    let (status, _, body) = request(
        &server.addr,
        "GET",
        "/v1/stats",
        &[("Authorization", &auth)],
        "",
    );
    assert_eq!(status, 200, "{body}");
    let stats: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        stats["unhandled_kinds"],
        serde_json::json!(["not.builtin"]),
        "{body}"
    );
}

#[test]
fn without_a_token_serve_refuses_non_loopback_and_prints_a_one_time_token_on_loopback() {
    let db = Db::new();
    assert!(drover(&db, &["migrate"]).status.success());
    let refused = drover(&db, &["serve", "--addr", "0.0.0.0:0"]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("not a loopback address") && err.contains("addr"),
        "{err}"
    );

    let server = serve(&db, true);
    let token = server.stderr_head.lines().nth(1).unwrap().trim().to_owned();
    assert!(token.starts_with("drv_"), "{:?}", server.stderr_head);
    assert_eq!(get(&server.addr, "/healthz", None), 200);
    assert_eq!(get(&server.addr, "/readyz", None), 200);
    assert_eq!(get(&server.addr, "/v1/items", None), 401);
    assert_eq!(get(&server.addr, "/v1/items", Some(&token)), 200);
    assert_eq!(get(&server.addr, "/v1/items", Some("drv_wrong")), 401);
}

#[test]
fn a_created_token_is_accepted_until_revoked() {
    let db = Db::new();
    assert!(drover(&db, &["migrate"]).status.success());
    let created = drover(
        &db,
        &[
            "token",
            "create",
            "--role",
            "viewer",
            "--enqueue",
            "mail.*,report",
        ],
    );
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let token = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    assert!(token.starts_with("drv_"));
    let listed = drover(&db, &["token", "list"]);
    let text = String::from_utf8(listed.stdout).unwrap();
    assert!(
        text.contains("viewer") && text.contains("mail.*,report"),
        "{text}"
    );
    assert!(!text.contains(&token[4..]), "list never shows a token");
    let id = text
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();

    let server = serve(&db, false);
    assert!(server.stderr_head.is_empty());
    assert_eq!(get(&server.addr, "/v1/items", Some(&token)), 200);
    let revoked = drover(&db, &["token", "revoke", &id]);
    assert!(revoked.status.success());
    assert_eq!(get(&server.addr, "/v1/items", Some(&token)), 401);
    let again = drover(&db, &["token", "revoke", &id]);
    assert_eq!(again.status.code(), Some(1));
    let bad = drover(&db, &["token", "create", "--role", "root"]);
    assert_eq!(bad.status.code(), Some(2));
}

fn schemathesis() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = root.join(".ci/venv/bin/schemathesis");
    assert!(
        bin.exists(),
        "schemathesis is not installed at {}: run `python3 -m venv .ci/venv && .ci/venv/bin/pip install schemathesis` (.ci/run does)",
        bin.display()
    );
    bin
}

/// Operations with a rule a schema cannot state (between parameters or
/// array members, or a character refused anywhere inside a payload;
/// `tests/schemathesis/schemathesis.toml` says which): every check but
/// `positive_data_acceptance`.
const CROSS_MEMBER_RULES: &str = "^/v1/((limits|rates)/\\{scope\\}/\\{name\\}|items/batch|items|batches|fairness/lanes/\\{lane\\})$";

/// The worker routes with a rule a schema cannot state: the completions'
/// result and the progress report (see schemathesis.toml).
const COMPLETIONS: &str = "^/v1/work/(complete|items/\\{id\\}/(complete|progress))$";

/// One schemathesis run against `server`; its output, asserted successful.
fn schemathesis_run(server: &Server, token: &str, args: &[&str]) -> String {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schemathesis/schemathesis.toml");
    let out = Command::new(schemathesis())
        .arg("--config-file")
        .arg(config)
        .args(["run", &format!("http://{}/v1/openapi.json", server.addr)])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "all"])
        .args(args)
        .args(["--max-examples", "25", "--seed", "1", "--no-color"])
        .env("SCHEMATHESIS_HOOKS", "")
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "schemathesis failed:\n{text}");
    text
}

/// Every documented operation under every schemathesis check: no server
/// error, every answer's status, content type, headers and body as the
/// document says, schema-valid requests accepted and invalid ones
/// refused, and the rest of `--checks all`.
#[test]
fn schemathesis_finds_no_server_error_and_no_schema_violation() {
    let db = Db::new();
    assert!(drover(&db, &["migrate"]).status.success());
    let created = drover(
        &db,
        &["token", "create", "--role", "admin", "--enqueue", "*"],
    );
    let token = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    let server = serve(&db, false);
    let text = schemathesis_run(
        &server,
        &token,
        &["--exclude-path-regex", CROSS_MEMBER_RULES],
    );
    assert!(
        text.contains("Tested: 34"),
        "every documented operation but the ten with rules a schema cannot state (34) was tested:\n{text}"
    );
    let text = schemathesis_run(
        &server,
        &token,
        &[
            "--include-path-regex",
            CROSS_MEMBER_RULES,
            "--exclude-checks",
            "positive_data_acceptance",
        ],
    );
    assert!(
        text.contains("Tested: 10"),
        "the ten operations with rules a schema cannot state were tested:\n{text}"
    );
    // The worker routes again under a worker token, so their schema-valid
    // requests get past the role check (each settles nothing: the claims
    // are random, 409). The claim is left to the admin run above (403):
    // a schema-valid claim may long-poll for a minute.
    let created = drover(
        &db,
        &["token", "create", "--role", "worker", "--work", "*:*"],
    );
    assert!(created.status.success());
    let worker = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    let text = schemathesis_run(
        &server,
        &worker,
        &[
            "--include-path-regex",
            "^/v1/work/",
            "--exclude-path",
            "/v1/work/claim",
            "--exclude-path-regex",
            COMPLETIONS,
        ],
    );
    assert!(
        text.contains("Tested: 5"),
        "the worker routes but the claim, the completions and progress were tested with a worker token:\n{text}"
    );
    // The completions carry a result (any JSON value but one holding
    // U+0000) and a progress report needs a value or a note: rules a
    // schema cannot state (schemathesis.toml), so they run with every
    // check but that schema-valid requests are accepted.
    let text = schemathesis_run(
        &server,
        &worker,
        &[
            "--include-path-regex",
            COMPLETIONS,
            "--exclude-checks",
            "positive_data_acceptance",
        ],
    );
    assert!(
        text.contains("Tested: 3"),
        "both completion routes and progress were tested with a worker token:\n{text}"
    );
}

/// One HTTP/1.1 POST of a JSON body; the status and the raw answer
/// (head and body).
fn post(addr: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, text)
}

fn json_of(answer: &str) -> serde_json::Value {
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str(body).unwrap_or(serde_json::Value::Null)
}

/// A worker token minted with the CLI claims and completes over `drover
/// serve`; on SIGTERM a long poll in progress ends at once with 503 and
/// `Retry-After`, and the server exits.
#[test]
fn a_worker_token_claims_over_serve_and_sigterm_ends_its_long_poll() {
    let db = Db::new();
    assert!(drover(&db, &["migrate"]).status.success());
    let mint = |args: &[&str]| {
        let out = drover(&db, &[&["token", "create"], args].concat());
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let worker = mint(&["--role", "worker", "--work", "default:*"]);
    let admin = mint(&["--role", "admin"]);
    let refused = drover(&db, &["token", "create", "--role", "worker"]);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "a worker token needs a grant"
    );
    assert!(drover(&db, &["enqueue", "drover.noop"]).status.success());
    let mut server = serve(&db, false);
    let addr = server.addr.clone();

    let (s, a) = post(
        &addr,
        "/v1/work/claim",
        &worker,
        r#"{"worker_id":"cli-w","lanes":["default"]}"#,
    );
    assert_eq!(s, 200, "{a}");
    let item = json_of(&a)["items"][0].clone();
    let done =
        serde_json::json!({"tenant_id": item["tenant_id"], "claim_token": item["claim_token"]});
    let path = format!("/v1/work/items/{}/complete", item["id"].as_str().unwrap());
    let (s, a) = post(&addr, &path, &worker, &done.to_string());
    assert_eq!(s, 200, "{a}");
    let (s, a) = post(&addr, &path, &worker, &done.to_string());
    assert_eq!(s, 409, "the second completion is stale: {a}");
    let (s, _) = post(
        &addr,
        "/v1/work/claim",
        &admin,
        r#"{"worker_id":"x","lanes":["default"]}"#,
    );
    assert_eq!(s, 403, "an admin token does not claim");

    // A long poll on the empty lane; once its row is in the workers table
    // the handler runs, and SIGTERM must end it with 503.
    let poll = {
        let (addr, worker) = (addr.clone(), worker.clone());
        std::thread::spawn(move || {
            post(
                &addr,
                "/v1/work/claim",
                &worker,
                r#"{"worker_id":"poller","lanes":["default"],"wait_ms":60000}"#,
            )
        })
    };
    loop {
        let mut s = TcpStream::connect(&addr).unwrap();
        write!(s, "GET /v1/workers HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {admin}\r\nConnection: close\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        if text.contains("\"poller\"") {
            break;
        }
        std::thread::yield_now();
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(server.child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let (s, a) = poll.join().unwrap();
    assert_eq!(s, 503, "{a}");
    assert!(a.to_ascii_lowercase().contains("retry-after: 1"), "{a}");
    let status = server.child.wait().unwrap();
    assert!(
        status.success(),
        "serve exits cleanly after the drain: {status:?}"
    );
    // Reaped already: its drop must not signal the pid again (it may be
    // another process's by now).
    std::mem::forget(server);
}
