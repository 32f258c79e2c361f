//! The worker routes' cases against the memory store.
mod common;
mod work_cases;
work_suite!(common::memory);
