//! The checker: what the effect tables and the queue's own rows say about a
//! run, as a struct of figures.
//!
//! | figure | from |
//! |---|---|
//! | `lost` | items (every enqueue committed before the run) not in a final status after the recovery window |
//! | `duplicate_completions` | items with more than one accepted transition into a final status (the `transitions` trigger) |
//! | `stale_effect_writes_accepted` | `effect_log` rows that changed a row with a token lower than one already started for the item, or without a live claim |
//! | `stale_queue_writes_accepted` | (PostgreSQL) updates of a claimed row by a process other than its holder, other than a sweep rescue of a passed lease; and sweep rescues of a lease that had not passed |
//! | `effects_mismatch` | done `effects.write` and `effects.grouped` items whose effect row is missing or carries another fencing number than the completing claim |
//! | `duplicate_executions` | handler starts beyond one per item |

use chrono::{DateTime, Utc};
use sqlx::{PgPool, Row, SqlitePool};

/// The figures of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// Items enqueued.
    pub enqueued: i64,
    /// Items done.
    pub done: i64,
    /// Items in the dead letter.
    pub dead: i64,
    /// Items not in a final status.
    pub lost: i64,
    /// Items with more than one accepted final transition.
    pub duplicate_completions: i64,
    /// Effect writes that changed a row under a superseded token.
    pub stale_effect_writes_accepted: i64,
    /// Queue writes by a stale holder that changed a row (PostgreSQL only).
    pub stale_queue_writes_accepted: i64,
    /// Done items whose effect is missing or from another claim.
    pub effects_mismatch: i64,
    /// Handler starts beyond one per item.
    pub duplicate_executions: i64,
    /// Handler starts.
    pub starts: i64,
}

impl Figures {
    /// Stale writes accepted, queue and effects together.
    pub fn stale_writes_accepted(&self) -> i64 {
        self.stale_effect_writes_accepted + self.stale_queue_writes_accepted
    }

    /// Panics unless the run kept every promise that holds under any fault:
    /// nothing lost, no duplicate completion, no stale write accepted, every
    /// effect matching its item's final state.
    pub fn assert_promises_kept(&self) {
        assert_eq!(self.lost, 0, "lost: {self:?}");
        assert_eq!(
            self.duplicate_completions, 0,
            "duplicate completions: {self:?}"
        );
        assert_eq!(
            self.stale_writes_accepted(),
            0,
            "stale writes accepted: {self:?}"
        );
        assert_eq!(self.effects_mismatch, 0, "effects mismatch: {self:?}");
    }

    /// One table row for `docs/reliability.md`.
    pub fn row(&self) -> String {
        format!(
            "enqueued {} | done {} | dead {} | lost {} | dup completions {} | stale accepted {} (effects {}, queue {}) | effects mismatch {} | dup executions {} | starts {}",
            self.enqueued,
            self.done,
            self.dead,
            self.lost,
            self.duplicate_completions,
            self.stale_writes_accepted(),
            self.stale_effect_writes_accepted,
            self.stale_queue_writes_accepted,
            self.effects_mismatch,
            self.duplicate_executions,
            self.starts
        )
    }
}

const FINAL: &str = "('done', 'failed', 'cancelled')";

async fn pg_count(pool: &PgPool, sql: &str) -> Result<i64, sqlx::Error> {
    let n: Option<i64> = sqlx::query_scalar(sql).fetch_one(pool).await?;
    Ok(n.unwrap_or(0))
}

