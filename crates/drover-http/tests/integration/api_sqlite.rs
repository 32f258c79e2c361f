//! The HTTP API cases against SQLite (a fresh file per case).
mod api_cases;
mod common;
api_suite!(common::sqlite);
