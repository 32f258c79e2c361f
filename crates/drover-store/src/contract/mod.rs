//! The contract suite: one set of cases every [`Store`] must pass, run
//! unchanged against PostgreSQL, SQLite and memory.
//!
//! A backend's test file calls [`contract_suite!`](crate::contract_suite)
//! with an async function that builds a fresh, migrated, empty store; the
//! macro expands to one `#[tokio::test]` per case, so a failure names the
//! rule it broke.

// This module is test code shipped for backends to run: a failed
// expectation is the report.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::{ManualClock, Store};

/// Work run after a case, such as dropping its schema.
pub type Cleanup = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// Opens a second store over the harness's database: another process's
/// view, with caches of its own (nothing shared with [`Harness::store`]
/// but the database).
pub type Peer = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Arc<dyn Store>> + Send>> + Send + Sync>;

/// Enqueues one item inside a transaction of the harness's own, on a
/// connection of the store's database, and commits: the backend's
/// transactional enqueue (`insert_in`), as `Queue::enqueue_in` runs it.
pub type InsertIn = Arc<
    dyn Fn(NewItem) -> Pin<Box<dyn Future<Output = drover_core::Result<Inserted>> + Send>>
        + Send
        + Sync,
>;

/// Writes one outbox row inside a transaction of the harness's own, on a
/// connection of the store's database, then commits (`true`) or rolls back
/// (`false`): the backend's `outbox_insert_in`, as
/// `Queue::outbox_write_in` runs it.
pub type OutboxIn = Arc<
    dyn Fn(
            crate::outbox::NewOutboxRow,
            bool,
        ) -> Pin<Box<dyn Future<Output = drover_core::Result<()>> + Send>>
        + Send
        + Sync,
>;

/// A fresh store for one case, and a way to let time pass.
pub struct Harness {
    /// The store under test: migrated and empty.
    pub store: Arc<dyn Store>,
    /// The store's clock when it can be moved (SQLite, memory); `None` means
    /// the store reads a real clock (PostgreSQL's `now()`), so time passes by
    /// sleeping.
    pub clock: Option<Arc<ManualClock>>,
    /// Runs after the case (drops the schema or file).
    pub cleanup: Option<Cleanup>,
    /// The backend's transactional enqueue; `None` for a store without
    /// caller transactions (memory), whose cases use `item_insert` instead.
    pub insert_in: Option<InsertIn>,
    /// The backend's outbox write in a caller's transaction; `None` for a
    /// store without caller transactions (memory).
    pub outbox_in: Option<OutboxIn>,
    /// A second store over the same database; `None` where a store is its
    /// own database (memory), whose cases use [`Harness::store`] again.
    pub peer: Option<Peer>,
}

impl Harness {
    /// Lets `d` pass on the store's clock.
    pub async fn pass(&self, d: Duration) {
        match &self.clock {
            Some(c) => c.advance(d),
            None => tokio::time::sleep(d).await,
        }
    }

    /// Enqueues through the transactional path ([`Harness::insert_in`]), or
    /// the single insert where the store has none.
    pub async fn insert_in(&self, item: NewItem) -> drover_core::Result<Inserted> {
        match &self.insert_in {
            Some(f) => f(item).await,
            None => self.store.item_insert(&item).await,
        }
    }

    /// A second store over the same database ([`Harness::peer`]), or the
    /// store itself where there is none.
    pub async fn peer(&self) -> Arc<dyn Store> {
        match &self.peer {
            Some(open) => open().await,
            None => self.store.clone(),
        }
    }

    /// Runs the cleanup.
    pub async fn finish(mut self) {
        if let Some(f) = self.cleanup.take() {
            f().await;
        }
    }
}

use chrono::{DateTime, Utc};
use serde_json::json;
use uuid::Uuid;

use crate::{ClaimParams, ClaimRef, FailOutcome, FailParams, ListFilter, WorkerRow};
use drover_core::error::ErrorKind;
use drover_core::item::{InsertResult, Inserted, Item, NewItem, Status};
use drover_core::rules::RetryPolicy;