/// The figures of a PostgreSQL run in `schema`.
///
/// # Errors
/// The database's.
pub async fn pg_figures(pool: &PgPool, schema: &str) -> Result<Figures, sqlx::Error> {
    let s = format!("\"{schema}\"");
    Ok(Figures {
        enqueued: pg_count(pool, &format!("SELECT count(*) FROM {s}.items")).await?,
        done: pg_count(pool, &format!("SELECT count(*) FROM {s}.items WHERE status = 'done'")).await?,
        dead: pg_count(pool, &format!("SELECT count(*) FROM {s}.items WHERE status = 'failed'")).await?,
        lost: pg_count(pool, &format!("SELECT count(*) FROM {s}.items WHERE status NOT IN {FINAL}")).await?,
        duplicate_completions: pg_count(pool, &format!(
            "SELECT count(*) FROM (SELECT item_id FROM {s}.transitions \
             WHERE new_status IN {FINAL} AND old_status IS DISTINCT FROM new_status \
             GROUP BY item_id HAVING count(*) > 1) d")).await?,
        stale_effect_writes_accepted: pg_count(pool, &format!(
            "SELECT count(*) FROM {s}.effect_log e WHERE e.changed AND (NOT e.claim_ok OR EXISTS ( \
             SELECT 1 FROM {s}.starts st WHERE st.item_id = e.item_id \
             AND st.fencing_token > e.fencing_token AND st.seq < e.seq))")).await?,
        stale_queue_writes_accepted: pg_count(pool, &format!(
            "SELECT count(*) FROM {s}.transitions t WHERE t.old_status = 'claimed' AND t.writer LIKE 'fw-%' AND ( \
               (t.last_error = 'lease expired' AND t.new_status IN ('pending', 'failed') AND t.old_lease > t.tx_now) \
               OR (NOT (t.last_error = 'lease expired' AND t.new_status IN ('pending', 'failed')) \
                   AND split_part(t.old_holder, ':', 2) <> split_part(t.writer, '-', 2)))")).await?,
        effects_mismatch: pg_count(pool, &format!(
            "SELECT count(*) FROM {s}.items i WHERE i.status = 'done' AND i.kind IN ('effects.write', 'effects.grouped') \
             AND NOT EXISTS (SELECT 1 FROM {s}.effects e WHERE e.item_id = i.id AND e.fencing_token = i.claim_seq)")).await?,
        duplicate_executions: pg_count(pool, &format!(
            "SELECT sum(n - 1)::bigint FROM (SELECT count(*) n FROM {s}.starts GROUP BY item_id) c")).await?,
        starts: pg_count(pool, &format!("SELECT count(*) FROM {s}.starts")).await?,
    })
}

/// What one kill left behind.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KillFigures {
    /// Items the killed process had started under a claim it still held at
    /// the kill.
    pub in_flight: i64,
    /// Of those, items still not final.
    pub unrecovered: i64,
    /// The longest time from the kill to such an item's final transition,
    /// over the items no later fault hit again (see `rehit`).
    pub recovery_secs: f64,
    /// Items that, once handed back, were claimed again and that later
    /// claim also ended unfinished (its process killed in turn, or its lease
    /// lost on a live process), whether or not it had started: a new fault,
    /// whose recovery is measured from there, not from this kill.
    pub rehit: i64,
    /// The longest time from the kill to such an item's hand-back: the
    /// first write that ends the claim the killed process held (a sweep
    /// rescue). Items whose claim had already ended before the kill (a
    /// lease lost on the then-live process) are not the kill's.
    pub handback_secs: f64,
}

