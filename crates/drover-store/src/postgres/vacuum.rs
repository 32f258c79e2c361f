//! The paced vacuum's seam on PostgreSQL ([`VacuumStore`]): the garbage of
//! the schema's tables from `pg_stat_user_tables`, and `VACUUM
//! (SKIP_LOCKED)` of one of them.
//!
//! Every statement goes over the simple protocol on the main pool, outside
//! any transaction and as the connecting login (no `SET ROLE`): `VACUUM`
//! cannot run in a transaction, only a table's owner (or the database's, or
//! a superuser) may vacuum it, and the login that migrated owns the tables.
//! One statement per round trip, no session state: pooler-safe. The only
//! text spliced in is the schema (validated at construction) and a table
//! name checked against the same pattern before anything is sent.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{Executor, Row};

use super::{PgStore, quote_ident, sql, validate_schema};
use crate::vacuum::{TableGarbage, TableVacuum, VacuumStore};
use drover_core::error::{Error, Result};

/// A row of `table_garbage.sql` or `table_vacuum_after.sql`.
fn garbage(row: &PgRow) -> Result<TableGarbage> {
    let live: i64 = row.try_get("live")?;
    let dead: i64 = row.try_get("dead")?;
    let at: Option<i64> = row.try_get("last_vacuum_us")?;
    Ok(TableGarbage {
        table: row.try_get("table_name")?,
        live: u64::try_from(live).unwrap_or(0),
        dead: u64::try_from(dead).unwrap_or(0),
        last_vacuum: at.and_then(DateTime::<Utc>::from_timestamp_micros),
    })
}

/// Every table of the schema with its garbage.
pub(super) async fn table_garbage(store: &PgStore) -> Result<Vec<TableGarbage>> {
    let sql = sql::TABLE_GARBAGE.replace("{schema}", &store.schema);
    let rows = store.pool.fetch_all(sql.as_str()).await?;
    rows.iter().map(garbage).collect()
}

/// Vacuums `table` after checking it is the schema's and the login may.
pub(super) async fn table_vacuum(store: &PgStore, table: &str) -> Result<TableVacuum> {
    let not_found = || Error::NotFound(format!("no table {table:?} in schema {}", store.schema));
    // drover's table names have the schema's shape; anything else is not
    // one of them, and is never spliced.
    if validate_schema(table).is_err() {
        return Err(not_found());
    }
    let splice = |q: &str| {
        q.replace("{schema}", &store.schema)
            .replace("{table}", table)
    };
    let check = splice(sql::TABLE_VACUUM_CHECK);
    let Some(row) = store.pool.fetch_optional(check.as_str()).await? else {
        return Err(not_found());
    };
    let may: bool = row.try_get("may_vacuum")?;
    if !may {
        return Err(Error::Forbidden(format!(
            "permission denied: this login may not vacuum {}.{table} (only its owner, the \
             database's owner or a superuser may; connect as the login that migrated)",
            store.schema
        )));
    }
    let before: i64 = row.try_get("vacuums")?;
    let name = format!("{}.{}", quote_ident(&store.schema), quote_ident(table));
    let vacuum = sql::TABLE_VACUUM.replace("{table}", &name);
    sqlx::raw_sql(&vacuum).execute(&store.pool).await?;
    let after = splice(sql::TABLE_VACUUM_AFTER);
    let Some(row) = store.pool.fetch_optional(after.as_str()).await? else {
        // Dropped meanwhile.
        return Err(not_found());
    };
    let vacuums: i64 = row.try_get("vacuums")?;
    Ok(TableVacuum {
        vacuumed: vacuums > before,
        after: garbage(&row)?,
    })
}

#[async_trait]
impl VacuumStore for PgStore {
    async fn table_garbage(&self) -> Result<Vec<TableGarbage>> {
        table_garbage(self).await
    }

    async fn table_vacuum(&self, table: &str) -> Result<TableVacuum> {
        table_vacuum(self, table).await
    }
}
