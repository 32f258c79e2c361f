//! The shared store contract suite, run against PostgreSQL (a fresh schema
//! per case).

drover::full_contract_suite!(drover::testing::pg_harness);
