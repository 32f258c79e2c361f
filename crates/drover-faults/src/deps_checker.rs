//! The dependency checker: from the recorded history of a PostgreSQL run,
//! the dependants whose handler started before all their dependencies were
//! done, and the batches whose callback was enqueued other than once.
//!
//! Both histories share one sequence (`fault_seq`): a dependency's `done`
//! transition takes its number inside the finishing transaction, before
//! it commits, and a start takes its number when the handler begins. A
//! dependant released by that commit therefore starts with a higher
//! number; a start numbered below its dependency's `done` (or with no
//! `done` at all) is a start before the dependency was done.

use sqlx::PgPool;

/// Handler starts of dependants made before one of their dependencies had
/// a recorded `done` transition.
///
/// # Errors
/// The database's.
pub async fn pg_started_early(pool: &PgPool, schema: &str) -> Result<i64, sqlx::Error> {
    let s = format!("\"{schema}\"");
    let n: Option<i64> = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {s}.starts st \
         WHERE EXISTS (SELECT 1 FROM {s}.item_deps e WHERE e.item_id = st.item_id \
           AND NOT EXISTS (SELECT 1 FROM {s}.transitions t \
             WHERE t.item_id = e.dep_id AND t.new_status = 'done' \
               AND t.old_status IS DISTINCT FROM t.new_status AND t.seq < st.seq))"
    ))
    .fetch_one(pool)
    .await?;
    Ok(n.unwrap_or(0))
}

/// Finished batches whose callback item does not exist exactly once (a
/// batch whose `when` did not hold has none, and is not counted), plus
/// batches with every member final and sealed that never fired.
///
/// # Errors
/// The database's.
pub async fn pg_callbacks_not_once(pool: &PgPool, schema: &str) -> Result<i64, sqlx::Error> {
    let s = format!("\"{schema}\"");
    let n: Option<i64> = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM {s}.batches b \
         WHERE (b.fired AND (b.fire_when = 'always' \
                  OR (b.fire_when = 'success' AND b.failed + b.cancelled = 0) \
                  OR (b.fire_when = 'failure' AND b.failed + b.cancelled > 0)) \
                AND (SELECT count(*) FROM {s}.items i WHERE i.id = b.callback_id) <> 1) \
            OR (b.sealed AND NOT b.fired AND NOT EXISTS ( \
                  SELECT 1 FROM {s}.batch_members m JOIN {s}.items i ON i.id = m.item_id \
                  WHERE m.batch_id = b.id AND i.status NOT IN ('done', 'failed', 'cancelled')))"
    ))
    .fetch_one(pool)
    .await?;
    Ok(n.unwrap_or(0))
}
