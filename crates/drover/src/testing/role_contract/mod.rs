//! Contract cases that drive a role against a backend: the outbox relay
//! (with the queue's writers) and the projector runner, run by every
//! backend's runner through `outbox_contract_suite!` and
//! `events_contract_suite!` (both in [`full_contract_suite!`](crate::full_contract_suite),
//! the whole suite, which lives here for that reason). They sit here,
//! above the roles they drive, because the store's own contract cases
//! (`store::contract`) import nothing above the store; they use that
//! module's [`Harness`](crate::store::contract::Harness) and helpers.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

pub mod outbox;
mod outbox_fixtures;
mod outbox_rules;
pub mod projector;

/// Expands the whole contract suite against one backend: every part (the
/// items' cases, orchestration, reconcile, outbox, the event log and the
/// projectors), one `#[tokio::test]` per case, each building a fresh store
/// with `$setup` (an `async fn() -> Harness`). Each backend's runner calls
/// this once, so no backend can skip a part; a new part is added here.
#[macro_export]
macro_rules! full_contract_suite {
    ($setup:path) => {
        $crate::contract_suite!($setup);
        $crate::orchestration_contract_suite!($setup);
        $crate::reconcile_contract_suite!($setup);
        $crate::outbox_contract_suite!($setup);
        $crate::events_contract_suite!($setup);
    };
}
