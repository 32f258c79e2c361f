//! drover-bench's integration tests, in one binary. Each module is one former
//! `tests/*.rs` file under its old name, so a filter still names it:
//! `cargo test -p drover-bench --test integration <file>::` or nextest's
//! `-E 'binary_id(drover-bench::integration) & test(/^<file>::/)'`. One binary links
//! the dependency tree once, where a binary per file linked it once each.

mod outbox_bench;
mod projector_rate;
