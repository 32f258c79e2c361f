//! The flow settings' generation on PostgreSQL (migration 0046): one row
//! that every change of the rates in force or of the closures moves in its
//! own transaction, and every claim reads (`claim_gen.rs`), so that no
//! claim runs on settings older than the last change committed before it.

use drover_core::error::Result;

const FLOW_GEN_READ: &str = include_str!("../../sql/postgres/flow_gen_read.sql");
const FLOW_GEN_BUMP: &str = include_str!("../../sql/postgres/flow_gen_bump.sql");

/// The flow settings' generation (migration 0046) on `conn`; `None` on a
/// schema before it (a binary ahead of its database: its claims check
/// none, as before).
pub(super) async fn flow_gen_on(
    conn: &mut sqlx::PgConnection,
    persistent: bool,
) -> Result<Option<i64>> {
    match sqlx::query_scalar::<_, i64>(FLOW_GEN_READ)
        .persistent(persistent)
        .fetch_optional(conn)
        .await
    {
        Ok(g) => Ok(g),
        Err(e) if super::undefined_table(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Moves the flow settings' generation on the transaction of a change of
/// the rates or closures (nothing on a schema before migration 0046).
pub(super) async fn flow_gen_bump(conn: &mut sqlx::PgConnection, persistent: bool) -> Result<()> {
    match sqlx::query(FLOW_GEN_BUMP)
        .persistent(persistent)
        .execute(conn)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if super::undefined_table(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
