//! The sweep lease's seam: [`SweepStore`]. One row on the store's clock
//! (the database clock on PostgreSQL) names the one process that sweeps;
//! a holder that stalls loses it when its lease passes, renewal and
//! release are fenced on the holder's token in the statement itself, and
//! the end of the last completed pass is kept beside it.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use drover_core::error::Result;

/// The sweep lease (system operations). A supertrait of
/// [`Store`](super::Store).
#[async_trait]
pub trait SweepStore: Send + Sync {
    /// Takes the sweep lease for `holder` when nobody holds it or its
    /// holder's lease has passed (on the store's clock: the database clock
    /// on PostgreSQL), for `lease` from now. `Some(token)` when taken, `None`
    /// when another holder's lease still runs. Not re-entrant: a holder
    /// asking again while its lease runs gets `None`.
    ///
    /// The lease is a row, not a session: a holder that stalls (paused,
    /// hung, partitioned) loses it when its lease passes, and any worker may
    /// take it then.
    async fn sweep_lease_take(&self, holder: &str, lease: Duration) -> Result<Option<Uuid>>;

    /// Extends the sweep lease held under `token` to `lease` from now.
    /// Fenced: [`Error::Conflict`](drover_core::Error::Conflict) when `token` no
    /// longer holds it (released, or passed, whether or not taken since).
    async fn sweep_lease_renew(&self, token: Uuid, lease: Duration) -> Result<()>;

    /// Gives up the sweep lease held under `token`, so the next sweeper need
    /// not wait for it to pass; `completed` records now as the end of the
    /// last completed sweep pass. Fenced on `token`: when it no longer holds
    /// nothing changes and the answer is `false` (not an error).
    async fn sweep_lease_release(&self, token: Uuid, completed: bool) -> Result<bool>;

    /// When the last completed sweep pass of any process ended, if one has.
    async fn sweep_last_pass(&self) -> Result<Option<DateTime<Utc>>>;
}
