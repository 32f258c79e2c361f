//! The shared store contract suite, run against PostgreSQL (a fresh schema
//! per case).

drover::contract_suite!(drover::testing::pg_harness);
drover::orchestration_contract_suite!(drover::testing::pg_harness);
drover::outbox_contract_suite!(drover::testing::pg_harness);
drover::events_contract_suite!(drover::testing::pg_harness);
