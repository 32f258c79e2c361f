//! The worker routes' cases against the memory store.
use crate::common;
use crate::work_suite;
work_suite!(common::memory);
