//! Scenario 8, coverage-guided: the cargo-fuzz targets in `fuzz/` (item and
//! payload decoding, the JSON Lines import) each run for a bounded time,
//! and any crash, hang or memory blow-up fails the test with the input
//! libFuzzer saved.
//!
//! The targets depend only on `drover-core`, so the instrumented build is
//! short enough for every `cargo test --workspace`. They are built with
//! `--sanitizer none`, which works on the stable toolchain: the code under
//! test is safe Rust (`unsafe_code = "forbid"`), so what can go wrong in it
//! is a panic, an overflow (checked: cargo-fuzz turns debug assertions and
//! overflow checks on), a hang or unbounded memory, all of which libFuzzer
//! catches without AddressSanitizer. Where cargo-fuzz is missing, it is
//! installed from crates.io into the target directory, so the README's test
//! command works on a fresh machine.
//!
//! Time per target: 20 s, 300 s under `DROVER_FAULT_FULL=1`, or
//! `DROVER_FUZZ_SECONDS`.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const TARGETS: [&str; 2] = ["import_line", "item_payload"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// The cargo target directory this test was built into: the executable
/// lives in `<target>/<profile>/deps/`.
fn target_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("test executable");
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| workspace_root().join("target"))
}

fn seconds() -> u64 {
    std::env::var("DROVER_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| drover_faults::scale::pick(20, 300))
}

/// `--dev` in the reduced run: an unoptimised build compiles in a fraction
/// of the optimised one's time and still runs tens of thousands of inputs a
/// second on these small parsers; the full run builds optimised.
fn profile() -> &'static str {
    if drover_faults::scale::full() {
        "--release"
    } else {
        "--dev"
    }
}

fn cargo() -> Command {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(workspace_root());
    cmd
}

/// `PATH` with a directory in front.
fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    if let Some(p) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(paths).expect("PATH")
}

/// A `PATH` under which `cargo fuzz` works, installing cargo-fuzz into the
/// target directory when the machine has none.
fn ensure_cargo_fuzz() -> std::ffi::OsString {
    let tools = target_dir().join("fuzz-tools");
    let path = path_with(&tools.join("bin"));
    let found = |path: &std::ffi::OsString| {
        cargo()
            .args(["fuzz", "--version"])
            .env("PATH", path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if found(&path) {
        return path;
    }
    let out = cargo()
        .args([
            "install",
            "cargo-fuzz",
            "--locked",
            "--version",
            "^0.13",
            "--root",
        ])
        .arg(&tools)
        .output()
        .expect("cargo install");
    assert!(
        out.status.success(),
        "installing cargo-fuzz failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        found(&path),
        "cargo-fuzz installed but `cargo fuzz` not found"
    );
    path
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// libFuzzer's closing line: `Done N runs in S second(s)`.
fn runs_done(stderr: &str) -> Option<u64> {
    stderr.lines().rev().find_map(|l| {
        let rest = l.strip_prefix("Done ")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

#[test]
fn fuzz_targets_run_without_a_crash() {
    let path = ensure_cargo_fuzz();
    let fuzz_target_dir = target_dir().join("fuzz");
    let build = cargo()
        .args([
            "fuzz",
            "build",
            profile(),
            "--sanitizer",
            "none",
            "--target-dir",
        ])
        .arg(&fuzz_target_dir)
        .env("PATH", &path)
        .output()
        .expect("cargo fuzz build");
    assert!(
        build.status.success(),
        "cargo fuzz build failed:\n{}",
        tail(&String::from_utf8_lossy(&build.stderr))
    );

    let secs = seconds();
    let seeds = workspace_root().join("fuzz/seeds");
    let corpora = tempfile::tempdir().expect("corpus dir");
    // Both targets at once: the machine's cores are otherwise idle while
    // this test binary runs.
    let children: Vec<_> = TARGETS
        .iter()
        .map(|t| {
            let corpus = corpora.path().join(t);
            std::fs::create_dir_all(&corpus).expect("corpus");
            // libFuzzer writes a line for every new input: to a file, since
            // a pipe nobody drains (we wait for one child at a time) fills
            // up and stops the fuzzer writing to it.
            let log_path = corpora.path().join(format!("{t}.log"));
            let log = std::fs::File::create(&log_path).expect("fuzzer log");
            let child = cargo()
                .args([
                    "fuzz",
                    "run",
                    profile(),
                    "--sanitizer",
                    "none",
                    "--target-dir",
                ])
                .arg(&fuzz_target_dir)
                .arg(t)
                .arg(&corpus)
                .arg(seeds.join(t))
                .arg("--")
                .arg(format!("-max_total_time={secs}"))
                .args(["-timeout=10", "-rss_limit_mb=2048", "-print_final_stats=1"])
                .env("PATH", &path)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("cargo fuzz run");
            (*t, child, log_path)
        })
        .collect();
    for (t, mut child, log_path) in children {
        let status = child.wait().expect("fuzzer exit");
        let stderr = std::fs::read_to_string(&log_path).unwrap_or_default();
        assert!(
            status.success(),
            "fuzz target {t} found a failure (input saved under fuzz/artifacts/{t}/):\n{}",
            tail(&stderr)
        );
        let runs = runs_done(&stderr).expect("libFuzzer's closing line");
        assert!(runs > 0, "{t}: no inputs were run");
        println!("FAULT-FIGURES | fuzz | target {t} | {secs} s | runs {runs} | crashes 0");
    }
}
