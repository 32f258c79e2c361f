//! Scenario 8, coverage-guided: the libFuzzer targets in `fuzz/` (item and
//! payload decoding, the JSON Lines import) each run for a bounded time,
//! and any crash, hang or memory blow-up fails the test with the input
//! libFuzzer saved.
//!
//! The targets depend only on `drover-core`, so the instrumented build is
//! short enough for every run of the suite. They are built the way
//! `cargo fuzz build --sanitizer none` builds them (the same `RUSTFLAGS`:
//! SanitizerCoverage's 8-bit counters, PC table, compare tracing and stack
//! depth, `--cfg fuzzing`, debug assertions; the host triple given, so build
//! scripts and proc macros are not instrumented), by `cargo build` itself:
//! installing cargo-fuzz from crates.io compiled 56 crates on a fresh
//! machine for a wrapper around one `cargo build` and one exec. No
//! sanitizer works on the stable toolchain, and the code under test is safe
//! Rust (`unsafe_code = "forbid"`), so what can go wrong in it is a panic,
//! an overflow (checked: debug assertions and overflow checks on), a hang
//! or unbounded memory, all of which libFuzzer catches without
//! AddressSanitizer. `cargo fuzz run` works on the same targets by hand.
//!
//! Time per target: 20 s, 300 s under `DROVER_FAULT_FULL=1`, or
//! `DROVER_FUZZ_SECONDS`.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const TARGETS: [&str; 2] = ["import_line", "item_payload"];

/// What `cargo fuzz build` (0.13.2, `--dev --sanitizer none`, on Linux) sets in
/// `RUSTFLAGS`.
const FUZZ_RUSTFLAGS: &str = "-Cpasses=sancov-module \
    -Cllvm-args=-sanitizer-coverage-level=4 \
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
    -Cllvm-args=-sanitizer-coverage-pc-table \
    -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing \
    -Cllvm-args=-simplifycfg-branch-fold-threshold=0 \
    -Cllvm-args=-sanitizer-coverage-stack-depth -Cdebug-assertions";

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

/// An unoptimised build in the reduced run: it compiles in a fraction of
/// the optimised one's time and still runs tens of thousands of inputs a
/// second on these small parsers; the full run builds optimised (one
/// codegen unit and debug info, as `cargo fuzz build` does).
fn profile_args() -> &'static [&'static str] {
    if drover_faults::scale::full() {
        &[
            "--release",
            "--config",
            "profile.release.debug=true",
            "--config",
            "profile.release.codegen-units=1",
        ]
    } else {
        &[]
    }
}

fn profile_dir() -> &'static str {
    if drover_faults::scale::full() {
        "release"
    } else {
        "debug"
    }
}

/// The host's target triple (`rustc -vV`): given to `cargo build` so that
/// `RUSTFLAGS` reach the targets and not the build scripts.
fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).arg("-vV").output().expect("rustc -vV");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .expect("rustc -vV names the host")
}

/// Builds the fuzz targets; returns the directory holding their binaries.
fn build_targets() -> PathBuf {
    let fuzz_target_dir = target_dir().join("fuzz");
    let triple = host_triple();
    let rustflags: String = FUZZ_RUSTFLAGS
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let build = Command::new(env!("CARGO"))
        .current_dir(workspace_root())
        .args(["build", "--manifest-path", "fuzz/Cargo.toml", "--bins"])
        .args(["--target", &triple])
        .args(profile_args())
        .arg("--target-dir")
        .arg(&fuzz_target_dir)
        .env("RUSTFLAGS", rustflags)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("CARGO_FUZZ", "1")
        .env(
            "CARGO_FUZZ_MANIFEST",
            workspace_root().join("fuzz/Cargo.toml"),
        )
        .output()
        .expect("cargo build of the fuzz targets");
    assert!(
        build.status.success(),
        "building the fuzz targets failed:\n{}",
        tail(&String::from_utf8_lossy(&build.stderr))
    );
    fuzz_target_dir.join(triple).join(profile_dir())
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
    let bins = build_targets();
    let secs = seconds();
    let root = workspace_root();
    let seeds = root.join("fuzz/seeds");
    let corpora = tempfile::tempdir().expect("corpus dir");
    // Both targets at once: the machine's cores are otherwise idle while
    // this test binary runs.
    let children: Vec<_> = TARGETS
        .iter()
        .map(|t| {
            let corpus = corpora.path().join(t);
            std::fs::create_dir_all(&corpus).expect("corpus");
            // Where libFuzzer saves a crashing input, as `cargo fuzz run`.
            let artifacts = root.join("fuzz/artifacts").join(t);
            std::fs::create_dir_all(&artifacts).expect("artifacts dir");
            // libFuzzer writes a line for every new input: to a file, since
            // a pipe nobody drains (we wait for one child at a time) fills
            // up and stops the fuzzer writing to it.
            let log_path = corpora.path().join(format!("{t}.log"));
            let log = std::fs::File::create(&log_path).expect("fuzzer log");
            let mut prefix = std::ffi::OsString::from("-artifact_prefix=");
            prefix.push(&artifacts);
            prefix.push("/");
            let child = Command::new(bins.join(t))
                .current_dir(&root)
                .arg(prefix)
                .arg(format!("-max_total_time={secs}"))
                .args(["-timeout=10", "-rss_limit_mb=2048", "-print_final_stats=1"])
                .arg(&corpus)
                .arg(seeds.join(t))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("run a fuzz target");
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