/// Expands to one `#[tokio::test]` per contract case, each building a fresh
/// store with `$setup` (an `async fn() -> Harness`).
#[macro_export]
macro_rules! contract_suite {
    ($setup:path) => {
        $crate::__contract_cases!($setup;
            insert_stamps_and_reads_back,
            insert_id_exists_changes_nothing,
            insert_key_exists_found_by_key,
            same_key_other_tenant_inserted,
            insert_many_reports_each,
            other_tenants_id_single_is_conflict,
            other_tenants_id_bulk_is_id_taken,
            own_key_wins_over_other_tenants_id,
            other_tenants_id_in_transaction_is_conflict,
            claim_exclusive_under_concurrency,
            claim_order_priority_then_available_at,
            claim_respects_limit,
            claim_filters_lane_and_kinds,
            claim_skips_future_items,
            claim_stamps_fresh_token_and_seq,
            complete_after_lease_refused,
            complete_with_earlier_token_refused,
            token_writes_from_every_state,
            fail_requeues_with_delay,
            dead_letter_at_exactly_max_attempts,
            fatal_fail_dead_letters_now,
            defer_and_release_spend_no_attempt,
            extend_lease_keeps_item,
            requeue_stale_counts_an_attempt,
            requeue_stale_is_per_tenant,
            requeue_stale_dead_letters_at_budget,
            requeue_stale_respects_limit,
            tenant_reads_and_writes_isolated,
            purge_leaves_pending_claimed_and_newer,
            gauges_report_oldest_age_and_failed,
            counts_per_lane_kind_status,
            counts_of_one_lane,
            counts_exact_through_settle_retry_and_purge,
            complete_many_refuses_stale_lands_others,
            fail_orphaned_is_fenced,
            cancel_and_retry_by_operator,
            list_filters,
            worker_beat_upserts,
            worker_silent_two_intervals_is_lost,
            worker_purge_removes_only_long_silent,
            wakeup_after_insert,
            wakeup_after_every_transition_that_makes_work_available,
            sweep_lease_is_exclusive,
            sweep_lease_passes_from_a_stalled_holder,
            sweep_last_pass_is_recorded_by_a_completed_release,
            table_garbage_lists_the_stores_own_tables,
            table_vacuum_of_an_unknown_table_is_not_found,
            table_vacuum_of_an_own_table,
            schedule_upsert_never_moves_last_tick,
            schedule_advance_is_compare_and_set,
            schedule_advance_never_overwrites_an_item,
            schedule_advance_one_winner_under_concurrency,
            schedule_purge_removes_only_unseen_rows,
            db_now_is_the_stores_clock,
            lane_set_from_every_state,
            lane_states_are_per_lane,
            list_filters_key_time_error_and_cursor,
            token_found_by_hash_until_revoked,
            worker_token_keeps_its_work_grants,
            marker_begin_in_flight_mismatch_replay,
            marker_scoped_by_tenant_principal_and_route,
            marker_begin_one_winner_under_concurrency,
            marker_expired_or_stale_taken_over_and_purged,
            marker_begin_many_answers_each_claim,
            insert_each_keeps_each_outcome,
            gathered_write_stores_each_answer,
            groups_stored_listed_and_carried,
            limit_operator_wins_until_cleared,
            limit_on_a_kind_bounds_claims,
            limit_on_a_lane_bounds_claims,
            limit_per_group_bounds_each_group,
            limit_exact_under_concurrent_claimers,
            limit_far_from_full_claims_each_item_once,
            limit_full_backlog_holds_back_only_its_scope,
            ordered_group_runs_in_enqueue_order,
            ordered_group_handover_claims_the_freed_slot,
            handover_takes_the_freed_groups_next_item,
            ordered_group_dead_letter_continue_or_hold,
            ordered_group_exact_under_concurrent_claimers,
            rate_burst_admitted_then_the_rate_holds,
            rate_over_rate_item_claimable_at_its_instant,
            rate_exact_under_concurrent_claimers,
            rate_operator_wins_until_cleared,
            rate_bound_holds_in_every_window,
            rate_idle_cells_purged,
            closure_group_held_until_its_time,
            closure_of_kind_holds_all_groups_and_reopens_at_once,
            closure_handler_close_only_moves_later,
            closure_concurrent_claimers_never_take_a_closed_group,
            closure_seen_at_once_by_another_store,
            fair_small_tenant_interleaved_with_a_backlog,
            fair_weights_split_the_starts,
            fair_lone_tenant_takes_all,
            fair_priorities_order_items_within_a_tenant,
            fair_spreading_over_groups_gains_nothing,
            fair_idle_tenant_banks_no_credit,
            fair_off_lane_claims_in_priority_then_age_order,
            fair_limits_still_hold,
            fair_idle_passes_collected,
            fair_waiting_counted_up_to_the_cap,
            fair_share_under_a_limit,
            fair_share_under_a_rate,
            fair_share_on_the_handover,
            fair_refused_tenant_leaves_the_claim_to_others,
            fair_group_small_group_interleaved,
            fair_group_by_tenant_lane_keeps_claim_order,
            fair_group_spreading_still_gains_nothing,
            fair_group_under_a_limit_and_on_the_handover,
            fair_group_idle_passes_collected,
            fair_group_ungrouped_items_are_one_bucket,
            fair_group_list_of_another_process,
            parked_backlog_leaves_other_groups_claimable,
            parked_ordered_group_drains_in_enqueue_order,
            parked_items_given_back_when_the_limit_is_cleared,
            cancel_discards_a_dead_letter_with_exact_counts,
            result_stored_with_completion,
            stale_completion_with_result_stores_nothing,
            result_purged_with_item,
            progress_fenced_and_kept_across_retry,
            unique_while_active_exact_under_concurrency,
            dependant_waits_for_all_its_dependencies,
            dependant_reads_its_dependencies_results,
            dependency_failure_policy_fail_cascades,
            dependency_failure_policy_run_runs_anyway,
            dependency_failure_policy_wait_holds_for_an_operator,
            dependency_refusals_write_nothing,
            dag_in_one_call_with_forward_references,
            dag_in_a_caller_transaction,
            release_under_concurrent_finishes,
            batch_callback_once_with_counts,
            batch_callback_exactly_once_under_concurrent_finishes,
            batch_when_filters,
            purge_takes_link_rows_with_their_items,
            runs_record_each_way_a_claim_ends,
            runs_lease_lost_and_operator_cancel,
            runs_bounded_per_item,
            runs_purged_by_the_cutoff,
            counts_of_one_tenant,
            throughput_rollup_after_settle_and_running_rows,
            queue_wait_minutes_keep_the_largest_and_purge_old,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __contract_cases {
    ($setup:path; $($case:ident),* $(,)?) => {
        /// The number of contract cases this file runs.
        #[allow(dead_code)]
        pub const CONTRACT_CASES: usize = [$(stringify!($case)),*].len();
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let h = $setup().await;
                $crate::contract::$case(&h).await;
                h.finish().await;
            }
        )*
    };
}

/// A lease no case outlives.
pub const LONG: Duration = Duration::from_secs(60);
/// Short enough to pass by sleeping on PostgreSQL, long enough that the
/// statements between a claim and the fenced write fit in it.
pub const SHORT: Duration = Duration::from_millis(600);
/// Past [`SHORT`]: a lease of `SHORT` has passed after sleeping this long.
pub const PAST_SHORT: Duration = Duration::from_millis(900);

/// The first tenant of the cross-tenant cases.
pub fn tenant_a() -> Uuid {
    Uuid::from_u128(0xA)
}
/// The second tenant of the cross-tenant cases.
pub fn tenant_b() -> Uuid {
    Uuid::from_u128(0xB)
}

fn new(kind: &str) -> NewItem {
    NewItem::new(kind, json!({"k": kind}))
}

fn claim_params(lane: &str, limit: u32, lease: Duration) -> ClaimParams {
    ClaimParams {
        lane: lane.into(),
        kinds: vec![],
        worker_id: "w1".into(),
        lease,
        limit,
    }
}

async fn put(h: &Harness, item: NewItem) -> Item {
    let ins = h.store.item_insert(&item).await.expect("insert");
    assert_eq!(ins.result, InsertResult::Inserted);
    ins.item
}

async fn claim_one(h: &Harness, lease: Duration) -> (Item, ClaimRef) {
    let got = h
        .store
        .item_claim(&claim_params("default", 1, lease))
        .await
        .expect("claim");
    assert_eq!(got.len(), 1, "expected one claimable item");
    let item = got.into_iter().next().expect("one item");
    let r = ClaimRef::of(&item).expect("claimed item has a token");
    (item, r)
}

async fn get(h: &Harness, tenant: Uuid, id: Uuid) -> Item {
    h.store
        .item_get(tenant, id)
        .await
        .expect("get")
        .expect("item exists")
}

fn fail_params(delay: Duration) -> FailParams {
    FailParams {
        error: "boom".into(),
        retry_delay: delay,
        fatal: false,
    }
}

/// Asserts `r` failed with `kind`.
pub fn assert_kind<T: std::fmt::Debug>(r: drover_core::Result<T>, kind: ErrorKind, what: &str) {
    match r {
        Err(e) => assert_eq!(e.kind(), kind, "{what}: got {e}"),
        Ok(v) => panic!("{what}: expected {kind:?}, got Ok({v:?})"),
    }
}

fn approx(a: DateTime<Utc>, b: DateTime<Utc>, tol_ms: i64) -> bool {
    (a - b).num_milliseconds().abs() <= tol_ms
}

mod access;
mod claims;
mod closures;
pub mod events;
mod fair_groups;
mod fair_limited;
mod fairness;
mod lanes;
mod limits;
mod links;
mod listing;
mod operations;
pub mod orchestration;
mod ordered;
mod parking;
mod rates;
pub mod reconcile;
mod results;
mod runs;
mod schedule;
mod sweep;
mod throughput;
mod vacuum;
mod wakeups;
mod writes;

pub use access::*;
pub use claims::*;
pub use closures::*;
pub use fair_groups::*;
pub use fair_limited::*;
pub use fairness::*;
pub use lanes::*;
pub use limits::*;
pub use links::*;
pub use listing::*;
pub use operations::*;
pub use ordered::*;
pub use parking::*;
pub use rates::*;
pub use results::*;
pub use runs::*;
pub use schedule::*;
pub use sweep::*;
pub use throughput::*;
pub use vacuum::*;
pub use wakeups::*;
pub use writes::*;
