//! The flow settings' generation on SQLite (migration 0046): one row that
//! every change of the rates in force or of the closures moves in its own
//! transaction, and every claim reads on the writer's transaction
//! (`claim.rs`), so that no claim in any process over the file runs on
//! settings older than the last change committed before it.

use sqlx::SqliteConnection;

use drover_core::error::Result;

const FLOW_GEN_READ: &str = include_str!("../../sql/sqlite/flow_gen_read.sql");
const FLOW_GEN_BUMP: &str = include_str!("../../sql/sqlite/flow_gen_bump.sql");

/// The flow settings' generation (migration 0046); `None` on a schema
/// before it (its claims check none, as before).
pub(super) async fn flow_gen_on<'c, E>(conn: E) -> Result<Option<i64>>
where
    E: sqlx::Executor<'c, Database = sqlx::Sqlite>,
{
    match sqlx::query_scalar::<_, i64>(FLOW_GEN_READ)
        .fetch_optional(conn)
        .await
    {
        Ok(g) => Ok(g),
        Err(sqlx::Error::Database(e)) if e.message().contains("no such table") => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Moves the flow settings' generation on the transaction of a change of
/// the rates or closures (nothing on a schema before migration 0046).
pub(super) async fn flow_gen_bump(conn: &mut SqliteConnection) -> Result<()> {
    match sqlx::query(FLOW_GEN_BUMP).execute(conn).await {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.message().contains("no such table") => Ok(()),
        Err(e) => Err(e.into()),
    }
}
