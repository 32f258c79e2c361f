//! `drover serve` and `drover token` as a user runs them: the binary, a
//! SQLite file, real sockets on loopback.
//!
//! - With no token configured, a non-loopback address is refused (exit 2)
//!   and a loopback one serves with a one-time token printed to stderr.
//! - `drover token create` prints a token once; the server then accepts
//!   it and prints no one-time token; `token revoke` ends it.
//! - schemathesis (installed by `.ci/run` into `.ci/venv`) runs against
//!   the live server's `/v1/openapi.json`: no server error, no response
//!   that violates the schema.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

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
    let mut child = Command::new(env!("CARGO_BIN_EXE_drover"))
        .arg("--database-url")
        .arg(db.url())
        .args(["serve", "--addr", "127.0.0.1:0"])
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

#[test]
fn schemathesis_finds_no_server_error_and_no_schema_violation() {
    let bin = schemathesis();
    let db = Db::new();
    assert!(drover(&db, &["migrate"]).status.success());
    let created = drover(
        &db,
        &["token", "create", "--role", "admin", "--enqueue", "*"],
    );
    let token = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    let server = serve(&db, false);
    let out = Command::new(bin)
        .args(["run", &format!("http://{}/v1/openapi.json", server.addr)])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance"])
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
    assert!(
        text.contains("Tested: 19"),
        "every documented operation (19) was tested:\n{text}"
    );
}
