//! Memory backend.