/// The figures of one kill of process `pid` at `at` (PostgreSQL).
///
/// # Errors
/// The database's.
pub async fn pg_kill_figures(
    pool: &PgPool,
    schema: &str,
    pid: u32,
    at: DateTime<Utc>,
) -> Result<KillFigures, sqlx::Error> {
    let s = format!("\"{schema}\"");
    let sql = format!(
        "WITH hit AS (SELECT DISTINCT st.item_id, st.fencing_token FROM {s}.starts st WHERE st.pid = $1 AND st.at <= $2 \
           AND NOT EXISTS (SELECT 1 FROM {s}.transitions t WHERE t.item_id = st.item_id \
             AND t.old_seq = st.fencing_token AND t.old_status = 'claimed' AND t.new_status <> 'claimed' AND t.at <= $2)), \
         fin AS (SELECT hit.item_id, (SELECT min(t.at) FROM {s}.transitions t WHERE t.item_id = hit.item_id \
             AND t.new_status IN {FINAL} AND t.old_status IS DISTINCT FROM t.new_status) AS done_at, \
             (SELECT min(t.at) FROM {s}.transitions t WHERE t.item_id = hit.item_id AND t.old_seq = hit.fencing_token \
             AND t.old_status = 'claimed' AND t.new_status <> 'claimed') AS back_at, \
             EXISTS (SELECT 1 FROM {s}.transitions t2 WHERE t2.item_id = hit.item_id \
               AND t2.old_status = 'claimed' AND t2.new_status = 'pending' AND t2.old_seq > hit.fencing_token) AS rehit FROM hit) \
         SELECT count(*) AS in_flight, count(*) FILTER (WHERE done_at IS NULL) AS unrecovered, \
           count(*) FILTER (WHERE rehit) AS rehit, \
           coalesce(max(extract(epoch FROM done_at - $2)) FILTER (WHERE NOT rehit), 0)::float8 AS recovery, \
           coalesce(max(extract(epoch FROM back_at - $2))::float8, 0) AS handback FROM fin"
    );
    let r = sqlx::query(&sql)
        .bind(i32::try_from(pid).unwrap_or(i32::MAX))
        .bind(at)
        .fetch_one(pool)
        .await?;
    Ok(KillFigures {
        in_flight: r.try_get("in_flight")?,
        unrecovered: r.try_get("unrecovered")?,
        recovery_secs: r.try_get("recovery")?,
        rehit: r.try_get("rehit")?,
        handback_secs: r.try_get("handback")?,
    })
}

async fn lite_count(pool: &SqlitePool, sql: &str) -> Result<i64, sqlx::Error> {
    let n: Option<i64> = sqlx::query_scalar(sql).fetch_one(pool).await?;
    Ok(n.unwrap_or(0))
}

/// The figures of a SQLite run (no writer identity: `stale_queue_writes_accepted` is 0).
///
/// # Errors
/// The database's.
pub async fn sqlite_figures(pool: &SqlitePool) -> Result<Figures, sqlx::Error> {
    Ok(Figures {
        enqueued: lite_count(pool, "SELECT count(*) FROM items").await?,
        done: lite_count(pool, "SELECT count(*) FROM items WHERE status = 'done'").await?,
        dead: lite_count(pool, "SELECT count(*) FROM items WHERE status = 'failed'").await?,
        lost: lite_count(pool, &format!("SELECT count(*) FROM items WHERE status NOT IN {FINAL}")).await?,
        duplicate_completions: lite_count(pool, &format!(
            "SELECT count(*) FROM (SELECT item_id FROM transitions WHERE new_status IN {FINAL} \
             AND old_status IS NOT new_status GROUP BY item_id HAVING count(*) > 1)")).await?,
        stale_effect_writes_accepted: lite_count(pool,
            "SELECT count(*) FROM effect_log e WHERE e.changed AND (NOT e.claim_ok OR EXISTS ( \
             SELECT 1 FROM starts st WHERE st.item_id = e.item_id \
             AND st.fencing_token > e.fencing_token AND st.at < e.at))").await?,
        stale_queue_writes_accepted: 0,
        effects_mismatch: lite_count(pool,
            "SELECT count(*) FROM items i WHERE i.status = 'done' AND i.kind IN ('effects.write', 'effects.grouped') \
             AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.item_id = i.id AND e.fencing_token = i.claim_seq)").await?,
        duplicate_executions: lite_count(pool,
            "SELECT sum(n - 1) FROM (SELECT count(*) n FROM starts GROUP BY item_id)").await?,
        starts: lite_count(pool, "SELECT count(*) FROM starts").await?,
    })
}

