//! The shared store contract suite against PostgreSQL with the store in
//! transaction-pooler mode (`DROVER_DATABASE_POOLER=transaction`): every
//! statement unnamed and inside an explicit transaction, no startup
//! options. The server is reached directly here, so this checks that the
//! pooler-safe paths keep every rule of the contract; the PgBouncer
//! end-to-end test (drover-cli `tests/integration/pgbouncer.rs`) checks the pooler.

drover::full_contract_suite!(drover::testing::pg_pooled_harness);
