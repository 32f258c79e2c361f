//! The worker routes' cases against the postgres store.
use crate::common;
use crate::work_suite;
work_suite!(common::postgres);
