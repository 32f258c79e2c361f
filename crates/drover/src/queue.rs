//! The queue API (in progress).
/// Placeholder.
pub struct Queue;
