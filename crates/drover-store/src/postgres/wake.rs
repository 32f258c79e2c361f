//! Wake-ups on PostgreSQL.
//!
//! The listener owns one dedicated connection (a `PgListener`, outside the
//! pool's accounting) that `LISTEN`s on [`WAKE_CHANNEL`], keeps the
//! notifications of its own schema and forwards them, lane and nonce parsed
//! ([`Wake::parse`]), into the store's broadcast. When the connection drops it reconnects with capped
//! exponential backoff; wake-ups lost meanwhile only delay work until the
//! workers' poll.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;

use super::WAKE_CHANNEL;
use super::notifier::Pending;
use crate::wake::{Wake, WakeBus};
use drover_core::error::Result;

/// The first reconnect waits this long.
const RECONNECT_MIN: Duration = Duration::from_millis(100);
/// No reconnect waits longer than this.
const RECONNECT_MAX: Duration = Duration::from_secs(30);

/// Starts the listener task; it ends when `shutdown` is cancelled.
pub(super) fn spawn_listener(
    pool: PgPool,
    schema: String,
    wake: WakeBus,
    shutdown: CancellationToken,
    ready: tokio::sync::watch::Sender<bool>,
    own: Arc<Pending>,
) {
    tokio::spawn(async move {
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = listen(pool, schema, wake, ready, own) => {}
        }
    });
}

/// Listens forever, reconnecting with backoff.
async fn listen(
    pool: PgPool,
    schema: String,
    wake: WakeBus,
    ready: tokio::sync::watch::Sender<bool>,
    own: Arc<Pending>,
) {
    let prefix = format!("{schema}:");
    let mut backoff = RECONNECT_MIN;
    loop {
        match connect(&pool).await {
            Ok(mut listener) => {
                tracing::debug!(schema = %schema, "wake-up listener connected");
                mark_ready(&ready);
                backoff = RECONNECT_MIN;
                loop {
                    match listener.try_recv().await {
                        Ok(Some(n)) => {
                            if let Some(rest) = n.payload().strip_prefix(&prefix) {
                                let w = Wake::parse(rest);
                                // This store's own enqueue: its workers were woken
                                // with this nonce at the commit.
                                if !own.is_own(w.nonce) {
                                    wake.send(w);
                                }
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

/// Records that LISTEN is in place, for every waiter now or later.
///
/// `send_replace`, not `send`: `send` keeps the old value when no receiver
/// is subscribed at that instant, and the waiter of [`Store::wakeups`]
/// subscribes only after spawning this task, so a listener that was
/// faster than that left the flag false and every worker start waited the
/// whole bound (5 s) before its first claim.
///
/// [`Store::wakeups`]: crate::Store::wakeups
fn mark_ready(ready: &tokio::sync::watch::Sender<bool>) {
    ready.send_replace(true);
}

async fn connect(pool: &PgPool) -> Result<PgListener> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(WAKE_CHANNEL).await?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_is_seen_by_a_waiter_that_subscribes_after_the_listen() {
        // As the store makes it: the first receiver dropped at once.
        let ready = tokio::sync::watch::channel(false).0;
        mark_ready(&ready);
        assert!(*ready.subscribe().borrow());
    }
}
