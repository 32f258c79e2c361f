//! The HTTP API cases against PostgreSQL (a fresh schema per case).
use crate::api_suite;
use crate::common;
api_suite!(common::postgres);
