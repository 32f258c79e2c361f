//! One module per command. Each exposes its clap arguments (`XArgs`) and
//! `run(args, cx)`, which checks every argument before it asks the
//! [`Context`](crate::Context) for the queue, so refused input never
//! touches the database.

// `drover bench` is compiled only with the `bench` feature (it pulls in
// drover-bench, plotters and the throwaway-cluster manager); without it the
// same path names a stub that says how to build it, so `Command` and
// `execute` read the same either way.
pub mod batches;
#[cfg(feature = "bench")]
pub mod bench;
#[cfg(not(feature = "bench"))]
#[path = "bench_absent.rs"]
pub mod bench;
pub mod cancel;
pub mod closures;
pub mod demo;
pub mod enqueue;
pub mod env_example;
pub mod events;
pub mod fairness;
pub mod handlers;
pub mod healthcheck;
pub mod import;
pub mod lane;
pub mod limits;
pub mod list;
pub mod migrate;
pub mod orchestrations;
pub mod outbox;
pub mod projector;
pub mod reconcile;
pub mod retry;
pub mod schedules;
// `drover serve` and `drover token` are compiled only with the `http`
// feature (default on; the demo build turns it off): without it both paths
// name one stub that says how to build them.
#[cfg(feature = "http")]
pub mod serve;
#[cfg(not(feature = "http"))]
#[path = "http_absent.rs"]
pub mod serve;
pub mod show;
pub mod signal;
pub mod stats;
#[cfg(feature = "http")]
pub mod token;
#[cfg(not(feature = "http"))]
pub use serve as token;
pub mod vacuum;
pub mod worker;
