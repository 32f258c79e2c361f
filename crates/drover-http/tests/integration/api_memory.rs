//! The HTTP API cases against the memory store.
use crate::api_suite;
use crate::common;
api_suite!(common::memory);
