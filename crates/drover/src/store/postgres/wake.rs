//! Wake-ups and the sweep lock on PostgreSQL.
//!
//! The listener owns one dedicated connection (a `PgListener`, outside the
//! pool's accounting) that `LISTEN`s on [`WAKE_CHANNEL`], keeps the
//! notifications of its own schema and forwards their lanes into the store's
//! broadcast. When the connection drops it reconnects with capped
//! exponential backoff; wake-ups lost meanwhile only delay work until the
//! workers' poll. The sweep lock is a session advisory lock, so its
//! connection is detached from the pool and kept for as long as the lock is
//! held.

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::{PgStore, WAKE_CHANNEL, sql};
use crate::error::Result;

/// The first reconnect waits this long.
const RECONNECT_MIN: Duration = Duration::from_millis(100);
/// No reconnect waits longer than this.
const RECONNECT_MAX: Duration = Duration::from_secs(30);

/// Starts the listener task; it ends when `shutdown` is cancelled.
pub(super) fn spawn_listener(
    pool: PgPool,
    schema: String,
    wake: broadcast::Sender<String>,
    shutdown: CancellationToken,
    ready: tokio::sync::watch::Sender<bool>,
) {
    tokio::spawn(async move {
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = listen(pool, schema, wake, ready) => {}
        }
    });
}

/// Listens forever, reconnecting with backoff.
async fn listen(
    pool: PgPool,
    schema: String,
    wake: broadcast::Sender<String>,
    ready: tokio::sync::watch::Sender<bool>,
) {
    let prefix = format!("{schema}:");
    let mut backoff = RECONNECT_MIN;
    loop {
        match connect(&pool).await {
            Ok(mut listener) => {
                tracing::debug!(schema = %schema, "wake-up listener connected");
                let _ = ready.send(true);
                backoff = RECONNECT_MIN;
                loop {
                    match listener.try_recv().await {
                        Ok(Some(n)) => {
                            if let Some(lane) = n.payload().strip_prefix(&prefix) {
                                // No subscriber is fine: a wake-up is a hint.
                                let _ = wake.send(lane.to_owned());
                            }
                        }
                        Ok(None) => {
                            tracing::warn!(schema = %schema, "wake-up listener lost its connection; reconnecting");
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(schema = %schema, error = %e, "wake-up listener failed; reconnecting");
                            break;
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(schema = %schema, error = %e, retry_in = ?backoff,
                    "wake-up listener cannot connect");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(RECONNECT_MAX);
    }
}

async fn connect(pool: &PgPool) -> Result<PgListener> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(WAKE_CHANNEL).await?;
    Ok(listener)
}

/// Takes the schema's sweep lock on a dedicated connection, or reports that
/// another session (or this store, already) holds it.
pub(super) async fn sweep_try_lock(store: &PgStore) -> Result<bool> {
    let mut held = store.sweep_conn.lock().await;
    if held.is_some() {
        // Not re-entrant: one sweeper at a time, even within one store.
        return Ok(false);
    }
    let Some(session) = store.session_pool() else {
        // No session to hold the lock in: sweep without it. Every step is
        // idempotent and conditional, so concurrent sweeps repeat work but
        // never double an effect.
        if !store
            .sweep_warned
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            tracing::warn!(
                "the database URL goes through a transaction pooler and {} is not set: \
                 every worker sweeps, without the sweep lock",
                super::DIRECT_URL_VAR
            );
        }
        return Ok(true);
    };
    // Detached: a session lock must outlive this call, and a pooled
    // connection would carry it to whoever acquires the connection next.
    let mut conn = session.acquire().await?.detach();
    let got: bool = sqlx::query_scalar(sql::SWEEP_TRY_LOCK)
        .bind(&store.schema)
        .fetch_one(&mut conn)
        .await?;
    if got {
        *held = Some(conn);
    } else {
        let _ = sqlx::Connection::close(conn).await;
    }
    Ok(got)
}

/// Gives up the sweep lock if held, closing its connection.
pub(super) async fn sweep_unlock(store: &PgStore) -> Result<()> {
    let Some(mut conn) = store.sweep_conn.lock().await.take() else {
        return Ok(());
    };
    let unlocked = sqlx::query_scalar::<_, bool>(sql::SWEEP_UNLOCK)
        .bind(&store.schema)
        .fetch_one(&mut conn)
        .await;
    // Closing the session releases the lock even if the unlock failed.
    let _ = sqlx::Connection::close(conn).await;
    unlocked?;
    Ok(())
}
