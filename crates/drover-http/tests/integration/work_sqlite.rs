//! The worker routes' cases against the sqlite store.
mod common;
mod work_cases;
work_suite!(common::sqlite);
