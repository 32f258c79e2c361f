//! drover's integration tests, in one binary. Each module is one former
//! `tests/*.rs` file under its old name, so a filter still names it:
//! `cargo test -p drover --test integration <file>::` or nextest's
//! `-E 'binary_id(drover::integration) & test(/^<file>::/)'`. One binary links
//! the dependency tree once, where a binary per file linked it once each.
//!
//! Not here: `tests/periodic_register.rs` and `tests/register_state.rs`. A
//! `drover::register!` is a link-time registration that reaches every worker
//! built in its binary, so each file that registers keeps a binary of its own.
//!
//! The SQLite helpers (`sqlite_common`) are declared here once; the files
//! that use them import them with `use crate::sqlite_common;`. So is
//! `recorder`, the process's one metrics recorder, which the modules that
//! read drover's counters share.

mod recorder;
mod sqlite_common;

mod cancellation;
mod closed_groups;
mod contract_registry;
mod counts_lane;
mod declarations;
mod drain;
mod event_gap;
mod first_user;
mod lane_pause;
mod links_queue;
mod memory_contract;
mod orchestration_by_name;
mod orchestration_cancel;
mod orchestration_dead_steps;
mod orchestrations;
mod ordered_groups;
mod otel_links;
mod outcome_writes;
mod periodic;
mod postgres_claim_floors;
mod postgres_contract;
mod postgres_counts;
mod postgres_event_purge;
mod postgres_fair_call;
mod postgres_fair_first;
mod postgres_fair_list;
mod postgres_item_rules;
mod postgres_items_rotation;
mod postgres_limited_room;
mod postgres_pooled_contract;
mod postgres_rate_cells;
mod postgres_relay;
mod postgres_rls;
mod postgres_store;
mod postgres_vacuum;
mod projector_sqlite_tx;
mod queue_api;
mod queue_tx;
mod rate_limits;
mod readiness;
mod reconcile;
mod reconcile_faults;
mod relay_metrics;
mod results_runtime;
mod roles_only;
mod spread;
mod sqlite_contract;
mod sqlite_enqueue;
mod sqlite_fair_list;
mod sqlite_store;
mod sweep;
mod wakeups;
mod why_waiting;
mod worker_runtime;
