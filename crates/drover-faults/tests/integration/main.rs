//! drover-faults's integration tests, in one binary. Each module is one former
//! `tests/*.rs` file under its old name, so a filter still names it:
//! `cargo test -p drover-faults --test integration <file>::` or nextest's
//! `-E 'binary_id(drover-faults::integration) & test(/^<file>::/)'`. One binary links
//! the dependency tree once, where a binary per file linked it once each.
//!
//! The shared scenario setup (`support`) is declared here once; the scenarios
//! import it with `use crate::support;`.

mod support;

mod cancel;
mod deps_kill;
mod features;
mod fuzz;
mod hostile;
mod http_speed;
mod http_workers;
mod kill9;
mod limits;
mod netfault;
mod orch_kill;
mod outage;
mod outbox_relay;
mod pause;
mod poison;
mod projector_kill;
mod rates;
mod restart;
mod shutdown;
mod sweep_race;
mod sweep_stall;
