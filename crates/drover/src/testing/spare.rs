//! Migrated test schemas kept for the next test: the contract suites'
//! installations, emptied and reused instead of migrated and dropped.
//!
//! A fresh installation is some forty migrations (about 250 relations,
//! roles, policies and functions) and a `DROP SCHEMA ... CASCADE` after the
//! case: 0.42 core-seconds a case on the CI machine, two thirds of what the
//! PostgreSQL contract suite spends. Emptying one that a finished case used
//! truncates only the tables that case wrote.
//!
//! Invariants:
//! - a schema is handed out only with the migrations digest of this binary
//!   ([`postgres_digest`]) and only to one test at a time (`in_use`, taken
//!   with `FOR UPDATE SKIP LOCKED`);
//! - a schema given back is reused only if it is, as far as anything a case
//!   can see, the one its migration left: the same relations, functions,
//!   triggers and policies (any other is dropped instead), every table
//!   emptied and refilled with the rows the migrations wrote, every
//!   sequence set back, all in one transaction of the server's superuser
//!   (so row-level security does not apply to the refill);
//! - anything that goes wrong falls back to what the helpers did before:
//!   drop the schema and its roles, migrate a fresh one.
//!
//! The registry is a table in the test database's own schema
//! `drover_test_spares`; a schema of another digest found free there is
//! dropped by the next test that registers one.

use sqlx::{Connection, Executor, PgConnection, Row};

use crate::store::postgres_digest;

/// The registry's schema and table, created on first use.
const REGISTRY: &str = "drover_test_spares.spares";

/// Creates the registry if missing. Test processes race to create it: an
/// advisory lock orders them, and either outcome leaves it in place.
async fn ensure_registry(conn: &mut PgConnection) -> sqlx::Result<()> {
    conn.execute(
        "DO $$ BEGIN \
         PERFORM pg_advisory_xact_lock(hashtext('drover test spares')); \
         CREATE SCHEMA IF NOT EXISTS drover_test_spares; \
         CREATE TABLE IF NOT EXISTS drover_test_spares.spares ( \
             schema text PRIMARY KEY, \
             digest text NOT NULL, \
             in_use boolean NOT NULL, \
             shape text NOT NULL, \
             tables text[] NOT NULL, \
             seed jsonb NOT NULL, \
             sequences jsonb NOT NULL); \
         END $$",
    )
    .await?;
    Ok(())
}

/// A free spare schema of this binary's migrations that still exists (one
/// dropped by hand is passed over), now marked in use, or `None` (none
/// free, or the server refused: the caller migrates a fresh one).
pub(super) async fn take(admin_url: &str) -> Option<String> {
    let taken = async {
        let mut conn = PgConnection::connect(admin_url).await?;
        ensure_registry(&mut conn).await?;
        let schema: Option<String> = sqlx::query_scalar(&format!(
            "UPDATE {REGISTRY} SET in_use = true WHERE schema = \
             (SELECT s.schema FROM {REGISTRY} s WHERE NOT s.in_use AND s.digest = $1 \
                AND EXISTS (SELECT 1 FROM pg_namespace n WHERE n.nspname = s.schema) \
              LIMIT 1 FOR UPDATE OF s SKIP LOCKED) RETURNING schema"
        ))
        .bind(postgres_digest())
        .fetch_optional(&mut conn)
        .await?;
        conn.close().await?;
        Ok::<_, sqlx::Error>(schema)
    }
    .await;
    taken.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "no spare test schema (migrating a fresh one)");
        None
    })
}

/// Records `schema`, migrated a moment ago and not yet used, as a spare in
/// use: its shape, its tables, the rows its migrations wrote and its
/// sequences, which [`empty_spare`] restores. Then drops up to four free
/// spares of other digests (left by an earlier build). Logs on failure: the
/// schema is then dropped at the test's end, as before.
pub async fn register_spare(admin_url: &str, schema: &str) {
    let registered = async {
        let mut conn = PgConnection::connect(admin_url).await?;
        ensure_registry(&mut conn).await?;
        let tables = tables(&mut conn, schema).await?;
        let filled = non_empty(&mut conn, schema, &tables).await?;
        let mut seed = serde_json::Map::new();
        for table in filled.iter().filter(|t| *t != "_sqlx_migrations") {
            let rows: serde_json::Value = sqlx::query_scalar(&format!(
                "SELECT jsonb_agg(to_jsonb(t)) FROM {} t",
                qualified(schema, table)
            ))
            .fetch_one(&mut conn)
            .await?;
            seed.insert(table.clone(), rows);
        }
        let sequences: serde_json::Value = sequences(&mut conn, schema).await?;
        sqlx::query(&format!(
            "INSERT INTO {REGISTRY} (schema, digest, in_use, shape, tables, seed, sequences) \
             VALUES ($1, $2, true, $3, $4, $5, $6)"
        ))
        .bind(schema)
        .bind(postgres_digest())
        .bind(shape(&mut conn, schema).await?)
        .bind(&tables)
        .bind(serde_json::Value::Object(seed))
        .bind(sequences)
        .execute(&mut conn)
        .await?;
        let stale: Vec<String> = sqlx::query_scalar(&format!(
            "DELETE FROM {REGISTRY} WHERE schema IN (SELECT schema FROM {REGISTRY} \
             WHERE NOT in_use AND digest <> $1 LIMIT 4 FOR UPDATE SKIP LOCKED) RETURNING schema"
        ))
        .bind(postgres_digest())
        .fetch_all(&mut conn)
        .await?;
        for old in stale {
            crate::store::postgres::drop_installation(&mut conn, &old)
                .await
                .map_err(|e| sqlx::Error::Protocol(e.to_string()))?;
        }
        conn.close().await?;
        Ok::<_, sqlx::Error>(())
    }
    .await;
    if let Err(e) = registered {
        tracing::warn!(schema, error = %e, "not keeping the test schema as a spare");
    }
}

