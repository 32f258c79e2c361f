//! drover: durable background work for Rust services.
//!
//! A work queue that lives in the database the service already has
//! (PostgreSQL in production, SQLite as the embedded default, memory for
//! tests), the workers that drain it, and the maintenance that keeps it
//! healthy.
//!
//! | module | owns |
//! |---|---|
//! | [`item`] | the work item, its statuses and input validation |
//! | [`rules`] | the pure rules: retry delay, budget, stale filter, fence |
//! | [`store`] | the storage seam and its PostgreSQL, SQLite and memory backends |
//! | [`queue`] | the API producers and workers call |
//! | [`worker`] | the runtime that drains lanes |
//! | [`maintenance`] | the sweep: stale requeue, purge, gauges |
//! | [`periodic`] | cron schedules, the scheduler, the heartbeat job |
//! | [`builtin`] | diagnostic kinds for exercising a deployment |
//! | [`error`] | the one public error type |
//! | [`jsonl`] | one line of JSON Lines import to one checked item |
//!
//! `item`, `rules`, `jsonl` and `error` live in the `drover-core` crate
//! (no runtime, no database driver) and are re-exported here unchanged.
//!
//! Features: `test-util` exposes the backend contract suite
//! (`store::contract`) and database helpers for tests.

pub mod builtin;
pub mod maintenance;
pub mod periodic;
pub mod queue;
pub mod store;
#[cfg(feature = "test-util")]
pub mod testing;
pub mod worker;

pub use drover_core::{error, item, jsonl, rules};

pub use error::{Error, ErrorKind, Result};
pub use item::{InsertResult, Inserted, Item, NewItem, Status};
pub use queue::{JobContext, Kind, Queue};
pub use store::{Backend, ClaimRef, Store};
pub use worker::{Done, Handler, JobError, Outcome, Strategy, Worker};
