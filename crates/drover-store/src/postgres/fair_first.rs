//! The fair claim's first read made in the statement that locks the lane
//! (PostgreSQL): one round trip less when this process's kept passes are
//! the lane's.
//!
//! # What this module owns
//!
//! [`PgStore::lock_with_first_read`]: the first round's quotas drawn from
//! the passes this process kept ([`PassCache`](crate::fairness::PassCache)),
//! and the lane's row locked, the flow settings' generation and those
//! tenants' candidates read in one statement. Before, the lock (with the
//! generation) and the candidates were two statements (about 0.1 ms of a
//! 2 ms claim went with the round trip saved; `docs/flow-control.md`,
//! "Where a PostgreSQL fair claim's time went, and the plans"). Also the
//! fair claim's transaction with its plan settings
//! ([`GENERIC_INDEX_PLANS`], `begin_system_generic`).
//!
//! # Invariants
//!
//! - The candidates are used only when the locked row still holds the
//!   version token the passes were kept at: then no other fair claim of the
//!   lane (nor the purge) has written since, the passes are the ones the
//!   lock would have read, and the quotas drawn from them are the ones the
//!   claim would have drawn. The statement's snapshot may predate the lock
//!   wait, but a fair claim that committed in that wait moved the token.
//!   An item claimed meanwhile by any other path is skipped by the claim's
//!   own `pending` check, as after a separate read.
//! - With another token the candidates are dropped, the passes read under
//!   the lock (as before), and every round read after it.

use std::sync::LazyLock;

use uuid::Uuid;

use super::PgStore;
use super::fair_rounds::{
    Candidate, FAIR_CANDIDATES, FAIR_LOCK_CTE, FLOW_GEN_COLUMN, Works, candidate_lists, read_round,
    round_caps,
};
use crate::ClaimParams;
use crate::fairness::{Passes, Rounds};
use drover_core::error::Result;

/// The lane's row ($1) locked, its virtual time and token, the flow
/// settings' generation, and the candidates of [`FAIR_CANDIDATES`] ($2
/// tenants, $3 caps, $4 kinds): one row per candidate, or one row without
/// an id when there is none.
static FAIR_LOCK_FIRST: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{FAIR_LOCK_CTE}
SELECT l.pass AS vt, l.started AS version, {FLOW_GEN_COLUMN},
       c.id, c.tenant_id, c.priority, c.available_at
FROM l LEFT JOIN LATERAL ({FAIR_CANDIDATES}) c ON true"
    )
});

/// [`FAIR_LOCK_FIRST`], for the plan tests.
pub fn lock_first_read_sql() -> &'static str {
    FAIR_LOCK_FIRST.as_str()
}

/// The settings of a transaction that keeps one generic plan per
/// statement, as the claim functions of migrations 0036 and 0050 do: a
/// generic plan is made once per session from the statistics of that
/// moment, so without these a plan made while a lane was small (or never
/// analyzed) may be far slower once the lane is large (seen once: a fair
/// claim's lock-and-read at 10,000 tenants x 100, 33 ms mean and 1.36 s
/// at worst, against 0.33 ms with these).
pub const GENERIC_INDEX_PLANS: &str = "SET LOCAL plan_cache_mode = force_generic_plan; \
SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; \
SET LOCAL enable_sort = off; SET LOCAL enable_hashjoin = off; \
SET LOCAL enable_mergejoin = off; SET LOCAL jit = off";

/// A first round already read: the rounds after it, the tenants it drew
/// (with their quotas and caps) and what it read for them.
pub(super) struct FirstRound {
    pub(super) rounds: Rounds,
    pub(super) fresh: Vec<(Uuid, u32, i64)>,
    pub(super) lists: Works<Candidate>,
}

/// What [`PgStore::lock_with_first_read`] answers: the passes, the flow
/// settings' generation, and the first round when it could be kept.
type Locked = (Passes, Option<i64>, Option<FirstRound>);

impl PgStore {
    /// [`PgStore::begin_system`] whose statements keep one generic plan
    /// each, made to walk the indexes ([`GENERIC_INDEX_PLANS`], in the same
    /// round trip as the BEGIN). For a transaction of statements over
    /// arrays whose lengths change call to call: PostgreSQL judged a custom
    /// plan cheaper for the fair claim's lock-and-read and made one at
    /// every run, 0.37 ms of planning for 0.09 ms of work
    /// (pg_stat_statements with track_planning, 1,119 plans in 1,317 runs).
    pub(super) async fn begin_system_generic(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        let sql = self.system_begin_sql().await?;
        let sql = format!("{sql}; {GENERIC_INDEX_PLANS}");
        crate::begin::begin(&self.system_pool, sql).await
    }

    /// Locks `p`'s lane and reads the generation and, with the passes
    /// `kept` (a version token and the passes kept at it), the first
    /// round's candidates of `alive` in the same statement (see the module
    /// docs).
    pub(super) async fn lock_with_first_read(
        &self,
        tx: &mut sqlx::PgConnection,
        p: &ClaimParams,
        alive: &[(Uuid, u32)],
        kept: (i64, Passes),
    ) -> Result<Locked> {
        use sqlx::Row;
        let (kept_version, kept_passes) = kept;
        let mut rounds = Rounds::new(alive.to_vec());
        let fresh = round_caps(&mut rounds, &kept_passes, p.limit);
        let (ts, rows) = read_round(tx, &FAIR_LOCK_FIRST, self.persistent, p, &fresh).await?;
        // The CTE's one row is on every row of the answer, and there is at
        // least one (a LEFT JOIN).
        let Some(first) = rows.first() else {
            return Err(sqlx::Error::RowNotFound.into());
        };
        let vt: i64 = first.try_get("vt")?;
        let version: i64 = first.try_get("version")?;
        let now_gen: Option<i64> = first.try_get("gen")?;
        if version == kept_version {
            let lists = candidate_lists(&ts, &rows)?;
            let first = FirstRound {
                rounds,
                fresh,
                lists,
            };
            return Ok((kept_passes, now_gen, Some(first)));
        }
        let passes = self.passes_at(tx, &p.lane, vt, version).await?;
        Ok((passes, now_gen, None))
    }
}
