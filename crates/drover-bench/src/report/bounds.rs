//! What `drover bench --bounds` found ([`BoundsFigures`], the report's
//! `bounds` field): the raw insert and drain rates of plain SQL on a table
//! shaped like drover's items, and drover's standard rates over them.
//!
//! Rates are rows (items) per second, durations seconds.

use std::io::Write;

use serde::Serialize;

/// The raw bounds of the standard workload, measured in its sandbox after
/// its phases.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BoundsFigures {
    /// Rows inserted, then drained (`--jobs`).
    pub rows: u64,
    /// Rows per `INSERT … SELECT FROM unnest(…)` statement.
    pub insert_batch: usize,
    /// Wall time of the inserts (one session, statements in sequence), s.
    pub raw_insert_s: f64,
    /// `rows / raw_insert_s`.
    pub raw_insert_rate: f64,
    /// Sessions draining in parallel.
    pub drain_sessions: usize,
    /// Rows per claim.
    pub claim_batch: usize,
    /// Wall time of the drain (claim and mark-done transactions until no
    /// row is left pending), s.
    pub raw_drain_s: f64,
    /// `rows / raw_drain_s`.
    pub raw_drain_rate: f64,
    /// Claim transactions that returned rows, over both sessions.
    pub claims: u64,
    /// Rows found done afterwards (every row, or the drain lost some).
    pub rows_done: i64,
    /// drover's bulk enqueue rate over the raw insert rate.
    pub enqueue_ratio: Option<f64>,
    /// drover's drain rate over the raw drain rate.
    pub drain_ratio: Option<f64>,
}

impl BoundsFigures {
    /// Writes the figures as rows of the standard table.
    ///
    /// # Errors
    /// Output errors.
    pub fn write_table(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let ratio = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |r| format!("{r:.3}"));
        writeln!(
            out,
            "  {:<24} {:.0} rows/s ({} rows, {} per INSERT, one session; {:.3} s)",
            "raw insert bound",
            self.raw_insert_rate,
            self.rows,
            self.insert_batch,
            self.raw_insert_s
        )?;
        writeln!(
            out,
            "  {:<24} {:.0} rows/s ({} sessions, claim {} then mark done; {:.3} s; {} done)",
            "raw drain bound",
            self.raw_drain_rate,
            self.drain_sessions,
            self.claim_batch,
            self.raw_drain_s,
            self.rows_done
        )?;
        writeln!(
            out,
            "  {:<24} enqueue {} / drain {}",
            "drover / raw",
            ratio(self.enqueue_ratio),
            ratio(self.drain_ratio)
        )
    }
}
