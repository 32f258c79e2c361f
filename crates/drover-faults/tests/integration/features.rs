//! The `drover` library builds with only the backend a user picks: each of
//! `--features postgres`, `--features sqlite` and neither (memory only)
//! must type-check without the other, so a cfg slip that reaches across
//! backends fails here instead of in a user's build. Each of those builds
//! leaves `metrics-listener` off, and a producer-only service's dependency
//! tree holds no HTTP stack (axum, hyper).
//!
//! Under cargo-nextest (the suite's runner, which holds no cargo lock while
//! tests run) `cargo check` runs in the target directory the tests were
//! built in, so the build scripts and proc macros that build compiled (the
//! SQLite C library, serde's derive, ...) serve the checks too; a check
//! writes check-mode units of its own and never invalidates the build's.
//! Under `cargo test`, which keeps that directory locked while its tests
//! run, the checks use a directory of their own beside it. Warnings are
//! read from cargo's messages rather than made errors by
//! `RUSTFLAGS=-D warnings`: the checks keep the build's own `RUSTFLAGS`,
//! since others would rebuild every unit of the directory.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// Where the checks build: the target directory this test was built into
/// (the executable lives in `<target>/<profile>/deps/`) under nextest
/// (`NEXTEST` set), its `feature-check` subdirectory otherwise.
fn check_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let target = exe
        .ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| workspace_root().join("target"));
    if std::env::var_os("NEXTEST").is_some() {
        target
    } else {
        target.join("feature-check")
    }
}

/// The compiler's messages of `level` among cargo's JSON messages (only the
/// workspace's own crates warn: dependencies' lints are capped).
fn messages(json: &[u8], level: &str) -> Vec<String> {
    String::from_utf8_lossy(json)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-message" && m["message"]["level"] == level)
        .filter_map(|m| m["message"]["rendered"].as_str().map(str::to_owned))
        .collect()
}

fn check(features: &str) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["check", "-p", "drover", "--lib", "--no-default-features"])
        .args(["--features", features])
        .args(["--message-format", "json"])
        .env("CARGO_TARGET_DIR", check_dir())
        .output()
        .expect("run cargo check");
    assert!(
        out.status.success(),
        "drover does not build with features [{features}]:\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        messages(&out.stdout, "error").join("\n")
    );
    let warnings = messages(&out.stdout, "warning");
    assert!(
        warnings.is_empty(),
        "drover warns with features [{features}]:\n{}",
        warnings.join("\n")
    );
}

#[test]
fn each_backend_builds_alone() {
    // In sequence: the three share most of their dependency builds.
    check("sqlite");
    check("postgres");
    check("");
}

/// `cargo tree`'s normal dependencies of `package` with `args`, one crate
/// name and version a line.
fn tree(package: &str, args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none"])
        .args(args)
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package} {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn has(tree: &str, krate: &str) -> bool {
    tree.lines().any(|l| l.starts_with(&format!("{krate} v")))
}

/// Issue 31, point 7: a producer-only service
/// (`default-features = false, features = ["postgres"]`) compiles no HTTP
/// listener stack; `metrics-listener` (in the defaults) brings axum and
/// hyper; `drover worker`'s lean build (`drover-cli --no-default-features`,
/// the README's demo command) has none either.
#[test]
fn a_producer_only_build_compiles_no_http_stack() {
    let lean = tree(
        "drover",
        &["--no-default-features", "--features", "postgres"],
    );
    for http in ["axum", "hyper"] {
        assert!(
            !has(&lean, http),
            "{http} in a producer-only build:\n{lean}"
        );
    }
    let listener = tree(
        "drover",
        &[
            "--no-default-features",
            "--features",
            "postgres,metrics-listener",
        ],
    );
    assert!(
        has(&listener, "axum") && has(&listener, "hyper"),
        "{listener}"
    );
    let demo = tree("drover-cli", &["--no-default-features"]);
    for http in ["axum", "hyper"] {
        assert!(
            !has(&demo, http),
            "{http} in drover-cli --no-default-features:\n{demo}"
        );
    }
}
