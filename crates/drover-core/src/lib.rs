//! drover-core: the parts of drover that need no runtime and no database.
//!
//! | module | owns |
//! |---|---|
//! | [`item`] | the work item, its statuses and input validation |
//! | [`rules`] | the pure rules: retry delay, budget, stale filter, fence |
//! | [`jsonl`] | one line of JSON Lines import to one checked item |
//! | [`trace`] | the W3C `traceparent` an item carries: format and parts |
//! | [`error`] | the one public error type |
//!
//! The `drover` crate re-exports every module here under the same names
//! (`drover::item`, `drover::rules`, …); depend on this crate directly only
//! to validate or build items where the queue runtime is not wanted (a
//! producer behind an HTTP API, a fuzz target). It is kept free of tokio and
//! of the database driver so that it builds in seconds; the `sqlx` feature
//! adds the driver's error conversions for the `drover` crate.

pub mod error;
pub mod item;
pub mod jsonl;
pub mod rules;
pub mod trace;

pub use error::{Error, ErrorKind, Result};
pub use item::{InsertResult, Inserted, Item, NewItem, Progress, Status};
