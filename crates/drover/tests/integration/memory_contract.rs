//! The contract suite against the memory backend.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;

use drover::store::ManualClock;
use drover::store::contract::Harness;
use drover::store::memory::MemoryStore;

async fn memory_harness() -> Harness {
    let clock = Arc::new(ManualClock::new());
    Harness {
        store: Arc::new(MemoryStore::with_clock(clock.clone())),
        clock: Some(clock),
        cleanup: None,
        insert_in: None,
        outbox_in: None,
        peer: None,
    }
}

drover::full_contract_suite!(memory_harness);
