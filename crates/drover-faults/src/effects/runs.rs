//! The `runs` table: one row per handler run of `effects.grouped`, from
//! which the limits checker rebuilds who ran what when.
//!
//! A run's start is written first, unfenced, on the database's clock (a
//! start that cannot be written is not run). Its end is written when the
//! handler stops: on the database's clock after the fenced effects write
//! (outcome `done`, or `refused` when the claim was no longer the run's),
//! or when the handler sees its cancellation (`cancelled`). A handler the
//! runtime drops (a lost lease, a shutdown past the grace) writes no end
//! itself; its guard writes one from a task of its own, stamped with the
//! moment of the drop as the worker's host read it (`dropped`): the suite
//! runs the database on the same host, so it is the same clock. A run
//! whose process was killed has no end; the checker then bounds it by the
//! end of its claim.
//!
//! The end is written at most once (`ended_at IS NULL`): a retried write
//! whose first reply was lost changes nothing.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{EffectsDb, Op};

/// How a run ended, as `runs.outcome` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// The fenced effects write was accepted.
    Done,
    /// The fenced effects write was refused: the claim was not the run's
    /// any more.
    Refused,
    /// The handler saw its cancellation and returned.
    Cancelled,
    /// The runtime dropped the handler (its guard wrote the end).
    Dropped,
}

impl RunOutcome {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Done => "done",
            RunOutcome::Refused => "refused",
            RunOutcome::Cancelled => "cancelled",
            RunOutcome::Dropped => "dropped",
        }
    }
}

impl EffectsDb {
    /// Records the start of a run of `op` in `group`; its row id.
    ///
    /// # Errors
    /// The database's.
    pub async fn run_start(&self, op: Op<'_>, group: Option<&str>) -> Result<i64, sqlx::Error> {
        let pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
        match self {
            EffectsDb::Pg { pool, schema } => {
                let sql = format!(
                    r#"INSERT INTO "{schema}".runs (item_id, group_key, fencing_token, pid) VALUES ($1, $2, $3, $4) RETURNING id"#
                );
                sqlx::query_scalar(&sql)
                    .bind(op.item_id)
                    .bind(group)
                    .bind(op.token)
                    .bind(pid)
                    .fetch_one(pool)
                    .await
            }
            EffectsDb::Sqlite(pool) => {
                sqlx::query_scalar(
                    "INSERT INTO runs (item_id, group_key, fencing_token, pid) VALUES (?1, ?2, ?3, ?4) RETURNING id",
                )
                .bind(op.item_id.as_bytes().to_vec())
                .bind(group)
                .bind(op.token)
                .bind(pid)
                .fetch_one(pool)
                .await
            }
        }
    }

    /// Records the end of run `run` (at most once): at `at` when given (a
    /// dropped run), else now on the database's clock.
    ///
    /// # Errors
    /// The database's; the write is idempotent, so the caller may retry.
    pub async fn run_end(
        &self,
        run: i64,
        outcome: RunOutcome,
        at: Option<DateTime<Utc>>,
    ) -> Result<(), sqlx::Error> {
        match self {
            EffectsDb::Pg { pool, schema } => {
                let sql = format!(
                    r#"UPDATE "{schema}".runs SET ended_at = coalesce($3, clock_timestamp()), outcome = $2 WHERE id = $1 AND ended_at IS NULL"#
                );
                sqlx::query(&sql)
                    .bind(run)
                    .bind(outcome.as_str())
                    .bind(at)
                    .execute(pool)
                    .await?;
            }
            EffectsDb::Sqlite(pool) => {
                sqlx::query(
                    "UPDATE runs SET ended_at = coalesce(?3, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)), \
                     outcome = ?2 WHERE id = ?1 AND ended_at IS NULL",
                )
                .bind(run)
                .bind(outcome.as_str())
                .bind(at.map(|t| t.timestamp_micros()))
                .execute(pool)
                .await?;
            }
        }
        Ok(())
    }
}

/// A run's end not yet written: [`RunGuard::end`] writes it; dropped
/// unwritten (the runtime dropped the handler), it writes `dropped` at the
/// moment of the drop from a task of its own.
#[derive(Debug)]
pub struct RunGuard {
    db: EffectsDb,
    run: i64,
    open: bool,
}

/// Attempts at an end write before it is left to the checker's bound (the
/// end of the claim).
const END_ATTEMPTS: u32 = 20;

async fn end_with_retries(
    db: &EffectsDb,
    run: i64,
    outcome: RunOutcome,
    at: Option<DateTime<Utc>>,
) {
    let mut backoff = Duration::from_millis(20);
    for attempt in 1..=END_ATTEMPTS {
        match db.run_end(run, outcome, at).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(error = %e, run, attempt, "run end not written; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
    tracing::error!(
        run,
        "run end never written; the checker bounds the run by its claim"
    );
}

impl RunGuard {
    /// Guards run `run` (as [`EffectsDb::run_start`] returned it).
    pub fn new(db: EffectsDb, run: i64) -> RunGuard {
        RunGuard {
            db,
            run,
            open: true,
        }
    }

    /// Writes the run's end as `outcome`, retrying transient errors. If the
    /// handler is dropped meanwhile, the guard writes `dropped` instead
    /// (whichever lands first stays).
    pub async fn end(mut self, outcome: RunOutcome) {
        end_with_retries(&self.db, self.run, outcome, None).await;
        self.open = false;
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let at = Utc::now();
        let (db, run) = (self.db.clone(), self.run);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(
                async move { end_with_retries(&db, run, RunOutcome::Dropped, Some(at)).await },
            );
        }
    }
}
