//! The HTTP API cases against SQLite (a fresh file per case).
use crate::api_suite;
use crate::common;
api_suite!(common::sqlite);
