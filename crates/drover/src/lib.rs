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
//! | [`events`] | the append-only, per-tenant event log projectors follow |
//! | [`maintenance`] | the sweep: stale requeue, purge, gauges |
//! | [`vacuum`] | the paced vacuum of drover's hot tables (PostgreSQL) |
//! | [`orchestration`] | long-running work as persisted, fenced steps that park, resume and compensate |
//! | [`outbox`] | the transactional outbox and its relay: a producer's write and its follow-up work commit together |
//! | [`projector`] | projectors following the event log: checkpoints, leases, rebuilds, lag |
//! | [`periodic`] | cron schedules, the scheduler, the heartbeat job |
//! | [`access`] | the HTTP API's tokens (hashed) and idempotency markers |
//! | [`builtin`] | diagnostic kinds for exercising a deployment |
//! | [`error`] | the one public error type |
//! | [`jsonl`] | one line of JSON Lines import to one checked item |
//! | [`trace`] | the W3C `traceparent` an item carries |
//! | `otel` | (feature `otel`) trace links and the OTLP exporter |
//! | `defaults` | the default roles assembled: [`Worker::builder`] turns them on from the settings |
//!
//! The modules stand in floors, each importing only the ones below it
//! (`scripts/check-circles.py` finds any import circle): the store and the
//! core re-exports; [`queue`]; [`worker`] (it knows no role by name);
//! [`maintenance`]; the roles ([`events`], [`outbox`], [`orchestration`],
//! [`periodic`], [`projector`], [`reconcile`], [`vacuum`], [`lane`],
//! [`access`], [`builtin`]), each adding its own builder calls; at the top
//! `defaults` and `testing`. A record a lower floor needs lives in the
//! store (`store::<entity>`) or the lower floor, and the role's module
//! re-exports it, so every public path stays where it was.
//!
//! `item`, `rules`, `jsonl`, `trace` and `error` live in the `drover-core` crate
//! (no runtime, no database driver) and are re-exported here unchanged.
//!
//! Features:
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `postgres` | on | the PostgreSQL store ([`store::postgres`]) and transactional enqueue on a `PgConnection` |
//! | `sqlite` | on | the SQLite store ([`store::sqlite`]) and transactional enqueue on a `SqliteConnection` |
//! | `test-util` | off | the backend contract suite (`store::contract`), and with `postgres` the database helpers for tests (`testing`) |
//! | `pg-cluster` | off | a throwaway PostgreSQL cluster for fault runs and soak benchmarks (`testing::cluster`; implied by `test-util`) |
//! | `otel` | off | each run's span linked (never parented) to the item's `traceparent`, exported over OTLP as the `OTEL_*` variables say; off, nothing of it is compiled |
//!
//! Build only the backend you use with `default-features = false,
//! features = ["postgres"]` (or `["sqlite"]`); the memory store is always
//! there. A URL naming a backend the build lacks is refused with
//! `InvalidInput` on `database_url`.

pub mod access;
pub mod builtin;
mod defaults;
pub mod events;
pub mod lane;
pub mod maintenance;
pub mod orchestration;
#[cfg(feature = "otel")]
pub mod otel;
pub mod outbox;
pub mod periodic;
pub mod projector;
pub mod queue;
pub mod reconcile;
/// The storage floor (crate `drover-store`): each entity's records, storage
/// trait and pure rules, and the three backends.
pub use drover_store as store;
#[cfg(any(
    all(feature = "test-util", feature = "postgres"),
    feature = "pg-cluster"
))]
pub mod testing;
pub mod vacuum;
pub mod worker;

pub use drover_core::{error, item, jsonl, rules, trace};

// The store's contract suites, at the crate root where `full_contract_suite!`
// and users' tests of custom stores have always named them.
#[cfg(feature = "test-util")]
#[doc(hidden)]
pub use drover_store::{
    __contract_cases, __events_cases, __orchestration_cases, __reconcile_cases,
};
#[cfg(feature = "test-util")]
pub use drover_store::{contract_suite, orchestration_contract_suite, reconcile_contract_suite};

pub use error::{Error, ErrorKind, Result};
pub use item::{InsertResult, Inserted, Item, NewItem, Status};
pub use queue::{JobContext, Kind, Queue};
pub use store::{Backend, ClaimRef, Store, Tx, TxConn};
pub use worker::{Done, Handler, JobError, Outcome, Strategy, Worker};
