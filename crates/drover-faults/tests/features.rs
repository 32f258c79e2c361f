//! The `drover` library builds with only the backend a user picks: each of
//! `--features postgres`, `--features sqlite` and neither (memory only)
//! must type-check without the other, so a cfg slip that reaches across
//! backends fails here instead of in a user's build. Each of those builds
//! leaves `metrics-listener` off, and a producer-only service's dependency
//! tree holds no HTTP stack (axum, hyper).
//!
//! `cargo check` runs in a target directory of its own (under this test's
//! target directory) so it neither waits on nor invalidates the build that
//! runs the tests.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

fn check_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| workspace_root().join("target"))
        .join("feature-check")
}

fn check(features: &str) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["check", "-p", "drover", "--lib", "--no-default-features"])
        .args(["--features", features])
        .env("CARGO_TARGET_DIR", check_dir())
        .env("RUSTFLAGS", "-D warnings")
        .output()
        .expect("run cargo check");
    assert!(
        out.status.success(),
        "drover does not build with features [{features}]:\n{}",
        String::from_utf8_lossy(&out.stderr)
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
