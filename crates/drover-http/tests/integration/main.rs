//! drover-http's integration tests, in one binary. Each module is one former
//! `tests/*.rs` file under its old name, so a filter still names it:
//! `cargo test -p drover-http --test integration <file>::` or nextest's
//! `-E 'binary_id(drover-http::integration) & test(/^<file>::/)'`. One binary links
//! the dependency tree once, where a binary per file linked it once each.
//!
//! The shared helpers are declared here once: `common` (an app over a fresh
//! store) and the case suites `api_cases` and `work_cases`, whose `api_suite!`
//! and `work_suite!` the per-backend modules invoke.

mod api_cases;
mod common;
mod work_cases;

mod api_memory;
mod api_postgres;
mod api_sqlite;
mod console;
mod console_items;
mod console_pages;
mod contract;
mod dashboard;
mod logs;
mod openapi;
mod security;
mod work_memory;
mod work_postgres;
mod work_sqlite;
