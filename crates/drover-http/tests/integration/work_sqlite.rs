//! The worker routes' cases against the sqlite store.
use crate::common;
use crate::work_suite;
work_suite!(common::sqlite);
