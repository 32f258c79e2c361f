//! The HTTP API cases against the memory store.
mod api_cases;
mod common;
api_suite!(common::memory);