/// Empties `schema` back to what its migrations left and frees it for the
/// next test, over one connection. False when it is not a registered spare
/// or cannot be put back exactly: the caller drops it (and the registry row
/// is gone).
pub(super) async fn give_back(admin_url: &str, schema: &str) -> bool {
    let given = async {
        let mut conn = PgConnection::connect(admin_url).await?;
        let kept = empty_on(&mut conn, schema).await;
        let free = if kept {
            format!("UPDATE {REGISTRY} SET in_use = false WHERE schema = $1")
        } else {
            format!("DELETE FROM {REGISTRY} WHERE schema = $1")
        };
        sqlx::query(&free).bind(schema).execute(&mut conn).await?;
        conn.close().await?;
        Ok::<_, sqlx::Error>(kept)
    }
    .await;
    given.unwrap_or_else(|e| {
        tracing::warn!(schema, error = %e, "giving back a spare test schema failed");
        false
    })
}

/// Empties the spare `schema`, in use by the caller, back to what its
/// migrations left (see the module's invariants); it stays in use. False
/// when it is not a registered spare in use, or its shape changed, or the
/// server refused: nothing was changed then.
pub async fn empty_spare(admin_url: &str, schema: &str) -> bool {
    match PgConnection::connect(admin_url).await {
        Ok(mut conn) => {
            let emptied = empty_on(&mut conn, schema).await;
            let _ = conn.close().await;
            emptied
        }
        Err(e) => {
            tracing::warn!(schema, error = %e, "a spare test schema could not be emptied");
            false
        }
    }
}

/// [`empty_spare`] over `conn`.
async fn empty_on(conn: &mut PgConnection, schema: &str) -> bool {
    let emptied = async {
        let row = sqlx::query(&format!(
            "SELECT shape, tables, seed, sequences FROM {REGISTRY} WHERE schema = $1 AND in_use"
        ))
        .bind(schema)
        .fetch_optional(&mut *conn)
        .await?;
        match row {
            Some(row) => reset(conn, schema, &row).await,
            None => Ok(false),
        }
    }
    .await;
    emptied.unwrap_or_else(|e| {
        tracing::warn!(schema, error = %e, "a spare test schema could not be emptied");
        false
    })
}

