//! The fault suite's projector process: a projector whose projection lives
//! in the same PostgreSQL database (per-topic counts and sums, and the last
//! position applied per tenant), run by drover's [`ProjectorRunner`] until
//! the process is killed.
//!
//! The scenario (`tests/integration/projector_kill.rs`) kills it with SIGKILL while it
//! applies and checks that the final projection equals a from-scratch
//! rebuild and that the checkpoint is never ahead of the projection: the
//! last position the projection recorded is always the checkpoint.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clap::Parser;
use drover::events::Event;
use drover::projector::{
    ProjectionTx, Projector, ProjectorConfig, ProjectorRunner, ProjectorStrategy,
};
use drover::store::Store;
use drover::store::postgres::{PgOptions, PgStore};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The projector's name (its checkpoint rows).
pub const NAME: &str = "fault_totals";

/// The projection's tables in `schema`.
pub fn setup_sql(schema: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS \"{schema}\".fault_totals (tenant_id uuid NOT NULL, topic text NOT NULL, \
         n bigint NOT NULL, total bigint NOT NULL, PRIMARY KEY (tenant_id, topic)); \
         CREATE TABLE IF NOT EXISTS \"{schema}\".fault_last (tenant_id uuid PRIMARY KEY, position bigint NOT NULL);"
    )
}

/// Counts events per topic, sums their payload's `v`, records the last
/// position applied.
pub struct Totals {
    upsert: String,
    last: String,
    reset_totals: String,
    reset_last: String,
}

impl Totals {
    /// The projector over the tables of `schema`.
    pub fn new(schema: &str) -> Self {
        Totals {
            upsert: format!(
                "INSERT INTO \"{schema}\".fault_totals (tenant_id, topic, n, total) VALUES ($1, $2, 1, $3) \
                 ON CONFLICT (tenant_id, topic) DO UPDATE SET n = fault_totals.n + 1, \
                 total = fault_totals.total + EXCLUDED.total"
            ),
            last: format!(
                "INSERT INTO \"{schema}\".fault_last (tenant_id, position) VALUES ($1, $2) \
                 ON CONFLICT (tenant_id) DO UPDATE SET position = EXCLUDED.position"
            ),
            reset_totals: format!("DELETE FROM \"{schema}\".fault_totals WHERE tenant_id = $1"),
            reset_last: format!("DELETE FROM \"{schema}\".fault_last WHERE tenant_id = $1"),
        }
    }
}

#[async_trait]
impl Projector for Totals {
    fn name(&self) -> &str {
        NAME
    }
    fn topics(&self) -> Vec<String> {
        vec![]
    }
    fn strategy(&self) -> ProjectorStrategy {
        ProjectorStrategy {
            idempotency: "never replayed: the totals move in the checkpoint's transaction",
            retry: ProjectorStrategy::RETRY_DEFAULT,
            checkpoint: "the checkpoint commits with the totals, in the same database",
            recovery: ProjectorStrategy::RECOVERY_DEFAULT,
            rebuild: "reset deletes the tenant's totals; the log is replayed from position 1",
            lag: "totals trail the log by the lag gauge",
        }
    }
    async fn apply(&self, e: &Event, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        let Some(conn) = tx.postgres() else {
            return Err(drover::projector::apply_failed(
                "the fault projector needs PostgreSQL",
            ));
        };
        let v = e.payload["v"].as_i64().unwrap_or(0);
        sqlx::query(&self.upsert)
            .bind(e.tenant)
            .bind(&e.topic)
            .bind(v)
            .execute(&mut *conn)
            .await?;
        sqlx::query(&self.last)
            .bind(e.tenant)
            .bind(e.position)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
    async fn reset(&self, tenant: Uuid, tx: &mut ProjectionTx<'_>) -> drover::Result<()> {
        let Some(conn) = tx.postgres() else {
            return Err(drover::projector::apply_failed(
                "the fault projector needs PostgreSQL",
            ));
        };
        sqlx::query(&self.reset_totals)
            .bind(tenant)
            .execute(&mut *conn)
            .await?;
        sqlx::query(&self.reset_last)
            .bind(tenant)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

/// The projector process's flags.
#[derive(Debug, Parser)]
pub struct ProjectorArgs {
    /// The PostgreSQL URL.
    #[arg(long)]
    pub database_url: String,
    /// The drover schema (the projection's tables live there too).
    #[arg(long, default_value = "drover")]
    pub schema: String,
    /// Events per batch.
    #[arg(long, default_value_t = 50)]
    pub batch: u32,
    /// The lease on (projector, tenant).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub lease: Duration,
}

/// The projector process: runs [`Totals`] until killed.
pub async fn main(mut args: Vec<std::ffi::OsString>) -> ExitCode {
    // `procs::Proc` starts every process with the fault worker's `worker`
    // subcommand first; this binary has only the one mode.
    if args.get(1).is_some_and(|a| a == "worker") {
        args.remove(1);
    }
    let a = match ProjectorArgs::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    let store = match PgStore::connect(
        &a.database_url,
        PgOptions {
            schema: a.schema.clone(),
            max_connections: 4,
            ..PgOptions::default()
        },
    )
    .await
    {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot connect");
            return ExitCode::from(1);
        }
    };
    let store: Arc<dyn Store> = Arc::new(store);
    let runner = match ProjectorRunner::new(
        store,
        Arc::new(Totals::new(&a.schema)),
        ProjectorConfig {
            holder: format!("fault-projector-{}", std::process::id()),
            batch: a.batch,
            lease: a.lease,
            interval: Duration::from_millis(50),
            ..ProjectorConfig::default()
        },
    ) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "bad projector configuration");
            return ExitCode::from(2);
        }
    };
    runner.run(CancellationToken::new()).await;
    ExitCode::SUCCESS
}
