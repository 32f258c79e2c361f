//! Helpers for tests, benchmarks and fault runs, each behind a feature:
//!
//! | part | feature | what |
//! |---|---|---|
//! | the items re-exported here | `test-util` with `postgres` | a PostgreSQL server to test against, a fresh, migrated schema per test, and the contract harnesses' spare schemas (emptied and reused) |
//! | [`role_contract`] | `test-util` | the contract cases that drive a role (the relay, the projector runner) against every backend |
//! | [`cluster`] | `pg-cluster` (implied by `test-util`) | a throwaway PostgreSQL cluster (`initdb` + `pg_ctl`) a test or a benchmark owns |

#[cfg(feature = "pg-cluster")]
pub mod cluster;
#[cfg(all(feature = "test-util", feature = "postgres"))]
mod pg;
#[cfg(feature = "test-util")]
pub mod role_contract;
#[cfg(all(feature = "test-util", feature = "postgres"))]
mod spare;
#[cfg(all(feature = "test-util", feature = "postgres"))]
pub use pg::*;
#[cfg(all(feature = "test-util", feature = "postgres"))]
pub use spare::{empty_spare, register_spare};