/// One transaction: drops the tables a case added (item partitions the
/// purge made ahead of the clock), checks the shape, truncates the tables
/// holding rows and those the migrations filled, refills the latter and
/// sets the sequences back. False, rolled back, when the shape differs.
async fn reset(
    conn: &mut PgConnection,
    schema: &str,
    row: &sqlx::postgres::PgRow,
) -> sqlx::Result<bool> {
    let shape_then: String = row.try_get("shape")?;
    let tables_then: Vec<String> = row.try_get("tables")?;
    let seed: serde_json::Value = row.try_get("seed")?;
    let sequences_then: serde_json::Value = row.try_get("sequences")?;
    let mut tx = conn.begin().await?;
    // A lock a dead case's session still holds would make the TRUNCATE
    // wait: give up and drop instead.
    tx.execute("SET LOCAL lock_timeout = '5s'").await?;
    for table in tables(&mut tx, schema).await? {
        if !tables_then.contains(&table) {
            tx.execute(format!("DROP TABLE {}", qualified(schema, &table)).as_str())
                .await?;
        }
    }
    if shape(&mut tx, schema).await? != shape_then {
        tx.rollback().await?;
        return Ok(false);
    }
    let seeded: Vec<String> = seed
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let mut wipe = non_empty(&mut tx, schema, &tables_then).await?;
    wipe.retain(|t| t != "_sqlx_migrations");
    for t in &seeded {
        if !wipe.contains(t) {
            wipe.push(t.clone());
        }
    }
    if !wipe.is_empty() {
        let list: Vec<String> = wipe.iter().map(|t| qualified(schema, t)).collect();
        tx.execute(format!("TRUNCATE {} RESTART IDENTITY CASCADE", list.join(", ")).as_str())
            .await?;
    }
    for table in &seeded {
        let cols: String = sqlx::query_scalar(
            "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute \
             WHERE attrelid = format('%I.%I', $1::text, $2::text)::regclass \
               AND attnum > 0 AND NOT attisdropped AND attgenerated = ''",
        )
        .bind(schema)
        .bind(table)
        .fetch_one(&mut *tx)
        .await?;
        let name = qualified(schema, table);
        sqlx::query(&format!(
            "INSERT INTO {name} ({cols}) OVERRIDING SYSTEM VALUE \
             SELECT {cols} FROM jsonb_populate_recordset(NULL::{name}, $1)"
        ))
        .bind(&seed[table.as_str()])
        .execute(&mut *tx)
        .await?;
    }
    if let Some(seqs) = sequences_then.as_object() {
        for (seq, v) in seqs {
            sqlx::query("SELECT setval(format('%I.%I', $1::text, $2::text)::regclass, $3, $4)")
                .bind(schema)
                .bind(seq)
                .bind(v["last_value"].as_i64().unwrap_or(1))
                .bind(v["is_called"].as_bool().unwrap_or(false))
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await?;
    Ok(true)
}

/// The tables of `schema` (plain and partitioned, partitions included).
async fn tables(conn: &mut PgConnection, schema: &str) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY 1",
    )
    .bind(schema)
    .fetch_all(conn)
    .await
}

/// Which of `tables` (plain ones: a partitioned table holds no rows of its
/// own) hold a row, in one round trip.
async fn non_empty(
    conn: &mut PgConnection,
    schema: &str,
    tables: &[String],
) -> sqlx::Result<Vec<String>> {
    let plain: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname = ANY($2)",
    )
    .bind(schema)
    .bind(tables)
    .fetch_all(&mut *conn)
    .await?;
    if plain.is_empty() {
        return Ok(Vec::new());
    }
    let probes: Vec<String> = plain
        .iter()
        .map(|t| {
            format!(
                "SELECT {}::text AS t WHERE EXISTS (SELECT 1 FROM {})",
                quote_literal(t),
                qualified(schema, t)
            )
        })
        .collect();
    sqlx::query_scalar(&probes.join(" UNION ALL "))
        .fetch_all(conn)
        .await
}

/// What a case must not have changed: the counts of the schema's relations
/// by kind, functions, triggers and policies, and the names of its indexes.
async fn shape(conn: &mut PgConnection, schema: &str) -> sqlx::Result<String> {
    sqlx::query_scalar(
        "SELECT concat_ws(' ', \
           (SELECT string_agg(relkind || ':' || n, ',' ORDER BY relkind) FROM \
              (SELECT c.relkind::text, count(*) AS n FROM pg_class c \
               WHERE c.relnamespace = ns.oid GROUP BY 1) k), \
           (SELECT count(*) FROM pg_proc p WHERE p.pronamespace = ns.oid), \
           (SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid \
              WHERE c.relnamespace = ns.oid), \
           (SELECT count(*) FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid \
              WHERE c.relnamespace = ns.oid), \
           (SELECT md5(string_agg(c.relname, ',' ORDER BY c.relname)) FROM pg_class c \
              WHERE c.relnamespace = ns.oid AND c.relkind IN ('i', 'I'))) \
         FROM pg_namespace ns WHERE ns.nspname = $1",
    )
    .bind(schema)
    .fetch_one(conn)
    .await
}

/// Each sequence of `schema` with its `last_value` and `is_called`.
async fn sequences(conn: &mut PgConnection, schema: &str) -> sqlx::Result<serde_json::Value> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = $1 AND c.relkind = 'S'",
    )
    .bind(schema)
    .fetch_all(&mut *conn)
    .await?;
    let mut out = serde_json::Map::new();
    for name in names {
        let state: serde_json::Value = sqlx::query_scalar(&format!(
            "SELECT jsonb_build_object('last_value', last_value, 'is_called', is_called) FROM {}",
            qualified(schema, &name)
        ))
        .fetch_one(&mut *conn)
        .await?;
        out.insert(name, state);
    }
    Ok(serde_json::Value::Object(out))
}

/// `schema.table`, both quoted.
fn qualified(schema: &str, table: &str) -> String {
    format!("{}.{}", quote_ident(schema), quote_ident(table))
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
