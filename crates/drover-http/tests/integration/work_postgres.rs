//! The worker routes' cases against the postgres store.
mod common;
mod work_cases;
work_suite!(common::postgres);
