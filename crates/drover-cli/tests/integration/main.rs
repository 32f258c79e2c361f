//! drover-cli's integration tests, in one binary. Each module is one former
//! `tests/*.rs` file under its old name, so a filter still names it:
//! `cargo test -p drover-cli --test integration <file>::` or nextest's
//! `-E 'binary_id(drover-cli::integration) & test(/^<file>::/)'`. One binary links
//! the dependency tree once, where a binary per file linked it once each.
//!
//! Not here: `tests/embedded_cli.rs`. A `drover::register!` is a link-time
//! registration that reaches every worker built in its binary, so each file
//! that registers keeps a binary of its own.
//!
//! The shared helpers (`common`) are declared here once; the files that use
//! them import them with `use crate::common;`.

mod common;

// `drover bench` exists only with the `bench` feature, which this
// package's dev-dependency on itself turns on for its tests.
#[cfg(feature = "bench")]
mod bench;
mod browser;
mod cli;
mod conformance;
mod deploy;
mod env_example;
mod events_cli;
mod handlers_cli;
mod image_contract;
mod migrate_online;
mod orchestrations_cli;
mod pgbouncer;
mod reconcile_cli;
mod reference_workers;
mod results_cli;
mod serve_cli;
mod worker_cli;
