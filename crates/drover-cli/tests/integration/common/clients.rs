//! The machinery of the tests that run programs over generated clients
//! (conformance.rs, reference_workers.rs): the pinned generator and
//! type-checker installs in the repository's own folders, the client
//! generation, and a `drover serve` child.
//!
//! Tools are installed when missing, never skipped: a missing `python3` or
//! `npm` fails the test that needs it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The conformance suite's folder (its tools live there).
pub fn suite() -> PathBuf {
    repo().join("crates/drover-http/conformance")
}

/// Runs `cmd` to its end; panics with its output unless it succeeded.
pub fn run(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The Python tools (openapi-python-client, mypy, and what the generated
/// client imports), installed into the conformance suite's `python/.venv`
/// from its pinned requirements when missing; answers the venv's `bin`.
pub fn python_tools() -> PathBuf {
    let py = suite().join("python");
    let venv = py.join(".venv");
    if !venv.join("bin/openapi-python-client").exists() || !venv.join("bin/mypy").exists() {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv (needs python3 and python3-venv)",
        );
        run(
            Command::new(venv.join("bin/pip"))
                .args(["install", "-q", "-r"])
                .arg(py.join("requirements.txt")),
            "pip install -r requirements.txt",
        );
    }
    venv.join("bin")
}

/// The npm tools of the package in `dir`, installed into its
/// `node_modules` from its lock file when one of `bins` is missing;
/// answers `node_modules/.bin`.
pub fn node_tools(dir: &Path, bins: &[&str]) -> PathBuf {
    let bin = dir.join("node_modules/.bin");
    if bins.iter().any(|b| !bin.join(b).exists()) {
        run(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(dir),
            "npm ci (needs npm)",
        );
    }
    bin
}

/// `PATH` with `dir` first (the generator runs ruff from the venv).
pub fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Generates the Python client from the committed document into
/// `dir/generated` (written afresh), with the tools of `python_tools`.
pub fn generate_python_client(dir: &Path) {
    let bin = python_tools();
    let _ = std::fs::remove_dir_all(dir.join("generated"));
    run(
        Command::new(bin.join("openapi-python-client"))
            .arg("generate")
            .arg("--path")
            .arg(repo().join("crates/drover-http/openapi.json"))
            .args(["--output-path", "generated"])
            .env("PATH", path_with(&bin))
            .current_dir(dir),
        "openapi-python-client generate",
    );
}

/// A running `drover serve` on `url`; killed on drop.
pub struct Serve {
    pub child: Child,
    pub base: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `drover serve` on `url` on a free loopback port.
pub fn serve(url: &str) -> Serve {
    let mut child = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env("DROVER_DATABASE_URL", url)
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn drover serve");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    Serve { child, base }
}