/// The figures of one kill (SQLite; times in microseconds).
///
/// # Errors
/// The database's.
pub async fn sqlite_kill_figures(
    pool: &SqlitePool,
    pid: u32,
    at: DateTime<Utc>,
) -> Result<KillFigures, sqlx::Error> {
    let sql = format!(
        "WITH hit AS (SELECT DISTINCT st.item_id, st.fencing_token FROM starts st WHERE st.pid = ?1 AND st.at <= ?2 \
           AND NOT EXISTS (SELECT 1 FROM transitions t WHERE t.item_id = st.item_id \
             AND t.old_seq = st.fencing_token AND t.old_status = 'claimed' AND t.new_status <> 'claimed' AND t.updated_at <= ?2)), \
         fin AS (SELECT hit.item_id, (SELECT min(t.updated_at) FROM transitions t WHERE t.item_id = hit.item_id \
             AND t.new_status IN {FINAL} AND t.old_status IS NOT t.new_status) AS done_at, \
             (SELECT min(t.updated_at) FROM transitions t WHERE t.item_id = hit.item_id AND t.old_seq = hit.fencing_token \
             AND t.old_status = 'claimed' AND t.new_status <> 'claimed') AS back_at, \
             EXISTS (SELECT 1 FROM transitions t2 WHERE t2.item_id = hit.item_id \
               AND t2.old_status = 'claimed' AND t2.new_status = 'pending' AND t2.old_seq > hit.fencing_token) AS rehit FROM hit) \
         SELECT count(*) AS in_flight, sum(done_at IS NULL) AS unrecovered, coalesce(sum(rehit), 0) AS rehit, \
           coalesce(max(CASE WHEN NOT rehit THEN done_at - ?2 END), 0) AS recovery, coalesce(max(back_at - ?2), 0) AS handback FROM fin"
    );
    let r = sqlx::query(&sql)
        .bind(i64::from(pid))
        .bind(at.timestamp_micros())
        .fetch_one(pool)
        .await?;
    let rec: i64 = r.try_get("recovery")?;
    Ok(KillFigures {
        in_flight: r.try_get("in_flight")?,
        unrecovered: r.try_get::<Option<i64>, _>("unrecovered")?.unwrap_or(0),
        recovery_secs: rec as f64 / 1e6,
        rehit: r.try_get("rehit")?,
        handback_secs: r.try_get::<i64, _>("handback")? as f64 / 1e6,
    })
}

/// Queue writes accepted on a lapsed claim, whoever sent them (PostgreSQL):
/// updates of a claimed row under the same claim (no new claim) that
/// changed it after its lease had passed, other than the sweep's rescue;
/// and sweep rescues of a lease that had not passed. The figure for
/// writers the `transitions` trigger cannot tell apart by process (workers
/// over HTTP all write through the server's connections): by the fence,
/// it must be 0 whoever wrote.
///
/// # Errors
/// The database's.
pub async fn pg_lapsed_writes_accepted(pool: &PgPool, schema: &str) -> Result<i64, sqlx::Error> {
    let s = format!("\"{schema}\"");
    pg_count(
        pool,
        &format!(
            "SELECT count(*) FROM {s}.transitions t WHERE t.old_status = 'claimed' \
             AND t.new_seq = t.old_seq AND ( \
               (t.last_error = 'lease expired' AND t.new_status IN ('pending', 'failed') AND t.old_lease > t.tx_now) \
               OR (NOT (coalesce(t.last_error, '') = 'lease expired' AND t.new_status IN ('pending', 'failed')) \
                   AND t.old_lease <= t.tx_now))"
        ),
    )
    .await
}

/// Queue writes that changed a row `holder` held, after `after`, other
/// than the sweep's rescue (PostgreSQL): a stale worker's late writes
/// that landed. Must be 0 once `holder`'s lease has passed.
///
/// # Errors
/// The database's.
pub async fn pg_holder_writes_after(
    pool: &PgPool,
    schema: &str,
    holder: &str,
    after: DateTime<Utc>,
) -> Result<i64, sqlx::Error> {
    let sql = format!(
        "SELECT count(*) FROM \"{schema}\".transitions t WHERE t.old_status = 'claimed' \
         AND t.old_holder = $1 AND t.at > $2 \
         AND NOT (coalesce(t.last_error, '') = 'lease expired' AND t.new_status IN ('pending', 'failed'))"
    );
    let n: Option<i64> = sqlx::query_scalar(&sql)
        .bind(holder)
        .bind(after)
        .fetch_one(pool)
        .await?;
    Ok(n.unwrap_or(0))
}
