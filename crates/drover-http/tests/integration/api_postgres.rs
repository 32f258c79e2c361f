//! The HTTP API cases against PostgreSQL (a fresh schema per case).
mod api_cases;
mod common;
api_suite!(common::postgres);
