//! Lanes as an operator steers them: pause and resume, persisted.
//!
//! A lane exists implicitly (items name it); this module owns only its
//! operational state, one row per lane that was ever paused or resumed. A
//! lane with no row is running.
//!
//! The state is **installation-wide in meaning, tenant-scoped in form**: a
//! lane is shared by every tenant's items and drained by workers claiming
//! across tenants (a system operation), so pausing it stops it for all of
//! them. Every row belongs to the nil tenant (a `tenant_id` column and, on
//! PostgreSQL, row-level security like every table); the store reads and
//! writes it under the system role, as it does the workers table. For the
//! same reason only a principal that is not confined to one tenant may
//! pause or resume ([`Queue::lane_pause`](crate::Queue::lane_pause); the
//! queue's lane API lives in `queue/lanes.rs`).
//!
//! Invariants (the contract cases in `store/contract/lanes.rs` check each
//! backend):
//!
//! - Pausing a paused lane, or resuming a running one, changes nothing but
//!   the stamp of who asked last; the answer is the row as it now stands.
//! - No worker claims from a paused lane once it has seen the pause: each
//!   worker re-reads the paused set once per poll interval (not per item,
//!   so the claim statement stays as cheap as before), so a pause is
//!   honoured within one poll interval; items already claimed run on.
//!   [`Queue::claim`](crate::Queue::claim) itself does not consult the
//!   state: a caller claiming by hand decides for itself.

pub use crate::store::lane::{LaneSetParams, LaneState, LaneStore};
