//! The shared store contract suite, run against SQLite: a fresh database
//! file per case on a `ManualClock` (see `drover::store::sqlite::sqlite_harness`).

drover::full_contract_suite!(drover::store::sqlite::sqlite_harness);
